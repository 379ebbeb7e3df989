package world

import "fmt"

// checkNoUseAfterRelease: once a producer's removal won (released, expired,
// drained) nobody gets the entry's data, and an entry a consumer got was
// never removed by the producer (SU-1, SU-3: one winner of the race).
func checkNoUseAfterRelease(w *World) error {
	for _, e := range w.ledger.all {
		id := e.id
		if e.removedCause != "" && len(e.consumptions) > 0 {
			return fmt.Errorf("entry %s was %s by the producer and consumed by %v", short(id), e.removedCause, e.consumptions)
		}
		if e.abandoned && (e.published || len(e.consumptions) > 0) {
			return fmt.Errorf("C-1 entry %s abandoned but published or consumed", short(id))
		}
	}
	return nil
}
