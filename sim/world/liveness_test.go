package world

import (
	"strings"
	"testing"
)

// TestLivenessBudgetEnforced: a run that cannot converge within its tick
// budget is a liveness failure (exit 2), naming what is still open.
func TestLivenessBudgetEnforced(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		s := DrawSettings(seed)
		s.LivenessBudgetTicks = 1
		r := Run(seed, s, Options{})
		if r.Verdict != Liveness || int(Liveness) != 2 || !strings.Contains(r.Failure, "not converged") {
			t.Errorf("seed %d with a 1-tick budget: %v %q, want LIVENESS FAILURE", seed, r.Verdict, r.Failure)
		}
	}
}
