package check

import (
	"fmt"
	"strings"

	"github.com/onsi/ginkgo/v2/types"
)

// SelectRules restricts the level table rulesByLevel (level -> rule IDs,
// CONTRACT section 5) to the rules the Ginkgo label filter selects, so a run
// filtered to one rule reports only that rule, and a run filtered to one
// level reports only that level's rules (each still not verifiable if no
// case checked it).
//
// A rule is selected when the filter matches the labels of any spec in specs
// that carries the rule at that level (or carries no level label), or the
// rule's own labels {rule, "level:<level>"}
// (so a rule with no spec at all is still reported, as not verifiable,
// under a filter for its level). The empty filter selects everything.
// Levels left with no rule are dropped. An invalid filter is an error.
func SelectRules(rulesByLevel map[string][]string, specs []types.SpecReport, filter string) (map[string][]string, error) {
	out := map[string][]string{}
	if strings.TrimSpace(filter) == "" {
		for l, rules := range rulesByLevel {
			out[l] = append([]string(nil), rules...)
		}
		return out, nil
	}
	match, err := types.ParseLabelFilter(filter)
	if err != nil {
		return nil, fmt.Errorf("check: label filter %q: %w", filter, err)
	}
	type key struct{ level, rule string }
	specSelected := map[key]bool{} // some spec of the rule at the level matches
	for _, sr := range specs {
		if !sr.LeafNodeType.Is(types.NodeTypeIt) {
			continue
		}
		labels := sr.Labels()
		if r := RuleOfLabels(labels); r != "" && match(labels) {
			specSelected[key{LevelOfLabels(labels), r}] = true
		}
	}
	for l, rules := range rulesByLevel {
		ll := strings.ToLower(strings.TrimSpace(l))
		for _, r := range rules {
			// A spec without a level label counts for every level listing its rule.
			if specSelected[key{ll, r}] || specSelected[key{"", r}] || match([]string{r, LevelLabelPrefix + ll}) {
				out[l] = append(out[l], r)
			}
		}
	}
	return out, nil
}
