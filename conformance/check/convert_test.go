package check

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/reports"
	"github.com/onsi/ginkgo/v2/types"
)

// spec builds an It SpecReport under the suite's top-level Describe.
func spec(text string, state types.SpecState, msg string, labels ...string) types.SpecReport {
	return types.SpecReport{
		ContainerHierarchyTexts:  []string{SuiteDescribe},
		ContainerHierarchyLabels: [][]string{{}},
		LeafNodeType:             types.NodeTypeIt,
		LeafNodeText:             text,
		LeafNodeLabels:           labels,
		State:                    state,
		RunTime:                  1500 * time.Millisecond,
		Failure: types.Failure{
			Message:  msg,
			Location: types.CodeLocation{FileName: "/src/conformance/suite/su.go", LineNumber: 42},
		},
	}
}

func TestCaseFromSpec(t *testing.T) {
	tests := []struct {
		name     string
		sr       types.SpecReport
		wantOK   bool
		want     reports.Outcome
		rule     string
		level    string
		msgStart string
		msgHas   string
	}{
		{
			name:   "passed",
			sr:     spec("SU-2 replay of a consumed reference is rejected", types.SpecStatePassed, "", "SU-2", "level:core", "topology:E+PD"),
			wantOK: true, want: reports.Passed, rule: "SU-2", level: "core",
		},
		{
			name:   "failed keeps message and location",
			sr:     spec("SU-4 malformed", types.SpecStateFailed, "Consume(ref=3f2a..) = code OK, 12 tokens; want INVALID_ARGUMENT", "SU-4", "level:core"),
			wantOK: true, want: reports.Failed, rule: "SU-4", level: "core",
			msgStart: "Consume(ref=3f2a..) = code OK", msgHas: "su.go:42",
		},
		{
			name:   "harness error",
			sr:     spec("SU-1 x", types.SpecStateFailed, "harness error: dial producer: connection refused", "SU-1", "level:core"),
			wantOK: true, want: reports.Error, rule: "SU-1", msgStart: "harness error: dial producer",
		},
		{
			name: "panicked is failed",
			sr: func() types.SpecReport {
				s := spec("L-1 x", types.SpecStatePanicked, "Test Panicked", "L-1", "level:core")
				s.Failure.ForwardedPanic = "nil map"
				return s
			}(),
			wantOK: true, want: reports.Failed, rule: "L-1", msgHas: "panic: nil map",
		},
		{
			name:   "timed out is failed",
			sr:     spec("SU-1 y", types.SpecStateTimedout, "A spec timeout occurred", "SU-1", "level:core"),
			wantOK: true, want: reports.Failed, msgStart: TimeoutMessage, msgHas: "A spec timeout occurred",
		},
		{
			name:   "interrupted is failed",
			sr:     spec("SU-1 z", types.SpecStateInterrupted, "interrupted by user", "SU-1", "level:core"),
			wantOK: true, want: reports.Failed,
		},
		{
			name:   "aborted is a harness error",
			sr:     spec("SU-1 w", types.SpecStateAborted, "AbortSuite called", "SU-1", "level:core"),
			wantOK: true, want: reports.Error, msgStart: "harness error:", msgHas: "AbortSuite called",
		},
		{
			name:   "an invalid state is a harness error",
			sr:     spec("SU-1 v", types.SpecStateInvalid, "", "SU-1", "level:core"),
			wantOK: true, want: reports.Error, msgStart: "harness error: spec INVALID SPEC STATE",
		},
		{
			name:   "not applicable skip",
			sr:     spec("L-2 decode", types.SpecStateSkipped, "not applicable: target serves no D", "L-2", "level:core"),
			wantOK: true, want: reports.NotApplicable, rule: "L-2", msgStart: "not applicable: target serves no D",
		},
		{
			name:   "not verifiable skip",
			sr:     spec("H-3 hash", types.SpecStateSkipped, "not verifiable: no reference_format", "H-3", "level:core"),
			wantOK: true, want: reports.NotVerifiable, msgStart: "not verifiable: no reference_format",
		},
		{
			name:   "other skip reason is not verifiable, never passed",
			sr:     spec("SU-3 y", types.SpecStateSkipped, "Spec skipped because a BeforeAll node failed", "SU-3", "level:core"),
			wantOK: true, want: reports.NotVerifiable, msgStart: "not verifiable: Spec skipped because",
		},
		{
			name:   "filtered out by the label filter is left out",
			sr:     spec("SU-2 x", types.SpecStateSkipped, "", "SU-2", "level:core"),
			wantOK: false,
		},
		{
			name:   "pending is left out",
			sr:     spec("SU-2 x", types.SpecStatePending, "", "SU-2", "level:core"),
			wantOK: false,
		},
		{
			name:   "colour codes are stripped",
			sr:     spec("SU-2 c", types.SpecStateFailed, "\x1b[1;31mExpected\x1b[0m code OK", "SU-2", "level:core"),
			wantOK: true, want: reports.Failed, msgStart: "Expected code OK",
		},
		{
			name:   "no rule label: rule-less case",
			sr:     spec("something", types.SpecStatePassed, "", "slow", "level:Core"),
			wantOK: true, want: reports.Passed, rule: "", level: "core",
		},
		{
			name: "passed BeforeSuite is left out",
			sr:   types.SpecReport{LeafNodeType: types.NodeTypeBeforeSuite, State: types.SpecStatePassed},
		},
		{
			name:   "failed BeforeSuite is a rule-less harness error",
			sr:     types.SpecReport{LeafNodeType: types.NodeTypeBeforeSuite, State: types.SpecStateFailed, Failure: types.Failure{Message: "probe failed"}},
			wantOK: true, want: reports.Error, rule: "", msgStart: "harness error: BeforeSuite failed: probe failed",
		},
		{
			name: "a container is left out",
			sr:   types.SpecReport{LeafNodeType: types.NodeTypeContainer, State: types.SpecStatePassed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := CaseFromSpec(tt.sr)
			if ok != tt.wantOK {
				t.Fatalf("CaseFromSpec ok = %v (%+v); want %v", ok, c, tt.wantOK)
			}
			if !ok {
				return
			}
			if c.Outcome != tt.want {
				t.Errorf("outcome = %q; want %q (message %q)", c.Outcome, tt.want, c.Message)
			}
			if tt.rule != "" && c.Rule != tt.rule {
				t.Errorf("rule = %q; want %q", c.Rule, tt.rule)
			}
			if want := RuleOfLabels(tt.sr.Labels()); c.Rule != want {
				t.Errorf("rule = %q; want %q (from labels %q)", c.Rule, want, tt.sr.Labels())
			}
			if tt.level != "" && c.Level != tt.level {
				t.Errorf("level = %q; want %q", c.Level, tt.level)
			}
			if !strings.HasPrefix(c.Message, tt.msgStart) {
				t.Errorf("message = %q; want it to start with %q", c.Message, tt.msgStart)
			}
			if !strings.Contains(c.Message, tt.msgHas) {
				t.Errorf("message = %q; want it to contain %q", c.Message, tt.msgHas)
			}
			if strings.Contains(c.Message, "\x1b") {
				t.Errorf("message %q keeps a terminal escape", c.Message)
			}
			if tt.want == reports.Passed && c.Message != "" {
				t.Errorf("passed case has message %q", c.Message)
			}
			if tt.sr.LeafNodeType == types.NodeTypeIt && c.DurationMs != 1500 {
				t.Errorf("duration = %d ms; want 1500", c.DurationMs)
			}
		})
	}
}

func TestCaseName(t *testing.T) {
	sr := spec("replay is rejected", types.SpecStatePassed, "", "SU-2")
	sr.ContainerHierarchyTexts = []string{SuiteDescribe, "SU-2 single use"}
	if got, want := caseName(sr), "SU-2 single use replay is rejected"; got != want {
		t.Errorf("caseName = %q; want %q", got, want)
	}
	sr.ContainerHierarchyTexts = []string{"other"}
	if got, want := caseName(sr), "other replay is rejected"; got != want {
		t.Errorf("caseName = %q; want %q", got, want)
	}
}

func TestRuleAndLevelOfLabels(t *testing.T) {
	tests := []struct {
		labels      []string
		rule, level string
	}{
		{[]string{"topology:E+PD", "SU-2", "level:core"}, "SU-2", "core"},
		{[]string{"L-10", "SU-2"}, "L-10", ""},
		{[]string{"su-2", "SUX-2", "S-", "-1", "S-1a", "level:"}, "", ""},
		{[]string{"LEVEL:Lifecycle", "X-1"}, "X-1", "lifecycle"},
		{nil, "", ""},
	}
	for _, tt := range tests {
		if got := RuleOfLabels(tt.labels); got != tt.rule {
			t.Errorf("RuleOfLabels(%q) = %q; want %q", tt.labels, got, tt.rule)
		}
		if got := LevelOfLabels(tt.labels); got != tt.level {
			t.Errorf("LevelOfLabels(%q) = %q; want %q", tt.labels, got, tt.level)
		}
	}
}

// TestCasesFromReportsThroughJSON converts a hand-written suite report after
// a trip through Ginkgo's JSON encoding, as Run reads it back.
func TestCasesFromReportsThroughJSON(t *testing.T) {
	in := []types.Report{{
		SuiteDescription: SuiteDescription,
		SuiteConfig:      types.SuiteConfig{LabelFilter: "level:core"},
		SpecReports: types.SpecReports{
			{LeafNodeType: types.NodeTypeBeforeSuite, State: types.SpecStatePassed},
			spec("SU-1 exactly one consumer gets tokens", types.SpecStatePassed, "", "SU-1", "level:core"),
			spec("SU-2 replay is rejected", types.SpecStateFailed, "Consume(ref=3f2a..) = code OK; want INVALID_ARGUMENT", "SU-2", "level:core"),
			spec("SU-2 released is rejected", types.SpecStatePassed, "", "SU-2", "level:core"),
			spec("L-2 decode", types.SpecStateSkipped, "not applicable: target serves no D", "L-2", "level:core"),
			spec("X-1 cleanup", types.SpecStateSkipped, "", "X-1", "level:lifecycle"), // filtered out
		},
	}}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ParseGinkgoJSON(raw)
	if err != nil {
		t.Fatalf("ParseGinkgoJSON: %v", err)
	}
	cases := CasesFromReports(rs)
	var got []string
	for _, c := range cases {
		got = append(got, c.Rule+"="+string(c.Outcome))
	}
	want := "SU-1=passed SU-2=failed SU-2=passed L-2=not applicable"
	if strings.Join(got, " ") != want {
		t.Fatalf("cases = %v; want %s", got, want)
	}
	if cases[0].Name != "SU-1 exactly one consumer gets tokens" || cases[0].Level != "core" {
		t.Errorf("first case = %+v; want its leaf name and level core", cases[0])
	}

	levels, err := SelectRules(map[string][]string{"core": {"SU-1", "SU-2", "L-2", "N-1"}, "lifecycle": {"X-1"}}, rs[0].SpecReports, "level:core")
	if err != nil {
		t.Fatal(err)
	}
	res := reports.Summarize(cases, levels)
	verdicts := map[string]reports.Outcome{}
	for _, r := range res.Rules {
		verdicts[r.Rule] = r.Outcome
	}
	wantV := map[string]reports.Outcome{"SU-1": reports.Passed, "SU-2": reports.Failed, "L-2": reports.NotApplicable, "N-1": reports.NotVerifiable}
	if len(verdicts) != len(wantV) {
		t.Errorf("rules %v; want %v", verdicts, wantV)
	}
	for r, w := range wantV {
		if verdicts[r] != w {
			t.Errorf("rule %s = %q; want %q", r, verdicts[r], w)
		}
	}
	if res.Verdict != reports.Failed || res.Levels["core"] != reports.Failed {
		t.Errorf("verdict %q, core %q; want failed, failed", res.Verdict, res.Levels["core"])
	}
	if _, ok := res.Levels["lifecycle"]; ok {
		t.Errorf("lifecycle reported in a level:core run: %v", res.Levels)
	}
}

// TestCasesFromReportsStoppedRun: after an interrupt or a suite timeout, a
// selected spec that never ran is an error, never left out silently.
func TestCasesFromReportsStoppedRun(t *testing.T) {
	rs := []types.Report{{
		SuiteConfig:                types.SuiteConfig{LabelFilter: "level:core"},
		SpecialSuiteFailureReasons: []string{"Suite Timeout Elapsed"},
		SpecReports: types.SpecReports{
			spec("SU-1 ran", types.SpecStatePassed, "", "SU-1", "level:core"),
			spec("SU-2 never ran", types.SpecStateSkipped, "", "SU-2", "level:core"),
			spec("X-1 filtered out", types.SpecStateSkipped, "", "X-1", "level:lifecycle"),
		},
	}}
	cases := CasesFromReports(rs)
	if len(cases) != 2 {
		t.Fatalf("cases = %+v; want SU-1 passed and SU-2 error", cases)
	}
	if c := cases[1]; c.Rule != "SU-2" || c.Outcome != reports.Error || !strings.Contains(c.Message, "Suite Timeout Elapsed") {
		t.Errorf("never-run case = %+v; want SU-2 error naming the timeout", c)
	}
}

func TestParseGinkgoJSONMalformed(t *testing.T) {
	for _, raw := range []string{``, `{}`, `null`, `[{"SpecReports": "x"}]`, `not json`} {
		if _, err := ParseGinkgoJSON([]byte(raw)); err == nil {
			t.Errorf("ParseGinkgoJSON(%q) succeeded; want an error", raw)
		}
	}
	if _, err := readGinkgoJSON("/nonexistent/ginkgo.json"); err == nil {
		t.Error("readGinkgoJSON of a missing file succeeded")
	}
}

func TestSelectRules(t *testing.T) {
	table := map[string][]string{
		"core":      {"SU-1", "SU-2", "L-2"},
		"lifecycle": {"X-1", "X-2"},
		"faults":    {"Q-1", "SU-2"},
	}
	specs := []types.SpecReport{
		spec("SU-1 a", types.SpecStatePassed, "", "SU-1", "level:core", "topology:E+PD"),
		spec("SU-2 a", types.SpecStatePassed, "", "SU-2", "level:core", "slow"),
		spec("L-2 a", types.SpecStatePassed, "", "L-2", "level:core", "topology:E+P+D"),
		spec("X-1 a", types.SpecStatePassed, "", "X-1", "level:lifecycle"),
	}
	tests := []struct {
		filter string
		want   map[string][]string
	}{
		{"", table},
		{"SU-2", map[string][]string{"core": {"SU-2"}, "faults": {"SU-2"}}},
		{"level:core", map[string][]string{"core": {"SU-1", "SU-2", "L-2"}}},
		{"level:lifecycle", map[string][]string{"lifecycle": {"X-1", "X-2"}}},
		{"topology:E+PD", map[string][]string{"core": {"SU-1"}}},
		{"level:core && !slow", map[string][]string{"core": {"SU-1", "SU-2", "L-2"}}}, // SU-2's own labels still match
		{"SU-1 || X-2", map[string][]string{"core": {"SU-1"}, "lifecycle": {"X-2"}}},
	}
	for _, tt := range tests {
		got, err := SelectRules(table, specs, tt.filter)
		if err != nil {
			t.Errorf("SelectRules(%q): %v", tt.filter, err)
			continue
		}
		if !equalTables(got, tt.want) {
			t.Errorf("SelectRules(%q) = %v; want %v", tt.filter, got, tt.want)
		}
	}
	if _, err := SelectRules(table, specs, "level:core &&"); err == nil {
		t.Error("SelectRules with an invalid filter succeeded")
	}
}

func equalTables(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || strings.Join(av, ",") != strings.Join(bv, ",") {
			return false
		}
	}
	return true
}
