package reports_test

import (
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/reports"
)

// sample is a run with one case of every outcome, a rule-less harness case
// and a rule no case checked.
func sample() reports.Results {
	cases := []reports.CaseResult{
		{Rule: "SU-2", Name: "SU-2 replay of a spent reference is rejected before any write", Level: "core", Labels: []string{"SU-2", "level:core"}, Outcome: reports.Passed, DurationMs: 1250},
		{Rule: "SU-4", Name: "SU-4 malformed reference <nested> & \"quoted\"", Level: "core", Labels: []string{"SU-4", "level:core"}, Outcome: reports.Failed, Message: "Consume(ref=3f2a..) = code OK, 12 tokens; want INVALID_ARGUMENT\n\x1b[1mat\x1b[0m suite/su4.go:12", DurationMs: 30},
		{Rule: "SU-1", Name: "consumed at most once", Level: "core", Outcome: reports.Error, Message: "harness error: dial producer: connection refused", DurationMs: 5},
		{Rule: "L-2", Name: "L-2 D without decode preparation", Level: "core", Outcome: reports.NotApplicable, Message: "not applicable: target serves no D"},
		{Rule: "X-1", Name: "X-1 failed cleanup makes Health NOT_READY", Level: "lifecycle", Outcome: reports.NotVerifiable, Message: "not verifiable: profile declares no test hooks"},
		{Name: "[BeforeSuite]", Outcome: reports.Error, Message: "harness error: probe failed"},
	}
	res := reports.Summarize(cases, map[string][]string{
		"core":      {"SU-1", "SU-2", "SU-4", "L-2"},
		"lifecycle": {"X-1", "X-2"},
	})
	res.Tool = "baton check"
	res.BatonVersion = "(devel)"
	res.SpecRevision = "baton.encoder.v1"
	res.Target = "reference-engine"
	res.StartedAt = time.Date(2025, 11, 29, 14, 43, 0, 0, time.UTC)
	res.DurationMs = 2345
	res.LabelFilter = "level:core || level:lifecycle"
	res.GPU = []reports.GPUDevice{} // written as [] whatever it is; read back as []
	return res
}

func TestJSONRoundTrip(t *testing.T) {
	res := sample()
	path := filepath.Join(t.TempDir(), "sub", "results.json")
	if err := reports.WriteJSON(path, res); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	got, err := reports.ReadJSON(path)
	if err != nil {
		t.Fatalf("ReadJSON: %v", err)
	}
	if !reflect.DeepEqual(got, res) {
		t.Errorf("round trip changed the results:\n got %+v\nwant %+v", got, res)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"baton_version"`, `"spec_revision"`, `"started_at"`, `"duration_ms"`, `"label_filter"`, `"verdict": "failed"`, `"outcome": "not applicable"`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("results.json lacks %s", key)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("directory holds %d entries; want only results.json (no temporary file left)", len(entries))
	}
}

func TestParseJSONMalformed(t *testing.T) {
	tests := []struct {
		name, raw string
		is        error
	}{
		{"not json", `PASS SU-2`, nil},
		{"truncated", `{"tool": "baton check", "rules": [`, nil},
		{"unknown case outcome", `{"cases": [{"rule": "SU-2", "outcome": "skipped"}]}`, reports.ErrUnknownOutcome},
		{"unknown verdict", `{"verdict": "PASSED"}`, reports.ErrUnknownOutcome},
		{"unknown level outcome", `{"levels": {"core": "ok"}}`, reports.ErrUnknownOutcome},
		{"empty outcome", `{"rules": [{"rule": "SU-2", "outcome": ""}]}`, reports.ErrUnknownOutcome},
		{"wrong type", `{"duration_ms": "12"}`, nil},
		{"trailing data", `{"verdict": "passed"} {"verdict": "failed"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := reports.ParseJSON([]byte(tt.raw))
			if err == nil {
				t.Fatalf("ParseJSON(%s) succeeded; want an error", tt.raw)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("ParseJSON(%s) = %v; want errors.Is %v", tt.raw, err, tt.is)
			}
		})
	}
	if _, err := reports.ReadJSON(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("ReadJSON of a missing file succeeded")
	}
}

// The test's own view of JUnit, independent of the writer's types.
type xSuites struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []struct {
		Name       string `xml:"name,attr"`
		Tests      int    `xml:"tests,attr"`
		Failures   int    `xml:"failures,attr"`
		Errors     int    `xml:"errors,attr"`
		Skipped    int    `xml:"skipped,attr"`
		Properties []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Time      string `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"error"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestJUnit(t *testing.T) {
	res := sample()
	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := reports.WriteJUnit(path, res); err != nil {
		t.Fatalf("WriteJUnit: %v", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc xSuites
	if err := xml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("junit.xml is not valid XML: %v\n%s", err, raw)
	}
	// 6 cases + 1 synthetic testcase for X-2 (no case checked it).
	if doc.Tests != 7 || doc.Failures != 1 || doc.Errors != 2 || doc.Skipped != 3 {
		t.Errorf("testsuites counts tests=%d failures=%d errors=%d skipped=%d; want 7 1 2 3", doc.Tests, doc.Failures, doc.Errors, doc.Skipped)
	}
	if len(doc.Suites) != 1 {
		t.Fatalf("got %d testsuites; want 1", len(doc.Suites))
	}
	s := doc.Suites[0]
	if s.Tests != 7 || s.Failures != 1 || s.Errors != 2 || s.Skipped != 3 || len(s.Cases) != 7 {
		t.Errorf("testsuite counts tests=%d failures=%d errors=%d skipped=%d cases=%d; want 7 1 2 3 7", s.Tests, s.Failures, s.Errors, s.Skipped, len(s.Cases))
	}
	props := map[string]string{}
	for _, p := range s.Properties {
		props[p.Name] = p.Value
	}
	for k, want := range map[string]string{"verdict": "failed", "level.core": "failed", "level.lifecycle": "not verifiable", "target": "reference-engine", "label_filter": "level:core || level:lifecycle"} {
		if props[k] != want {
			t.Errorf("property %s = %q; want %q", k, props[k], want)
		}
	}
	byName := map[string]int{}
	for i, c := range s.Cases {
		byName[c.Name] = i
		if c.Classname == "" {
			t.Errorf("testcase %q has no classname", c.Name)
		}
	}
	get := func(name string) int {
		i, ok := byName[name]
		if !ok {
			t.Fatalf("no testcase named %q; have %v", name, byName)
		}
		return i
	}

	pass := s.Cases[get("SU-2 replay of a spent reference is rejected before any write")]
	if pass.Classname != "SU" || pass.Time != "1.250" || pass.Failure != nil || pass.Error != nil || pass.Skipped != nil {
		t.Errorf("passed testcase = %+v; want classname SU, time 1.250, no child", pass)
	}
	fail := s.Cases[get(`SU-4 malformed reference <nested> & "quoted"`)]
	if fail.Failure == nil || fail.Failure.Message != "Consume(ref=3f2a..) = code OK, 12 tokens; want INVALID_ARGUMENT" || !strings.Contains(fail.Failure.Text, "su4.go:12") {
		t.Errorf("failed testcase = %+v; want <failure> with the first line as message and the full text", fail)
	}
	errCase := s.Cases[get("SU-1 consumed at most once")] // rule ID prefixed
	if errCase.Error == nil || !strings.HasPrefix(errCase.Error.Message, "harness error:") {
		t.Errorf("error testcase = %+v; want <error>", errCase)
	}
	na := s.Cases[get("L-2 D without decode preparation")]
	if na.Skipped == nil || na.Skipped.Message != "not applicable: target serves no D" || na.Classname != "L" {
		t.Errorf("not applicable testcase = %+v; want <skipped> with the reason", na)
	}
	nv := s.Cases[get("X-1 failed cleanup makes Health NOT_READY")]
	if nv.Skipped == nil || !strings.HasPrefix(nv.Skipped.Message, "not verifiable: ") {
		t.Errorf("not verifiable testcase = %+v; want <skipped> with the reason", nv)
	}
	missing := s.Cases[get("X-2 ("+reports.MissingRuleMessage+")")]
	if missing.Skipped == nil || !strings.HasPrefix(missing.Skipped.Message, "not verifiable: ") {
		t.Errorf("missing-rule testcase = %+v; want <skipped> not verifiable", missing)
	}
	harness := s.Cases[get("[BeforeSuite]")]
	if harness.Classname != reports.HarnessClassname || harness.Error == nil {
		t.Errorf("harness testcase = %+v; want classname %q and <error>", harness, reports.HarnessClassname)
	}
}

func TestWritersFailOnUnwritablePath(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(blocker, "results.json") // a path below a regular file
	if err := reports.WriteJSON(path, sample()); err == nil {
		t.Error("WriteJSON below a regular file succeeded")
	}
	if err := reports.WriteJUnit(path, sample()); err == nil {
		t.Error("WriteJUnit below a regular file succeeded")
	}
}
