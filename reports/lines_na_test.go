package reports

import (
	"strings"
	"testing"
)

// TestLinesNotApplicableWithoutLevel: Summarize files a case with no
// level under its rule's first level, and so does the count of its
// not-applicable cases a passed rule's line shows (attack, stop 23: Lines
// counted them by the case's own, empty, level and called them passes).
func TestLinesNotApplicableWithoutLevel(t *testing.T) {
	res := Summarize([]CaseResult{
		cr("SE-4", "", Passed, ""),
		cr("SE-4", "", NotApplicable, "not applicable: target serves no PD"),
		cr("SE-4", "", NotApplicable, "not applicable: target serves no PD"),
	}, map[string][]string{"faults": {"SE-4"}})
	lines := res.Lines()
	want := "PASS  SE-4  (1 case; 2 not applicable)"
	if len(lines) != 1 || strings.TrimSpace(lines[0]) != want {
		t.Errorf("Lines() = %q; want %q", lines, want)
	}
}
