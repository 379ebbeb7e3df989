package checks

import (
	"fmt"

	"github.com/baton-dev/baton/sim/world"
)

// checkReceiveBuffers: Q-1. A WRITE that may still land targets a buffer its
// receive still owns, or one quarantined for it, or memory of a crashed
// incarnation (where it will fail); never a freed buffer or one reused by
// another receive. A quarantined buffer is never owned by a later receive.
//
// Incremental: it looks only at the WRITEs still pending (pendingWrites),
// in the order they were posted, so it finds the first violation the whole
// list would.
func checkReceiveBuffers(w *world.World) error {
	for _, wr := range pendingWrites(w) {
		c := w.Cons[wr.C]
		if !c.Up || c.Inc != wr.Inc {
			continue
		}
		if err := world.BufferHeld(wr, &c.Bufs[wr.Buf]); err != nil {
			return err
		}
	}
	return nil
}

// pendingWrites returns the WRITEs that may still land, in posting order:
// the last step's pending list without those that landed or failed since,
// then the WRITEs posted since. A WRITE that landed or failed never becomes
// pending again (landed and failed are only ever set), and w.writes only
// grows, so the list is exactly the pending WRITEs of w.writes, in order.
//
// both ask within one checkStep: the second gets the list the
// first brought up to date (nothing changes the world between two
// checkers; checkStep clears pendingFresh before and after its checkers).
// noPendingWrites is pendingWrites' answer "none" where it costs no scan
// (most steps: nothing pending, nothing posted), inline in checkStep, which
// then skips checkReceiveBuffers and checkSources (they judge only pending
// WRITEs).
func noPendingWrites(w *world.World) bool {
	if j := &w.Judged; len(j.Pending) == 0 && j.WritesSeen == len(w.Writes) {
		j.PendingFresh = true // as pendingWrites marks it
		return true
	}
	return false
}

func pendingWrites(w *world.World) []*world.Write {
	j := &w.Judged
	if j.PendingFresh {
		return j.Pending
	}
	if len(j.Pending) == 0 && j.WritesSeen == len(w.Writes) {
		j.PendingFresh = true // nothing pending, nothing posted: most steps
		return j.Pending
	}
	kept := j.Pending[:0]
	for _, wr := range j.Pending {
		if wr.Pending() {
			kept = append(kept, wr)
		}
	}
	clear(j.Pending[len(kept):]) // no stale pointers past the end
	for _, wr := range w.Writes[j.WritesSeen:] {
		if wr.Pending() {
			kept = append(kept, wr)
		}
	}
	j.Pending, j.WritesSeen, j.PendingFresh = kept, len(w.Writes), true
	return kept
}

// checkSources: Q-3. A producer never frees a transfer source a WRITE may
// still read: a pending WRITE's source is live (transfer in progress) or
// quarantined.
//
// Incremental as checkReceiveBuffers: only the pending WRITEs.
func checkSources(w *world.World) error {
	for _, wr := range pendingWrites(w) {
		if w.Sources[wr.Entry] == world.SourceFreed {
			return fmt.Errorf("producer freed the source of %s while WRITE #%d may still read it", world.Short(wr.Entry), wr.Num)
		}
	}
	return nil
}
