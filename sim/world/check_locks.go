package world

import "fmt"

// checkNoLockAcrossCalls: Q-5. No lock is held across a blocking RPC: a
// consume that reaches a consumer is admitted (or refused) in the step it
// arrives, whatever transfers that consumer has in flight. A consume that
// waited means it queued behind a lock held across TransferEncoderCache.
func checkNoLockAcrossCalls(w *World) error {
	for _, c := range w.cons {
		if len(c.lateAdmissions) > 0 {
			a := c.lateAdmissions[0]
			return fmt.Errorf("PD%d admitted a consume at tick %d that arrived at tick %d: it waited %d ms behind a transfer in flight (a lock held across TransferEncoderCache)",
				c.idx, a[1], a[0], a[1]-a[0])
		}
	}
	return nil
}
