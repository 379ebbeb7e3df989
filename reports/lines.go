package reports

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// LineMessageMaxRunes bounds the message part of a terminal line (runes);
// longer messages end in "...". The full text is in results.json and JUnit.
const LineMessageMaxRunes = 160

// Lines returns one terminal line per rule, in Rules order:
//
//	PASS  SU-2  (3 cases)
//	PASS  SE-4  (2 cases; 2 not applicable)
//	FAIL  SU-4  Consume(ref=3f2a..) = code OK, 12 tokens; want INVALID_ARGUMENT
//	ERROR SU-1  harness error: dial producer: ...
//	N/A   L-2   not applicable: target serves no D
//	N/V   X-1   not verifiable: profile declares no observables
//
// The tag is Outcome.Tag, rule IDs are padded to a common width, and the
// message is the first line of RuleResult.Message, cut at
// LineMessageMaxRunes. A rule reported at several levels carries its level
// in brackets ("[faults]").
func (r Results) Lines() []string {
	width := 4
	count := map[string]int{}
	for _, rr := range r.Rules {
		width = max(width, len(rr.Rule))
		count[rr.Rule]++
	}
	lines := make([]string, 0, len(r.Rules))
	for _, rr := range r.Rules {
		detail := firstLine(rr.Message)
		if rr.Outcome == Passed || detail == "" {
			detail = casesText(rr.Cases)
			// A passed rule's not-applicable cases are not passes: the
			// line counts them apart ("(2 cases; 2 not applicable)").
			if na := rr.NotApplicableCases; rr.Outcome == Passed && na > 0 && na < rr.Cases {
				detail = fmt.Sprintf("%s; %d not applicable)", strings.TrimSuffix(casesText(rr.Cases-na), ")"), na)
			}
		}
		detail = truncate(detail, LineMessageMaxRunes)
		if count[rr.Rule] > 1 && rr.Level != "" {
			detail = "[" + rr.Level + "] " + detail
		}
		lines = append(lines, fmt.Sprintf("%s %-*s  %s", rr.Outcome.Tag(), width, rr.Rule, detail))
	}
	return lines
}

// Summary returns one line with the overall verdict, each level's verdict
// (or why there is none) and the rule counts per outcome, e.g.
//
//	verdict: failed (core: failed, lifecycle: not verifiable); 34 rules: 30 passed, 2 failed, 1 not applicable, 1 not verifiable
//	verdict: passed (no level verdict: filtered); 1 rule: 1 passed
func (r Results) Summary() string {
	levels := make([]string, 0, len(r.Levels))
	for l := range r.Levels {
		levels = append(levels, l)
	}
	sortLevels(levels)
	parts := make([]string, 0, len(levels))
	for _, l := range levels {
		parts = append(parts, fmt.Sprintf("%s: %s", l, r.Levels[l]))
	}
	n := map[Outcome]int{}
	for _, rr := range r.Rules {
		n[rr.Outcome]++
	}
	var counts []string
	for _, o := range []Outcome{Passed, Failed, Error, NotApplicable, NotVerifiable} {
		if n[o] > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n[o], o))
		}
	}
	s := "verdict: " + string(r.Verdict)
	switch {
	case r.NoLevelVerdict != "":
		s += " (no level verdict: " + r.NoLevelVerdict + ")"
	case len(parts) > 0:
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	if len(r.Rules) == 1 {
		s += "; 1 rule"
	} else {
		s += fmt.Sprintf("; %d rules", len(r.Rules))
	}
	if len(counts) > 0 {
		s += ": " + strings.Join(counts, ", ")
	}
	return s
}

func casesText(n int) string {
	if n == 1 {
		return "(1 case)"
	}
	return fmt.Sprintf("(%d cases)", n)
}

func truncate(s string, maxRunes int) string {
	if utf8.RuneCountInString(s) <= maxRunes {
		return s
	}
	return string([]rune(s)[:maxRunes-3]) + "..."
}
