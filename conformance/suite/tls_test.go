package suite

import (
	"slices"
	"testing"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/onsi/ginkgo/v2/types"
)

// TestFeatureRulesFollowTheProfile: SE-1 and SE-2 join the core level
// only when the profile declares tls and authorization, and their cases
// run (the label filter lets them through) only then.
func TestFeatureRulesFollowTheProfile(t *testing.T) {
	table := map[string][]string{string(LevelCore): {"SU-1"}, string(LevelLifecycle): {"C-1"}}
	tlsOnly := target.Profile{TLS: &target.TLS{}}
	both := target.Profile{TLS: &target.TLS{}, Authorization: &target.Authorization{}}
	for _, c := range []struct {
		name string
		p    target.Profile
		want []string
	}{
		{"nothing declared", target.Profile{}, []string{"SU-1"}},
		{"tls", tlsOnly, []string{"SU-1", "SE-1"}},
		{"tls and authorization", both, []string{"SU-1", "SE-1", "SE-2"}},
	} {
		got := RulesForProfile(table, c.p)
		if !slices.Equal(got[string(LevelCore)], c.want) || !slices.Equal(got[string(LevelLifecycle)], []string{"C-1"}) {
			t.Errorf("%s: RulesForProfile = %v; want core %v", c.name, got, c.want)
		}
		if !slices.Equal(table[string(LevelCore)], []string{"SU-1"}) {
			t.Fatalf("RulesForProfile modified its argument: %v", table)
		}
		filter, err := types.ParseLabelFilter(FeatureFilter("level:core", c.p))
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range Cases() {
			labels := append([]string{cs.Rule, "level:" + string(cs.Level)}, cs.Labels...)
			if cs.Level != LevelCore {
				continue
			}
			feature := slices.Contains(cs.Labels, LabelNeedsTLS) || slices.Contains(cs.Labels, LabelNeedsAuthorization)
			declared := FeaturesDeclared(c.p, cs.Labels)
			if filter(labels) != declared || (!feature && !declared) {
				t.Errorf("%s: case %q selected %v, declared %v", c.name, cs.Name, filter(labels), declared)
			}
		}
	}
	if FeatureFilter("", both) != "" {
		t.Errorf("FeatureFilter with every feature declared = %q; want the filter unchanged", FeatureFilter("", both))
	}
}
