package checks

import (
	"fmt"

	"github.com/baton-dev/baton/sim/world"
)

// checkNoUseAfterRelease: once a producer's removal won (released, expired,
// drained) nobody gets the entry's data, and an entry a consumer got was
// never removed by the producer (SU-1, SU-3: one winner of the race).
func checkNoUseAfterRelease(w *world.World) error {
	for _, e := range w.Ledger.All {
		id := e.Id
		if e.RemovedCause != "" && len(e.Consumptions) > 0 {
			return fmt.Errorf("entry %s was %s by the producer and consumed by %v", world.Short(id), e.RemovedCause, e.Consumptions)
		}
		if e.Abandoned && (e.Published || len(e.Consumptions) > 0) {
			return fmt.Errorf("C-1 entry %s abandoned but published or consumed", world.Short(id))
		}
	}
	return nil
}
