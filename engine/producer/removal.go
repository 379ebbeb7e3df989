package producer

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// FinishRemoval removes the storage of an entry the table moved to
// Removing (a release, an expiry, the drain: the caller made that
// transition and counted the cleanup) and reports the result to the core:
// RemovalDone, whose outcome it returns (won: this removal, not a
// consumer's claim, took the entry: SU-1, SU-3), or RemovalFailed, a
// cleanup failure (X-1: sticky NOT_READY, handoff.ErrCleanupFailed).
// expiry says the collector expires the entry. The store's Remove
// runs without the lock.
func (d *Driver) FinishRemoval(id string, expiry bool) (handoff.ReleaseOutcome, error) {
	won, err := d.Entries.Remove(id)
	if expiry && d.CollectorTrustsTable && err == nil && !won {
		// The X-2 race mutant: an entry gone before its expiry's removal is a failure.
		err = fmt.Errorf("entry %s vanished before its removal", id)
	}
	d.Env.Lock()
	err = d.Env.RemovalEndedLocked(id, err)
	if err != nil {
		d.Table.RemovalFailed(id)
		d.Env.Unlock()
		d.Env.FailCleanup("remove entry "+id, err)
		return 0, fmt.Errorf("%w: X-1 remove entry %s: %v", handoff.ErrCleanupFailed, id, err)
	}
	out := d.Table.RemovalDone(id, won)
	d.Env.Unlock()
	return out, nil
}
