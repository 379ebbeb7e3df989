package reports

import (
	"reflect"
	"strings"
	"testing"
)

func cr(rule, level string, o Outcome, msg string) CaseResult {
	return CaseResult{Rule: rule, Name: rule + " case", Level: level, Outcome: o, Message: msg}
}

func TestSummarize(t *testing.T) {
	core := map[string][]string{"core": {"SU-1", "SU-2", "L-2"}}
	tests := []struct {
		name        string
		cases       []CaseResult
		table       map[string][]string
		wantRules   map[string]Outcome // "level/rule" -> verdict
		wantMsg     map[string]string  // "level/rule" -> message
		wantCount   map[string]int     // "level/rule" -> cases
		wantLevels  map[string]Outcome
		wantVerdict Outcome
	}{
		{
			name: "worst of cases per rule",
			cases: []CaseResult{
				cr("SU-1", "core", Passed, ""),
				cr("SU-1", "core", Passed, ""),
				cr("SU-2", "core", Passed, ""),
				cr("SU-2", "core", Failed, "Consume(ref=3f2a..) = code OK; want INVALID_ARGUMENT"),
				cr("SU-2", "core", Error, "harness error: dial"),
				cr("L-2", "core", NotApplicable, "not applicable: no D"),
			},
			table:       core,
			wantRules:   map[string]Outcome{"core/SU-1": Passed, "core/SU-2": Failed, "core/L-2": NotApplicable},
			wantMsg:     map[string]string{"core/SU-1": "", "core/SU-2": "Consume(ref=3f2a..) = code OK; want INVALID_ARGUMENT", "core/L-2": "not applicable: no D"},
			wantCount:   map[string]int{"core/SU-1": 2, "core/SU-2": 3, "core/L-2": 1},
			wantLevels:  map[string]Outcome{"core": Failed},
			wantVerdict: Failed,
		},
		{
			name: "a rule with no case is not verifiable, never passed",
			cases: []CaseResult{
				cr("SU-1", "core", Passed, ""),
				cr("L-2", "core", Passed, ""),
			},
			table:       core,
			wantRules:   map[string]Outcome{"core/SU-1": Passed, "core/SU-2": NotVerifiable, "core/L-2": Passed},
			wantMsg:     map[string]string{"core/SU-2": MissingRuleMessage},
			wantCount:   map[string]int{"core/SU-2": 0},
			wantLevels:  map[string]Outcome{"core": NotVerifiable},
			wantVerdict: NotVerifiable,
		},
		{
			name: "not applicable never counts as passed",
			cases: []CaseResult{
				cr("SU-1", "core", NotApplicable, "not applicable: a"),
				cr("SU-2", "core", NotApplicable, "not applicable: b"),
				cr("L-2", "core", NotApplicable, "not applicable: c"),
			},
			table:       core,
			wantRules:   map[string]Outcome{"core/SU-1": NotApplicable, "core/SU-2": NotApplicable, "core/L-2": NotApplicable},
			wantLevels:  map[string]Outcome{"core": NotApplicable},
			wantVerdict: NotApplicable,
		},
		{
			name: "not applicable rules are ignored by the level",
			cases: []CaseResult{
				cr("SU-1", "core", Passed, ""),
				cr("SU-2", "core", Passed, ""),
				cr("L-2", "core", NotApplicable, "not applicable: no D"),
			},
			table:       core,
			wantLevels:  map[string]Outcome{"core": Passed},
			wantVerdict: Passed,
		},
		{
			name: "a not applicable case does not hide a passed one",
			cases: []CaseResult{
				cr("SU-1", "core", NotApplicable, "not applicable: E+P+D"),
				cr("SU-1", "core", Passed, ""),
			},
			table:       map[string][]string{"core": {"SU-1"}},
			wantRules:   map[string]Outcome{"core/SU-1": Passed},
			wantMsg:     map[string]string{"core/SU-1": ""},
			wantVerdict: Passed,
		},
		{
			name: "error beats not verifiable beats passed",
			cases: []CaseResult{
				cr("SU-1", "core", NotVerifiable, "not verifiable: no observables"),
				cr("SU-1", "core", Error, "harness error: x"),
				cr("SU-2", "core", NotVerifiable, "not verifiable: y"),
				cr("L-2", "core", Passed, ""),
			},
			table:       core,
			wantRules:   map[string]Outcome{"core/SU-1": Error, "core/SU-2": NotVerifiable, "core/L-2": Passed},
			wantMsg:     map[string]string{"core/SU-1": "harness error: x"},
			wantLevels:  map[string]Outcome{"core": Error},
			wantVerdict: Error,
		},
		{
			name: "levels are separate; case without level goes to the rule's first level",
			cases: []CaseResult{
				cr("SU-1", "", Passed, ""),
				cr("X-1", "lifecycle", Failed, "Health = READY; want NOT_READY"),
				cr("SU-1", "faults", Failed, "under faults"),
			},
			table:       map[string][]string{"Core": {"SU-1"}, "lifecycle": {"X-1"}, "faults": {"SU-1"}},
			wantRules:   map[string]Outcome{"core/SU-1": Passed, "lifecycle/X-1": Failed, "faults/SU-1": Failed},
			wantLevels:  map[string]Outcome{"core": Passed, "lifecycle": Failed, "faults": Failed},
			wantVerdict: Failed,
		},
		{
			name:        "a rule only seen in cases is still reported",
			cases:       []CaseResult{cr("Q-1", "faults", Failed, "freed")},
			table:       map[string][]string{"core": {"SU-1"}},
			wantRules:   map[string]Outcome{"core/SU-1": NotVerifiable, "faults/Q-1": Failed},
			wantLevels:  map[string]Outcome{"core": NotVerifiable, "faults": Failed},
			wantVerdict: Failed,
		},
		{
			name:        "a harness-level case counts only toward the verdict",
			cases:       []CaseResult{cr("SU-1", "core", Passed, ""), {Name: "[BeforeSuite]", Outcome: Error, Message: "harness error: probe"}},
			table:       map[string][]string{"core": {"SU-1"}},
			wantRules:   map[string]Outcome{"core/SU-1": Passed},
			wantLevels:  map[string]Outcome{"core": Passed},
			wantVerdict: Error,
		},
		{
			name:        "an invalid outcome is recorded as error",
			cases:       []CaseResult{cr("SU-1", "core", "PASSED", "")},
			table:       map[string][]string{"core": {"SU-1"}},
			wantRules:   map[string]Outcome{"core/SU-1": Error},
			wantMsg:     map[string]string{"core/SU-1": `harness error: invalid outcome "PASSED": `},
			wantVerdict: Error,
		},
		{
			name:        "nothing at all is not verifiable",
			wantVerdict: NotVerifiable,
			wantLevels:  map[string]Outcome{},
		},
		{
			name:        "a level without rules is not verifiable",
			table:       map[string][]string{"lifecycle": nil},
			wantLevels:  map[string]Outcome{"lifecycle": NotVerifiable},
			wantVerdict: NotVerifiable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Summarize(tt.cases, tt.table)
			got := map[string]RuleResult{}
			for _, r := range res.Rules {
				k := r.Level + "/" + r.Rule
				if _, dup := got[k]; dup {
					t.Errorf("rule %s reported twice", k)
				}
				got[k] = r
			}
			for k, want := range tt.wantRules {
				if got[k].Outcome != want {
					t.Errorf("rule %s = %q; want %q (all: %+v)", k, got[k].Outcome, want, res.Rules)
				}
			}
			if tt.wantRules != nil && len(got) != len(tt.wantRules) {
				t.Errorf("got %d rules %+v; want %d", len(got), res.Rules, len(tt.wantRules))
			}
			for k, want := range tt.wantMsg {
				if got[k].Message != want {
					t.Errorf("rule %s message = %q; want %q", k, got[k].Message, want)
				}
			}
			for k, want := range tt.wantCount {
				if got[k].Cases != want {
					t.Errorf("rule %s cases = %d; want %d", k, got[k].Cases, want)
				}
			}
			if tt.wantLevels != nil && !reflect.DeepEqual(res.Levels, tt.wantLevels) {
				t.Errorf("levels = %v; want %v", res.Levels, tt.wantLevels)
			}
			if res.Verdict != tt.wantVerdict {
				t.Errorf("verdict = %q; want %q", res.Verdict, tt.wantVerdict)
			}
			if len(res.Cases) != len(tt.cases) {
				t.Errorf("kept %d cases; want %d", len(res.Cases), len(tt.cases))
			}
			for _, c := range res.Cases {
				if !c.Outcome.Valid() {
					t.Errorf("case %q kept invalid outcome %q", c.Name, c.Outcome)
				}
			}
		})
	}
}

func TestSummarizeOrder(t *testing.T) {
	table := map[string][]string{
		"faults":    {"Q-1"},
		"core":      {"SU-2", "SU-1", "L-10"},
		"lifecycle": {"X-1"},
	}
	cases := []CaseResult{cr("Z-2", "", Passed, ""), cr("Z-10", "", Passed, ""), cr("A-1", "", Passed, "")}
	res := Summarize(cases, table)
	var got []string
	for _, r := range res.Rules {
		got = append(got, r.Level+"/"+r.Rule)
	}
	want := []string{"core/SU-2", "core/SU-1", "core/L-10", "lifecycle/X-1", "faults/Q-1", "/A-1", "/Z-2", "/Z-10"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rule order = %v; want %v", got, want)
	}
}

func TestRuleLessAndFamily(t *testing.T) {
	tests := []struct {
		a, b string
		less bool
	}{
		{"L-2", "L-10", true},
		{"L-10", "L-2", false},
		{"L-6", "SU-1", true},
		{"SU-1", "SU-1", false},
		{"bogus", "L-1", false},
	}
	for _, tt := range tests {
		if got := RuleLess(tt.a, tt.b); got != tt.less {
			t.Errorf("RuleLess(%q, %q) = %v; want %v", tt.a, tt.b, got, tt.less)
		}
	}
	fam := map[string]string{"SU-2": "SU", "L-10": "L", "X-1": "X", "SU": "", "SU-": "", "-1": "", "SU-x": "", "": ""}
	for id, want := range fam {
		if got := RuleFamily(id); got != want {
			t.Errorf("RuleFamily(%q) = %q; want %q", id, got, want)
		}
	}
}

func TestLines(t *testing.T) {
	res := Summarize([]CaseResult{
		cr("SU-2", "core", Passed, ""),
		cr("SU-2", "core", Passed, ""),
		cr("SU-2", "core", Passed, ""),
		cr("SU-4", "core", Failed, "Consume(ref=3f2a..) = code OK, 12 tokens; want INVALID_ARGUMENT\n  at suite/su4.go:12"),
		cr("L-2", "core", NotApplicable, "not applicable: target serves no D"),
		cr("SE-4", "core", Passed, ""),
		cr("SE-4", "core", NotApplicable, "not applicable: target serves no PD"),
		cr("SE-4", "core", NotApplicable, "not applicable: target serves no PD"),
		cr("SU-1", "core", Error, "harness error: "+strings.Repeat("x", 400)),
	}, map[string][]string{"core": {"SU-1", "SU-2", "SU-4", "L-2", "SE-4", "X-1"}})
	lines := res.Lines()
	want := []string{
		"ERROR SU-1  harness error: " + strings.Repeat("x", LineMessageMaxRunes-len("harness error: ")-3) + "...",
		"PASS  SU-2  (3 cases)",
		"FAIL  SU-4  Consume(ref=3f2a..) = code OK, 12 tokens; want INVALID_ARGUMENT",
		"N/A   L-2   not applicable: target serves no D",
		"PASS  SE-4  (1 case; 2 not applicable)",
		"N/V   X-1   " + MissingRuleMessage,
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("Lines() =\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	sum := res.Summary()
	for _, part := range []string{"verdict: failed", "core: failed", "6 rules", "2 passed", "1 failed", "1 error", "1 not applicable", "1 not verifiable"} {
		if !strings.Contains(sum, part) {
			t.Errorf("Summary() = %q; missing %q", sum, part)
		}
	}
}

// TestWithholdLevels: a filtered run reports its rules and its verdict,
// but no level verdict, and says so in the Summary line.
func TestWithholdLevels(t *testing.T) {
	res := Summarize([]CaseResult{cr("SU-2", "core", Passed, "")}, map[string][]string{"core": {"SU-2"}})
	res.WithholdLevels(NoLevelVerdictFiltered)
	if len(res.Levels) != 0 || res.NoLevelVerdict != NoLevelVerdictFiltered || res.Verdict != Passed || len(res.Rules) != 1 {
		t.Errorf("results = %+v; want the rule and verdict kept, no level verdict", res)
	}
	sum := res.Summary()
	if want := "verdict: passed (no level verdict: filtered); 1 rule: 1 passed"; sum != want {
		t.Errorf("Summary() = %q; want %q", sum, want)
	}
	if strings.Contains(sum, "core:") {
		t.Errorf("Summary() of a filtered run names a level verdict: %q", sum)
	}
}
