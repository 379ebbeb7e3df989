package mutants

import (
	"regexp"
	"testing"

	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/sim"
)

// TestDeclarations: every mutant names a rule of the level table (or a
// feature rule), declares
// each consequence with a reason and never its own rule twice, and has a
// seed for the kill table's props column.
func TestDeclarations(t *testing.T) {
	rules := map[string]bool{}
	for _, rs := range suite.RulesByLevel() {
		for _, r := range rs {
			rules[r] = true
		}
	}
	for _, f := range suite.FeatureRules() {
		rules[f.Rule] = true // SE-1, SE-2: checked at every level when declared
	}
	name := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)+$`)
	seen := map[string]bool{}
	for _, m := range All() {
		if seen[m.Name] || !name.MatchString(m.Name) {
			t.Errorf("mutant name %q is repeated or not kebab-case", m.Name)
		}
		seen[m.Name] = true
		if !rules[m.Rule] || m.Breaks == "" || m.Apply == nil {
			t.Errorf("mutant %s: rule %q (in the level table: %v), breaks %q; want a rule, a one-line breaks and an Apply", m.Name, m.Rule, rules[m.Rule], m.Breaks)
		}
		for r, why := range m.AlsoBreaks {
			if !rules[r] || r == m.Rule || why == "" {
				t.Errorf("mutant %s: AlsoBreaks[%q] = %q; want another rule of the level table with a reason", m.Name, r, why)
			}
		}
		if !m.Declares(m.Rule) || m.Seed() == 0 || m.Seed() != m.Seed() {
			t.Errorf("mutant %s: Declares(own rule) %v, seed %d", m.Name, m.Declares(m.Rule), m.Seed())
		}
		if m.SimNA != "" && (m.Sim != "" || m.SuiteOnly != "") {
			t.Errorf("mutant %s: SimNA with Sim %q or SuiteOnly: the sim column either runs or says why not, once", m.Name, m.Sim)
		}
		if m.SimSelfTest != "" {
			if sm, err := sim.ParseMutant(m.SimSelfTest); m.SimNA == "" || err != nil || sim.Mutants[sm] != m.Rule {
				t.Errorf("mutant %s: SimSelfTest %q wants SimNA and a simulator mutant of %s (%v)", m.Name, m.SimSelfTest, m.Rule, err)
			}
		}
	}
	if DefaultPropsSeed("a") == DefaultPropsSeed("b") || DefaultPropsSeed("a")>>63 != 0 {
		t.Errorf("DefaultPropsSeed does not separate names or exceeds 63 bits")
	}
}
