package checks

import (
	"errors"
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/world"
)

// checkCleanupFailures: X-1. Once a removal of the producer failed with an
// I/O error (the ledger's ground truth), E's Health is NOT_READY with the
// cleanup check and a reason, and new handoffs are refused with
// UNAVAILABLE: a failed cleanup is never swallowed. Checked fully once per
// new failure (State and Admit allocate).
func checkCleanupFailures(w *world.World) error {
	if w.Ledger.RemoveFailures == 0 || w.Ledger.RemoveFailures == w.CleanupFailuresSeen {
		return nil // nothing new to judge (the scan would find nothing)
	}
	return checkCleanupFailuresScan(w)
}

// checkCleanupFailuresScan is checkCleanupFailures's scan, once there is something to look at.
func checkCleanupFailuresScan(w *world.World) error {
	n := w.Ledger.RemoveFailures
	if n == 0 || n == w.CleanupFailuresSeen {
		return nil
	}
	w.CleanupFailuresSeen = n
	st, checks := w.Prod.Health.State()
	if st != handoff.HealthNotReady {
		return fmt.Errorf("E had %d removal(s) fail but Health is %d, want NOT_READY (the cleanup failure was swallowed)", n, st)
	}
	found := false
	for _, c := range checks {
		if c.Name == handoff.CheckCleanup && c.Message != "" {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("E had %d removal(s) fail but Health names no %s check with a reason", n, handoff.CheckCleanup)
	}
	if _, code := handoff.Classify(w.Prod.Health.Admit()); code != handoff.CodeUnavailable {
		return errors.New("E admits a new handoff after a cleanup failure, want UNAVAILABLE")
	}
	return nil
}
