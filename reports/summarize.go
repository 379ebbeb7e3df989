package reports

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// MissingRuleMessage is RuleResult.Message for a rule of the level table that
// no case checked; such a rule is not verifiable, never silently passed.
const MissingRuleMessage = "no case checked this rule"

// knownLevels are CONTRACT section 5's levels in their order; Summarize
// orders levels this way, unknown ones after them alphabetically.
var knownLevels = []string{"core", "lifecycle", "faults"}

// Summarize computes the verdicts of one run.
//
// cases are the outcomes of the cases that ran. rulesByLevel is the level
// table (CONTRACT section 5) restricted to what the run was asked to check:
// level name ("core"; matched case-insensitively, reported lower case) to
// rule IDs. The returned Results has Levels, Rules, Cases and Verdict set:
//
//   - a rule's verdict is the Worst of its cases' outcomes: failed > error >
//     not verifiable > passed > not applicable, so a rule whose cases are all
//     not applicable is not applicable, never passed;
//   - a rule of rulesByLevel with no case at all is not verifiable
//     (MissingRuleMessage);
//   - a case is counted under its own Level; a case without one under the
//     first level that lists its rule. A rule appearing only in cases (not in
//     rulesByLevel) is still reported, after the table's rules;
//   - a level's verdict is the Worst of its rules' verdicts, so
//     not-applicable rules are ignored unless every rule is not applicable; a
//     level with no rules is not verifiable;
//   - the overall Verdict is the Worst over every rule and every rule-less
//     (harness-level) case; not verifiable when nothing was checked.
//
// A case whose Outcome is not one of the five valid outcomes is recorded as
// Error with a "harness error: " message, because the runner, not the
// target, produced it.
func Summarize(cases []CaseResult, rulesByLevel map[string][]string) Results {
	res := Results{Levels: map[string]Outcome{}, Cases: make([]CaseResult, 0, len(cases))}

	// The level table, normalized to lower-case level names.
	table := map[string][]string{}
	for level, rules := range rulesByLevel {
		l := strings.ToLower(strings.TrimSpace(level))
		table[l] = append(table[l], rules...)
	}
	levels := make([]string, 0, len(table))
	for l := range table {
		levels = append(levels, l)
	}
	sortLevels(levels)

	type key struct{ level, rule string }
	var order []key
	seen := map[key]bool{}
	firstLevel := map[string]string{} // rule -> first level listing it
	for _, l := range levels {
		for _, r := range table[l] {
			k := key{l, r}
			if seen[k] {
				continue
			}
			seen[k] = true
			order = append(order, k)
			if _, ok := firstLevel[r]; !ok {
				firstLevel[r] = l
			}
		}
	}

	byKey := map[key][]CaseResult{}
	var extra []key
	verdict := Outcome("")
	for _, c := range cases {
		if !c.Outcome.Valid() {
			c.Message = fmt.Sprintf("harness error: invalid outcome %q: %s", c.Outcome, c.Message)
			c.Outcome = Error
		}
		c.Level = strings.ToLower(strings.TrimSpace(c.Level))
		res.Cases = append(res.Cases, c)
		if c.Rule == "" {
			verdict = Worst(verdict, c.Outcome)
			continue
		}
		l := c.Level
		if l == "" {
			l = firstLevel[c.Rule]
		}
		k := key{l, c.Rule}
		if !seen[k] {
			seen[k] = true
			extra = append(extra, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	sort.SliceStable(extra, func(i, j int) bool {
		if extra[i].level != extra[j].level {
			return levelLess(extra[i].level, extra[j].level)
		}
		return RuleLess(extra[i].rule, extra[j].rule)
	})
	order = append(order, extra...)

	levelVerdict := map[string]Outcome{}
	for _, l := range levels {
		levelVerdict[l] = ""
	}
	for _, k := range order {
		rr := RuleResult{Rule: k.rule, Level: k.level}
		cs := byKey[k]
		rr.Cases = len(cs)
		for _, c := range cs {
			rr.Outcome = Worst(rr.Outcome, c.Outcome)
			if c.Outcome == NotApplicable {
				rr.NotApplicableCases++
			}
		}
		if len(cs) == 0 {
			rr.Outcome, rr.Message = NotVerifiable, MissingRuleMessage
		} else if rr.Outcome != Passed {
			for _, c := range cs {
				if c.Outcome == rr.Outcome {
					rr.Message = c.Message
					break
				}
			}
		}
		res.Rules = append(res.Rules, rr)
		if k.level != "" {
			levelVerdict[k.level] = Worst(levelVerdict[k.level], rr.Outcome)
		}
		verdict = Worst(verdict, rr.Outcome)
	}
	for l, o := range levelVerdict {
		if o == "" {
			o = NotVerifiable // a level with no rules checked nothing
		}
		res.Levels[l] = o
	}
	if verdict == "" {
		verdict = NotVerifiable
	}
	res.Verdict = verdict
	return res
}

// NoLevelVerdictFiltered is Results.NoLevelVerdict of a run restricted by a
// label filter: it reports the rules it ran, but no level verdict.
const NoLevelVerdictFiltered = "filtered"

// WithholdLevels removes the level verdicts of r, saying why (for example
// NoLevelVerdictFiltered); the rules, cases and overall verdict (the exit
// code) stay.
func (r *Results) WithholdLevels(why string) {
	r.Levels = map[string]Outcome{}
	r.NoLevelVerdict = why
}

// sortLevels orders levels core, lifecycle, faults, then the rest
// alphabetically.
func sortLevels(levels []string) {
	sort.Slice(levels, func(i, j int) bool { return levelLess(levels[i], levels[j]) })
}

func levelLess(a, b string) bool {
	ra, rb := levelRank(a), levelRank(b)
	if ra != rb {
		return ra < rb
	}
	return a < b
}

func levelRank(l string) int {
	for i, k := range knownLevels {
		if l == k {
			return i
		}
	}
	return len(knownLevels)
}

// RuleLess orders rule IDs by family, then numerically: "L-2" < "L-10" <
// "SU-1". IDs that do not parse as FAMILY-NUMBER sort by plain string order.
func RuleLess(a, b string) bool {
	fa, na, oka := splitRule(a)
	fb, nb, okb := splitRule(b)
	if !oka || !okb || fa != fb {
		return a < b
	}
	return na < nb
}

// RuleFamily returns the family of a rule ID ("SU" for "SU-2"), or "" when
// id is not of the form FAMILY-NUMBER.
func RuleFamily(id string) string {
	f, _, ok := splitRule(id)
	if !ok {
		return ""
	}
	return f
}

func splitRule(id string) (family string, n int, ok bool) {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 || i == len(id)-1 {
		return "", 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return id[:i], n, true
}
