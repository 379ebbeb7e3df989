package world

import (
	"errors"
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// checkHealth. A side that quarantined anything, or whose
// cleanup failed, reports NOT_READY and refuses new handoffs with
// UNAVAILABLE; a side with neither is not NOT_READY. The full check of a
// NOT_READY side (State, Admit: both allocate) runs when its signature
// (incarnation, quarantine, cleanup failures, draining) changed; the cheap
// "healthy means no failure" check runs every step.
func checkHealth(w *World) error {
	q := len(w.prod.quarantines) // sources quarantined until their WRITE ends
	sig := healthSig{0, q, w.ledger.removeFailures, w.prod.health.Draining()}
	if err := healthAgrees("E", w.prod.health, q > 0, prodCleanupFailed(w), &w.prodHealthSig, &w.prodCheapSig, sig); err != nil {
		return err
	}
	for _, c := range w.cons {
		if !c.up {
			continue
		}
		n, _ := c.receives.Quarantine()
		sig := healthSig{c.inc, n, 0, c.health.Draining()}
		if err := healthAgrees(c.name, c.health, n > 0, false, &c.healthSig, &c.cheapSig, sig); err != nil {
			return err
		}
	}
	return nil
}

func prodCleanupFailed(w *World) bool { return w.ledger.removeFailures > 0 }

// healthAgrees checks one node. last is the signature of the last full
// check, cheap that of the last cheap one: a Health changes only when the
// driver fails or drains it, which changes the signature, so an unchanged
// one needs no new look.
func healthAgrees(node string, h *handoff.Health, quarantined, cleanupFailed bool, last *healthSig, cheap *cheapCheck, sig healthSig) error {
	bad := quarantined || cleanupFailed
	if !bad {
		if cheap.done && cheap.sig == sig {
			return nil
		}
		cheap.sig, cheap.done = sig, true
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
