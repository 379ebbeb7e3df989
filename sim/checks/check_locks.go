package checks

import (
	"fmt"

	"github.com/baton-dev/baton/sim/world"
)

// checkNoLockAcrossCalls: Q-5. No lock is held across a blocking RPC: a
// consume that reaches a consumer is admitted (or refused) in the step it
// arrives, whatever transfers that consumer has in flight. A consume that
// waited means it queued behind a lock held across TransferEncoderCache.
//
// Skipped while w.LateAdmissions is 0: every append to a consumer's
// LateAdmissions bumps it (sim/nodes), so 0 means every list is empty and
// the loop would find nothing.
func checkNoLockAcrossCalls(w *world.World) error {
	if w.LateAdmissions == 0 {
		return nil
	}
	for _, c := range w.Cons {
		if len(c.LateAdmissions) > 0 {
			a := c.LateAdmissions[0]
			return fmt.Errorf("PD%d admitted a consume at tick %d that arrived at tick %d: it waited %d ms behind a transfer in flight (a lock held across TransferEncoderCache)",
				c.Idx, a[1], a[0], a[1]-a[0])
		}
	}
	return nil
}
