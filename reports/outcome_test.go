package reports

import (
	"errors"
	"testing"
)

func TestWorstOrder(t *testing.T) {
	// Outcomes is best to worst; Worst must pick the later of any pair,
	// whichever argument it is.
	for i, a := range Outcomes {
		for j, b := range Outcomes {
			want := a
			if j > i {
				want = b
			}
			if got := Worst(a, b); got != want {
				t.Errorf("Worst(%q, %q) = %q; want %q", a, b, got, want)
			}
		}
	}
}

func TestWorstTable(t *testing.T) {
	tests := []struct {
		a, b, want Outcome
	}{
		{"", "", ""},
		{"", Passed, Passed},
		{NotApplicable, "", NotApplicable},
		{Passed, NotApplicable, Passed},
		{NotApplicable, NotApplicable, NotApplicable},
		{Passed, NotVerifiable, NotVerifiable},
		{NotVerifiable, Error, Error},
		{Error, Failed, Failed},
		{Failed, NotApplicable, Failed},
		{"bogus", Passed, Error},
		{Passed, "PASSED", Error},
		{"bogus", Failed, Failed},
	}
	for _, tt := range tests {
		if got := Worst(tt.a, tt.b); got != tt.want {
			t.Errorf("Worst(%q, %q) = %q; want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestParseOutcome(t *testing.T) {
	for _, o := range Outcomes {
		got, err := ParseOutcome(string(o))
		if err != nil || got != o {
			t.Errorf("ParseOutcome(%q) = %q, %v; want %q, nil", o, got, err, o)
		}
	}
	for _, bad := range []string{"", "Passed", "skipped", "not_applicable", "n/a", " passed"} {
		if _, err := ParseOutcome(bad); !errors.Is(err, ErrUnknownOutcome) {
			t.Errorf("ParseOutcome(%q) error = %v; want ErrUnknownOutcome", bad, err)
		}
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		name    string
		verdict Outcome
		rules   []Outcome
		want    int
	}{
		{"all passed", Passed, []Outcome{Passed, Passed}, ExitPassed},
		{"passed and not applicable", Passed, []Outcome{Passed, NotApplicable}, ExitPassed},
		{"only not applicable", NotApplicable, []Outcome{NotApplicable}, ExitPassed},
		{"a failure wins over errors", Failed, []Outcome{Error, Failed, NotVerifiable}, ExitFailed},
		{"error without failure", Error, []Outcome{Passed, Error}, ExitIncomplete},
		{"not verifiable without failure", NotVerifiable, []Outcome{Passed, NotVerifiable}, ExitIncomplete},
		{"nothing checked", NotVerifiable, nil, ExitIncomplete},
		{"no verdict at all", "", nil, ExitIncomplete},
		{"stale verdict over a failed rule", Passed, []Outcome{Failed}, ExitFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Results{Verdict: tt.verdict}
			for i, o := range tt.rules {
				res.Rules = append(res.Rules, RuleResult{Rule: "SU-" + string(rune('1'+i)), Outcome: o})
			}
			if got := ExitCode(res); got != tt.want {
				t.Errorf("ExitCode(verdict %q, rules %v) = %d; want %d", tt.verdict, tt.rules, got, tt.want)
			}
		})
	}
}
