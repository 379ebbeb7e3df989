package checks

import (
	"testing"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/world"
)

// The skipped checkers (a counter says their inputs did not change since
// they last passed) still catch a violation planted after many passing
// steps.

// TestLockSkipCatchesLateAdmission: Q-5 is skipped while no consumer
// logged a late admission; one logged as sim/nodes logs it (the list and
// the counter) is caught at the next step.
func TestLockSkipCatchesLateAdmission(t *testing.T) {
	w := stepUntil(t, func(w *world.World) bool { return len(w.Cons) > 0 && w.LateAdmissions == 0 })
	c := w.Cons[len(w.Cons)-1]
	c.LateAdmissions = append(c.LateAdmissions, [2]int64{w.Now - 5, w.Now})
	w.LateAdmissions++
	wantCaught(t, w, "Q-5", "lock held across")
}

// overdueCandidate returns an entry the X-2 scan has seen published
// (Judged.ExpiryPubs == Ledger.Publications when seen is true; a
// publication since the last scan when false), not ended and PUBLISHED in
// the producer's table.
func overdueCandidate(w *world.World, seen bool) *world.EntryRecord {
	if w.Prod.Stopped || w.Nodes.ProdDown || (w.Judged.ExpiryPubs == w.Ledger.Publications) != seen || w.Judged.ExpiryPubs == 0 {
		return nil
	}
	for _, e := range w.Ledger.All {
		if e.Published && !e.Terminal() && w.Ledger.Entries[e.Id] == e && w.Prod.Table.State(e.Id) == handoff.EntryPublished {
			return e
		}
	}
	return nil
}

// plantMissedCollection moves the clock past e's due collection and the
// next X-2 look without the collector running: e stays published, overdue.
func plantMissedCollection(w *world.World, e *world.EntryRecord) {
	w.Now = max(w.NextExpiryCheck, max(e.ExpiresMs, e.CommittedMs)+w.Set.CollectPeriodMs+1)
}

// TestExpirySkipCatchesOverdueSeenEntry: an entry the last scan saw, left
// published past its expiry, is caught (the scan is skipped only while
// Now <= the earliest due it saw).
func TestExpirySkipCatchesOverdueSeenEntry(t *testing.T) {
	w := stepUntil(t, func(w *world.World) bool { return overdueCandidate(w, true) != nil })
	plantMissedCollection(w, overdueCandidate(w, true))
	wantCaught(t, w, "X-2", "still published")
}

// TestExpirySkipCatchesOverdueNewEntry: an entry published since the last
// scan (Ledger.Publications moved), left published past its expiry, is
// caught.
func TestExpirySkipCatchesOverdueNewEntry(t *testing.T) {
	w := stepUntil(t, func(w *world.World) bool { return overdueCandidate(w, false) != nil })
	plantMissedCollection(w, overdueCandidate(w, false))
	wantCaught(t, w, "X-2", "still published")
}
