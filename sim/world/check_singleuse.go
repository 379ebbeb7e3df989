package world

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// checkEntries runs the three checks of every entry's ground truth, in
// this order: checkSingleUse (SU-1), checkReleaseAnswers (SU-3),
// checkNoUseAfterRelease (SU-1). One pass over the ledger first asks
// whether any entry breaks any of them (entrySuspect, the union of their
// conditions); only then do they run, each over the whole ledger in turn,
// so the rule and message are exactly theirs.
func checkEntries(w *World) (rule string, err error) {
	released := causeNames[handoff.CauseRelease]
	suspect := false
	for _, e := range w.ledger.all {
		if entrySuspect(e, released) {
			suspect = true
			break
		}
	}
	if !suspect {
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
	return "", nil
}

// entrySuspect reports whether e breaks a condition of checkSingleUse,
// checkReleaseAnswers or checkNoUseAfterRelease (keep it their union).
func entrySuspect(e *entryRecord, released string) bool {
	nc, nok := len(e.consumptions), len(e.okCalls)
	return nc > 1 || nok > 1 || (nok == 1 && nc == 0) || // checkSingleUse
		e.aborted > 1 || (e.aborted == 1 && e.removedCause != released) || // checkReleaseAnswers
		(e.removedCause != "" && nc > 0) || (e.abandoned && (e.published || nc > 0)) // checkNoUseAfterRelease
}

// checkSingleUse: SU-1 against the ground truth. An entry's data reaches at
// most one receive (a won rename, a read, a landed WRITE), at most one
// consume answer OK reaches a client, and every OK answer is backed by a
// real consumption.
func checkSingleUse(w *World) error {
	for _, e := range w.ledger.all {
		id := e.id
		if len(e.consumptions) > 1 {
			return fmt.Errorf("entry %s consumed %d times: %v", short(id), len(e.consumptions), e.consumptions)
		}
		if len(e.okCalls) > 1 {
			return fmt.Errorf("entry %s answered OK to %d consume calls %v", short(id), len(e.okCalls), e.okCalls)
		}
		if len(e.okCalls) == 1 && len(e.consumptions) == 0 {
			return fmt.Errorf("entry %s answered OK to a consume but no receive got its data", short(id))
		}
	}
	return nil
}

// checkReleaseAnswers: SU-3. ABORTED is answered at most once per entry and
// only when the release really removed the storage.
func checkReleaseAnswers(w *World) error {
	released := causeNames[handoff.CauseRelease] // one map lookup per step, not per entry
	for _, e := range w.ledger.all {
		id := e.id
		if e.aborted > 1 {
			return fmt.Errorf("entry %s answered ABORTED %d times", short(id), e.aborted)
		}
		if e.aborted == 1 && e.removedCause != released {
			return fmt.Errorf("entry %s answered ABORTED but its storage was %q (consumptions %v)", short(id), e.removedCause, e.consumptions)
		}
	}
	return nil
}
