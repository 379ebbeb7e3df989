package world

import "fmt"

// checkDrained runs once at the end: nothing leaked (CONTRACT section 4:
// every observable but quarantine is 0) and the cache directory is empty (S-4).
func checkDrained(w *World) error {
	t := w.prod.table
	if t.Entries() != 0 || t.HeldBytes() != 0 || t.PendingRemovals() != 0 || t.Transfers() != 0 || w.prod.cleanups != 0 {
		return fmt.Errorf("producer not drained: entries %d bytes %d removing %d transfers %d cleanups %d",
			t.Entries(), t.HeldBytes(), t.PendingRemovals(), t.Transfers(), w.prod.cleanups)
	}
	if err := t.CheckInvariants(); err != nil {
		return err
	}
	if files := w.sd.files(); len(files) != 0 {
		return fmt.Errorf("cache directory not empty: %v", files)
	}
	for id, st := range w.sources {
		if st == sourceLive {
			return fmt.Errorf("source of %s still registered", short(id))
		}
	}
	for _, c := range w.cons {
		if c.receives.Inflight() != 0 || c.receives.InflightBytes() != 0 {
			return fmt.Errorf("PD%d has %d receives (%d bytes) in flight", c.idx, c.receives.Inflight(), c.receives.InflightBytes())
		}
		if err := c.receives.CheckInvariants(); err != nil {
			return err
		}
		for i, b := range c.bufs {
			if b.owner != 0 && !b.quarantined {
				return fmt.Errorf("PD%d buffer %d still held by receive %d", c.idx, i, b.owner)
			}
		}
	}
	return nil
}

// checkHandoffsEnded: every client finished and every published entry ended
// consumed exactly once, released, expired, drained, vanished, quarantined or
// abandoned (cancelled).
func checkHandoffsEnded(w *World) error {
	for _, c := range w.clients {
		if !c.done {
			return fmt.Errorf("client %d never finished (stage %d)", c.idx, c.stage)
		}
	}
	for _, e := range w.ledger.all {
		if !e.terminal() {
			return fmt.Errorf("entry %s of client %d never ended (published %v)", short(e.id), e.h, e.published)
		}
	}
	return nil
}
