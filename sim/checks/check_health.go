package checks

import (
	"errors"
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/world"
)

// checkHealth. A side that quarantined anything, or whose
// cleanup failed, reports NOT_READY and refuses new handoffs with
// UNAVAILABLE; a side with neither is not NOT_READY. The full check of a
// NOT_READY side (State, Admit: both allocate) runs when its signature
// (incarnation, quarantine, cleanup failures, draining) changed; the cheap
// "healthy means no failure" check runs every step.
func checkHealth(w *world.World) error {
	q := len(w.Prod.Quarantines) // sources quarantined until their WRITE ends
	sig := world.HealthSig{Quarantined: q, Cleanups: w.Ledger.RemoveFailures, Draining: w.Prod.Health.Draining()}
	// healthAgrees' cheap case, inline (most steps): healthy and unchanged.
	if cf := prodCleanupFailed(w); q > 0 || cf || !w.ProdCheapSig.Done || w.ProdCheapSig.Sig != sig {
		if err := healthAgrees("E", w.Prod.Health, q > 0, cf, &w.ProdHealthSig, &w.ProdCheapSig, sig); err != nil {
			return err
		}
	}
	for _, c := range w.Cons {
		if !c.Up {
			continue
		}
		n, _ := c.Receives.Quarantine()
		sig := world.HealthSig{Inc: c.Inc, Quarantined: n, Draining: c.Health.Draining()}
		if n == 0 && c.CheapSig.Done && c.CheapSig.Sig == sig {
			continue // healthAgrees' cheap case, inline
		}
		if err := healthAgrees(c.Name, c.Health, n > 0, false, &c.HealthSig, &c.CheapSig, sig); err != nil {
			return err
		}
	}
	return nil
}

func prodCleanupFailed(w *world.World) bool { return w.Ledger.RemoveFailures > 0 }

// healthAgrees checks one node. last is the signature of the last full
// check, cheap that of the last cheap one: a Health changes only when the
// driver fails or drains it, which changes the signature, so an unchanged
// one needs no new look.
func healthAgrees(node string, h *handoff.Health, quarantined, cleanupFailed bool, last *world.HealthSig, cheap *world.CheapCheck, sig world.HealthSig) error {
	bad := quarantined || cleanupFailed
	if !bad {
		if cheap.Done && cheap.Sig == sig {
			return nil
		}
		cheap.Sig, cheap.Done = sig, true
		// Health is NOT_READY exactly when it holds a failure (health.go);
		// Failure() is the allocation-free way to ask on the hot path.
		if h.Failure() != "" {
			return fmt.Errorf("%s health NOT_READY (%s) with nothing quarantined and no cleanup failure", node, h.Failure())
		}
		return nil
	}
	if *last == sig {
		return nil
	}
	*last = sig
	if st, _ := h.State(); st != handoff.HealthNotReady {
		return fmt.Errorf("%s quarantined=%v cleanup-failed=%v but health is %d, want NOT_READY", node, quarantined, cleanupFailed, st)
	}
	err := h.Admit()
	if _, code := handoff.Classify(err); code != handoff.CodeUnavailable {
		return fmt.Errorf("%s admits a new handoff while NOT_READY: %v", node, err)
	}
	if quarantined && !cleanupFailed && !h.Draining() && !errors.Is(err, handoff.ErrQuarantined) {
		return fmt.Errorf("%s refuses with %v, want Q-4 quarantined", node, err)
	}
	return nil
}
