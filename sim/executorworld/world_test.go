package executorworld

import (
	"slices"
	"strings"
	"testing"

	"github.com/baton-dev/baton/engine/executor"
)

// TestExecutorWorldSeeds runs the executor world over 1,000 seeds with
// cancellation on (make sim runs 10,000 through the CLI): every checker
// passes on the real core.
func TestExecutorWorldSeeds(t *testing.T) {
	n := uint64(1_000)
	failures, ran := Explore(1, n, Mutation{})
	for _, f := range failures[:min(len(failures), 5)] {
		t.Errorf("seed %d (%s): %v\nreplay: %s", f.Seed, f.Settings, f.Err, f.ReplayCommand(""))
	}
	t.Logf("%d executor seeds, %d failed", ran, len(failures))
}

// TestExecutorWorldKillsMutations: each broken core decision is found
// within the first 2,000 seeds, by the checker of its rule.
func TestExecutorWorldKillsMutations(t *testing.T) {
	for name, m := range Mutations() {
		t.Run(name, func(t *testing.T) {
			failures, ran := Explore(1, 2000, m)
			if len(failures) == 0 {
				t.Fatalf("mutation %s survived %d seeds", name, ran)
			}
			t.Logf("mutation %s: first failing seed %d of %d: %v", name, failures[0].Seed, ran, failures[0].Err)
			// The rule is the mutation name's prefix (r2 also: a recompute
			// without re-admission computes a second context in the
			// admission, which the core's R-1 invariant reports).
			want := []string{strings.ToUpper(name[:1]) + "-" + name[1:2]}
			if name == "r2-recompute-skips-encoder" {
				want = append(want, "R-1")
			}
			if msg := failures[0].Err.Error(); !slices.ContainsFunc(want, func(rule string) bool { return strings.Contains(msg, rule) }) {
				t.Errorf("mutation %s: the failure names none of %v: %v", name, want, msg)
			}
		})
	}
}

// TestExecutorWorldIsDeterministic: a seed's result is the same twice.
func TestExecutorWorldIsDeterministic(t *testing.T) {
	m := Mutation{Core: executor.Mutation{ScatterLiveOnly: true}}
	for seed := uint64(1); seed <= 50; seed++ {
		a, b := RunSeed(seed, m), RunSeed(seed, m)
		if a.Steps != b.Steps || (a.Err == nil) != (b.Err == nil) || (a.Err != nil && a.Err.Error() != b.Err.Error()) {
			t.Fatalf("seed %d: %d steps %v, then %d steps %v", seed, a.Steps, a.Err, b.Steps, b.Err)
		}
	}
}
