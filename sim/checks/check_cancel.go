package checks

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/world"
)

// checkNoRevival: C-2. A publish cancelled while its encoder step was
// pending ends with nothing published: a late completion must not revive
// it (the driver abandons the reservation, C-1).
func checkNoRevival(w *world.World) error {
	if len(w.Ledger.Cancelled) == 0 {
		return nil // nothing new to judge (the scan would find nothing)
	}
	return checkNoRevivalScan(w)
}

// checkNoRevivalScan is checkNoRevival's scan, once there is something to look at.
func checkNoRevivalScan(w *world.World) error {
	for _, rec := range w.Ledger.Cancelled {
		if rec.CancelledBeforeReady && rec.Published && !rec.ReadyUndelivered {
			return fmt.Errorf("entry %s of client %d was published after its publish was cancelled (a late encoder completion revived it)", world.Short(rec.Id), rec.H)
		}
	}
	return nil
}

// checkUndeliveredReleased: C-3 and C-7. A published entry whose
// EncoderReady never reached its client has no holder; the producer
// releases it in the same step, so it is never Published after that step.
// The rule is C-3 when the client cancelled its stream (cancelled after the
// output was published, before anyone consumed it) and C-7 when the send
// failed on a live stream.
//
// Incremental: the answer depends on the cancelled list (which only grows;
// an entry's readyUndelivered is set in the step that appends it) and on
// the producer table's states, which change only with its Version; when
// neither moved since it last held, it still holds.
func checkUndeliveredReleased(w *world.World) (string, error) {
	if len(w.Ledger.Cancelled) == 0 {
		return "", nil // the loop below has nothing to look at (most runs)
	}
	seen := world.UndeliveredSeen{Table: w.Prod.Table, Version: w.Prod.Table.Version(), Cancelled: len(w.Ledger.Cancelled), Held: true}
	if seen == w.Judged.Undelivered {
		return "", nil
	}
	for _, rec := range w.Ledger.Cancelled {
		if rec.ReadyUndelivered && w.Prod.Table.State(rec.Id) == handoff.EntryPublished {
			if !rec.CancelledBeforeReady {
				return "C-7", fmt.Errorf("entry %s of client %d is still published though its EncoderReady send failed (release it)", world.Short(rec.Id), rec.H)
			}
			return "C-3", fmt.Errorf("entry %s of client %d is still published though its EncoderReady never reached the client (release it: C-3, C-7)", world.Short(rec.Id), rec.H)
		}
	}
	w.Judged.Undelivered = seen
	return "", nil
}
