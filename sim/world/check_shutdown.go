package world

import "fmt"

// checkStopped: S-2, when the producer is about to exit its drain: every
// cleanup task it started has finished (no removal pending, no publish
// between Reserve and its end). Called by stopProducer.
func checkStopped(w *World) error {
	p := w.prod
	if p.cleanups > 0 || p.table.PendingRemovals() > 0 || p.publishing > 0 {
		return fmt.Errorf("producer exits its drain with %d cleanup task(s) running, %d removal(s) pending and %d publish(es) in flight",
			p.cleanups, p.table.PendingRemovals(), p.publishing)
	}
	return nil
}
