package checks

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/world"
)

// checkEntries runs the three checks of every entry's ground truth, in
// this order: checkSingleUse (SU-1), checkReleaseAnswers (SU-3),
// checkNoUseAfterRelease (SU-1). A pass over the entries touched since its
// last look (the ledger's Touched: only a change to one of the fields they
// judge can break them, and every entry touched before passed then) first
// asks whether any breaks any of them (entrySuspect, the union of their
// conditions); only then do they run, each over the whole ledger in turn,
// so the rule and message are exactly theirs.
func checkEntries(w *world.World) (rule string, err error) {
	if len(w.Ledger.Touched) == 0 {
		return "", nil // nothing new to judge (the scan would find nothing)
	}
	return checkEntriesScan(w)
}

// checkEntriesScan is checkEntries's scan, once there is something to look at.
func checkEntriesScan(w *world.World) (rule string, err error) {
	released := releasedName
	suspect := false
	for _, e := range w.Ledger.Touched {
		if entrySuspect(e, released) {
			suspect = true
			break
		}
	}
	if !suspect {
		w.Ledger.Untouch()
		return "", nil
	}
	if err := checkSingleUse(w); err != nil {
		return "SU-1", err
	}
	if err := checkReleaseAnswers(w); err != nil {
		return "SU-3", err
	}
	if err := checkNoUseAfterRelease(w); err != nil {
		return "SU-1", err
	}
	w.Ledger.Untouch()
	return "", nil
}

// releasedName is world.CauseNames' name of a release, looked up once:
// checkEntries runs every step.
var releasedName = world.CauseNames[handoff.CauseRelease]

// entrySuspect reports whether e breaks a condition of checkSingleUse,
// checkReleaseAnswers or checkNoUseAfterRelease (keep it their union).
func entrySuspect(e *world.EntryRecord, released string) bool {
	nc, nok := len(e.Consumptions), len(e.OkCalls)
	return nc > 1 || nok > 1 || (nok == 1 && nc == 0) || // checkSingleUse
		e.Aborted > 1 || (e.Aborted == 1 && e.RemovedCause != released) || // checkReleaseAnswers
		(e.RemovedCause != "" && nc > 0) || (e.Abandoned && (e.Published || nc > 0)) // checkNoUseAfterRelease
}

// checkSingleUse: SU-1 against the ground truth. An entry's data reaches at
// most one receive (a won rename, a read, a landed WRITE), at most one
// consume answer OK reaches a client, and every OK answer is backed by a
// real consumption.
func checkSingleUse(w *world.World) error {
	for _, e := range w.Ledger.All {
		id := e.Id
		if len(e.Consumptions) > 1 {
			return fmt.Errorf("entry %s consumed %d times: %v", world.Short(id), len(e.Consumptions), e.Consumptions)
		}
		if len(e.OkCalls) > 1 {
			return fmt.Errorf("entry %s answered OK to %d consume calls %v", world.Short(id), len(e.OkCalls), e.OkCalls)
		}
		if len(e.OkCalls) == 1 && len(e.Consumptions) == 0 {
			return fmt.Errorf("entry %s answered OK to a consume but no receive got its data", world.Short(id))
		}
	}
	return nil
}

// checkReleaseAnswers: SU-3. ABORTED is answered at most once per entry and
// only when the release really removed the storage.
func checkReleaseAnswers(w *world.World) error {
	released := world.CauseNames[handoff.CauseRelease] // one map lookup per step, not per entry
	for _, e := range w.Ledger.All {
		id := e.Id
		if e.Aborted > 1 {
			return fmt.Errorf("entry %s answered ABORTED %d times", world.Short(id), e.Aborted)
		}
		if e.Aborted == 1 && e.RemovedCause != released {
			return fmt.Errorf("entry %s answered ABORTED but its storage was %q (consumptions %v)", world.Short(id), e.RemovedCause, e.Consumptions)
		}
	}
	return nil
}
