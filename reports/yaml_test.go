package reports_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-dev/baton/reports"
)

// canonical is res as JSON: YAML and JSON decode numbers in a generic
// Config to different Go types, so round trips compare this form.
func canonical(t *testing.T, res reports.Results) string {
	t.Helper()
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func TestYAMLRoundTripMatchesJSON(t *testing.T) {
	for name, res := range map[string]reports.Results{"sample": sample(), "certification run": certRun(reports.Failed)} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			yp, jp := filepath.Join(dir, "results.yaml"), filepath.Join(dir, "results.json")
			if err := reports.WriteYAML(yp, res); err != nil {
				t.Fatalf("WriteYAML: %v", err)
			}
			if err := reports.WriteJSON(jp, res); err != nil {
				t.Fatal(err)
			}
			fromYAML, err := reports.ReadYAML(yp)
			if err != nil {
				t.Fatalf("ReadYAML: %v", err)
			}
			fromJSON, err := reports.ReadJSON(jp)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := canonical(t, fromYAML), canonical(t, res); a != b {
				t.Errorf("YAML round trip changed the results:\n got %s\nwant %s", a, b)
			}
			if a, b := canonical(t, fromYAML), canonical(t, fromJSON); a != b {
				t.Errorf("results.yaml and results.json disagree:\nyaml %s\njson %s", a, b)
			}
			raw, _ := os.ReadFile(yp)
			for _, key := range []string{"baton_version:", "spec_revision:", "started_at:", "verdict: failed", "levels:", "gpu:"} {
				if !strings.Contains(string(raw), key) {
					t.Errorf("results.yaml lacks %q", key)
				}
			}
		})
	}
}

func TestParseYAMLMalformed(t *testing.T) {
	tests := []struct {
		name, raw string
		is        error
	}{
		{"empty", ``, nil},
		{"not a mapping", `- a`, nil},
		{"unknown key", "tool: baton check\nverdik: passed\n", nil},
		{"unknown outcome", "verdict: PASSED\n", reports.ErrUnknownOutcome},
		{"unknown rule outcome", "rules:\n  - rule: SU-2\n    outcome: skipped\n", reports.ErrUnknownOutcome},
		{"wrong type", "duration_ms: soon\n", nil},
		{"two documents", "verdict: passed\n---\nverdict: failed\n", nil},
		{"null document", "&0", reports.ErrUnknownOutcome},
		{"no verdict", "&0000:", reports.ErrUnknownOutcome},
		{"null level outcome", "levels:\n 00000:\nverdict: passed", reports.ErrUnknownOutcome},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := reports.ParseYAML([]byte(tt.raw))
			if err == nil {
				t.Fatalf("ParseYAML(%q) = nil error", tt.raw)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("ParseYAML(%q) = %v; want %v", tt.raw, err, tt.is)
			}
		})
	}
}
