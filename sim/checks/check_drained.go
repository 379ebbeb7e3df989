package checks

import (
	"fmt"

	"github.com/baton-dev/baton/sim/world"
)

// checkDrained runs once at the end: nothing leaked (CONTRACT section 4:
// every observable but quarantine is 0) and the cache directory is empty (S-4).
func checkDrained(w *world.World) error {
	t := w.Prod.Table
	if t.Entries() != 0 || t.HeldBytes() != 0 || t.PendingRemovals() != 0 || t.Transfers() != 0 || w.Prod.Cleanups != 0 {
		return fmt.Errorf("producer not drained: entries %d bytes %d removing %d transfers %d cleanups %d",
			t.Entries(), t.HeldBytes(), t.PendingRemovals(), t.Transfers(), w.Prod.Cleanups)
	}
	if err := t.CheckInvariants(); err != nil {
		return err
	}
	if files := w.Sd.Files(); len(files) != 0 {
		return fmt.Errorf("cache directory not empty: %v", files)
	}
	for id, st := range w.Sources {
		if st == world.SourceLive {
			return fmt.Errorf("source of %s still registered", world.Short(id))
		}
	}
	for _, c := range w.Cons {
		if c.Receives.Inflight() != 0 || c.Receives.InflightBytes() != 0 {
			return fmt.Errorf("PD%d has %d receives (%d bytes) in flight", c.Idx, c.Receives.Inflight(), c.Receives.InflightBytes())
		}
		if err := c.Receives.CheckInvariants(); err != nil {
			return err
		}
		for i, b := range c.Bufs {
			if b.Owner != 0 && !b.Quarantined {
				return fmt.Errorf("PD%d buffer %d still held by receive %d", c.Idx, i, b.Owner)
			}
		}
	}
	return nil
}

// checkHandoffsEnded: every client finished and every published entry ended
// consumed exactly once, released, expired, drained, vanished, quarantined or
// abandoned (cancelled).
func checkHandoffsEnded(w *world.World) error {
	for _, c := range w.Clients {
		if !c.Done {
			return fmt.Errorf("client %d never finished (stage %d)", c.Idx, c.Stage)
		}
	}
	for _, e := range w.Ledger.All {
		if !e.Terminal() {
			return fmt.Errorf("entry %s of client %d never ended (published %v)", world.Short(e.Id), e.H, e.Published)
		}
	}
	return nil
}
