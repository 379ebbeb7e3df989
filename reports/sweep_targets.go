package reports

import (
	"fmt"
	"maps"
	"slices"
)

// UnstampedCommit is the commit a result of an unstamped baton build
// carries (check.BatonCommit: no -ldflags stamp and no VCS build info, as
// in a test binary or a build outside a git checkout). Two unstamped
// builds cannot be told apart, so MergeSweeps refuses their shards unless
// MergeOptions.AllowUnstamped.
const UnstampedCommit = "unknown"

// CoverageTargets is what a handoff sweep must reach: every fault site and
// every sometimes state of the simulator, and the sweep length from which
// the gate applies. The package does not import the simulator
// (ARCHITECTURE.md: reports -> stdlib and report libraries), so the caller
// passes them in (cmd/baton: sim.AllSites, sim.SometimesStates,
// sim.GateMinSeeds). The gate then judges every target, not only the keys
// a result file happens to hold: a missing key counts as 0.
type CoverageTargets struct {
	// GateMinSeeds is the sweep length (seeds) from which the gate applies.
	GateMinSeeds int64
	// Sites are the fault sites' names ("net.drop").
	Sites []string
	// Sometimes are the sometimes states.
	Sometimes []SometimesTarget
}

// SometimesTarget is one sometimes state a sweep must reach: its stable
// name, the CONTRACT rule it puts under test and what happened.
type SometimesTarget struct {
	// Name is the state's stable name; Rule the CONTRACT rule ID; Text what
	// happens in the state.
	Name, Rule, Text string
}

// empty reports whether t names nothing to reach (no targets given).
func (t CoverageTargets) empty() bool { return len(t.Sites) == 0 && len(t.Sometimes) == 0 }

// problems names, for the result r read from name, what the targets do
// not allow: a handoff result without coverage (its seeds would escape
// the gate), an executor result with coverage, and each fault site or
// sometimes state r counts that is not a target (a result of another
// simulator).
func (t CoverageTargets) problems(name string, r SweepResult) []string {
	where := fmt.Sprintf("%s (shard %s)", name, r.Shard)
	c := r.Coverage
	switch {
	case r.World == SweepWorldHandoff && c == nil:
		return []string{where + " is a handoff result without coverage: the coverage gate cannot judge its seeds"}
	case r.World != SweepWorldHandoff && c != nil:
		return []string{where + " is a " + r.World + " result with coverage"}
	case c == nil:
		return nil
	}
	var out []string
	for _, site := range slices.Sorted(maps.Keys(c.Sites)) {
		if !slices.Contains(t.Sites, site) {
			out = append(out, fmt.Sprintf("%s counts fault site %s, which this simulator does not have (a result of another build?)", where, site))
		}
	}
	for _, st := range slices.Sorted(maps.Keys(c.Sometimes)) {
		if !slices.ContainsFunc(t.Sometimes, func(s SometimesTarget) bool { return s.Name == st }) {
			out = append(out, fmt.Sprintf("%s counts sometimes state %s, which this simulator does not have (a result of another build?)", where, st))
		}
	}
	return out
}

// Complete makes c judge every target: the gate length becomes t's, each
// target site or sometimes state c lacks is added with zero counts (a
// missing key counts as 0: never fired, never reached), and every state's
// rule and text are t's. c must not be nil.
func (t CoverageTargets) Complete(c *SweepCoverage) {
	c.GateMinSeeds = t.GateMinSeeds
	if c.Sites == nil {
		c.Sites = map[string]SiteCount{}
	}
	if c.Points == nil {
		c.Points = map[string]int64{}
	}
	if c.Sometimes == nil {
		c.Sometimes = map[string]SometimesCount{}
	}
	for _, site := range t.Sites {
		if _, ok := c.Sites[site]; !ok {
			c.Sites[site] = SiteCount{}
		}
	}
	for _, st := range t.Sometimes {
		s := c.Sometimes[st.Name]
		s.Rule, s.Text = st.Rule, st.Text
		c.Sometimes[st.Name] = s
	}
}
