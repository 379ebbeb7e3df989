package world

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestDrawSettingsValid: every drawn setting is usable, and the draw is a function of the seed.
func TestDrawSettingsValid(t *testing.T) {
	for seed := uint64(0); seed < 1000; seed++ {
		s := DrawSettings(seed)
		if err := s.Validate(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if strings.Join(s.Lines(), "\n") != strings.Join(DrawSettings(seed).Lines(), "\n") {
			t.Fatalf("seed %d: two draws differ", seed)
		}
	}
	// Lines prints every field (a new field must be added to its order).
	var m map[string]any
	if err := json.Unmarshal([]byte(settingsJSON(t, DrawSettings(1))), &m); err != nil {
		t.Fatal(err)
	}
	if got := len(DrawSettings(1).Lines()); got != len(m) {
		t.Errorf("Lines prints %d settings, the struct has %d", got, len(m))
	}
}

// TestValidateRejectsMalformedSettings: each broken field is named.
func TestValidateRejectsMalformedSettings(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Settings)
		wants string
	}{
		{"backend", func(s *Settings) { s.Backend = "nfs" }, "backend"},
		{"no consumers", func(s *Settings) { s.Consumers = 0 }, "consumers"},
		{"negative handoffs", func(s *Settings) { s.Handoffs = -1 }, "handoffs"},
		{"zero buffers", func(s *Settings) { s.BuffersPerConsumer = 0 }, "sizes"},
		{"ttl below default", func(s *Settings) { s.MaxTTLMs = s.DefaultTTLMs - 1 }, "times"},
		{"zero timeout", func(s *Settings) { s.ConsumerTimeoutMs = 0 }, "timeouts"},
		{"probability", func(s *Settings) { s.FireProbability = 1.5 }, "probability"},
		{"unknown site", func(s *Settings) { s.Faults = []Site{"net.teleport"} }, "net.teleport"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := DrawSettings(7)
			tc.edit(&s)
			err := s.Validate()
			if !errors.Is(err, ErrBadSettings) || !strings.Contains(err.Error(), tc.wants) {
				t.Fatalf("Validate = %v, want ErrBadSettings naming %q", err, tc.wants)
			}
			if r := Run(7, s, Options{}); r.Verdict != Crash || !strings.Contains(r.Failure, tc.wants) {
				t.Fatalf("Run with bad settings = %v %q, want Crash naming %q", r.Verdict, r.Failure, tc.wants)
			}
		})
	}
}

// TestReadTraceHeaderMalformed: a trace whose first line is not a usable header is refused.
func TestReadTraceHeaderMalformed(t *testing.T) {
	good := `{"seed":5,"settings":` + settingsJSON(t, DrawSettings(5)) + `}`
	cases := []struct{ name, text, wants string }{
		{"empty", "", "empty trace"},
		{"not json", "SEED=5\n", "not JSON"},
		{"no seed", `{"settings":{}}`, "no seed"},
		{"no settings", `{"seed":5}`, "no settings"},
		{"unknown field", `{"seed":5,"settings":{},"extra":1}`, "unknown field"},
		{"bad settings", `{"seed":5,"settings":{"backend":"nfs"}}`, "backend"},
		{"unknown mutant", strings.Replace(good, `{"seed":5,`, `{"seed":5,"mutant":"eat-buffers",`, 1), "unknown mutant"},
		{"seed not a number", `{"seed":"five","settings":{}}`, "seed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadTraceHeader(strings.NewReader(tc.text))
			if !errors.Is(err, ErrBadSettings) || !strings.Contains(err.Error(), tc.wants) {
				t.Fatalf("ReadTraceHeader = %v, want ErrBadSettings naming %q", err, tc.wants)
			}
		})
	}
	h, err := ReadTraceHeader(strings.NewReader(good + "\n{\"step\":1}\n"))
	if err != nil || h.Seed != 5 || h.Settings.Backend != DrawSettings(5).Backend {
		t.Fatalf("good header: %+v, %v", h, err)
	}
}

// TestParseMutant: known names parse; unknown ones are refused with the list.
func TestParseMutant(t *testing.T) {
	for m := range Mutants {
		if got, err := ParseMutant(string(m)); err != nil || got != m {
			t.Errorf("ParseMutant(%q) = %q, %v", m, got, err)
		}
	}
	for _, s := range []string{"", "none"} {
		if got, err := ParseMutant(s); err != nil || got != MutantNone {
			t.Errorf("ParseMutant(%q) = %q, %v", s, got, err)
		}
	}
	if _, err := ParseMutant("Q-1"); !errors.Is(err, ErrBadSettings) || !strings.Contains(err.Error(), string(MutantReadWithoutClaim)) {
		t.Errorf("ParseMutant(unknown) = %v", err)
	}
}

func settingsJSON(t *testing.T, s Settings) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
