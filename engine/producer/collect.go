package producer

import "time"

// Collect is one pass of the producer's collector: entries found claimed
// become CONSUMED (ObserveClaims; skipped by the X-2 race mutant,
// CollectorTrustsTable), expired ones are removed (X-2: Table.Collect),
// stale temp files go (the store's Collect; a failure is X-1). now is the
// engine's clock.
func (d *Driver) Collect(now func() time.Time) {
	if !d.CollectorTrustsTable {
		d.ObserveClaims()
	}
	d.Expire(now, func(nowMs int64) []string { return d.Table.Collect(nowMs, d.Env.Decisions()) })
	if err := d.Entries.Collect(now().UnixMilli()); err != nil {
		d.Env.FailCleanup("collect orphans", err)
	}
}

// Expire removes the entries decide expires at the clock's time, read
// under the lock (Table.Expire, Collect, ExpireBeforeRelease: X-2, SU-3):
// each counted as a removal started (Env.RemovalsStartedLocked) in the
// same critical section, then removed without the lock (FinishRemoval);
// a failed removal is logged (X-1 was recorded by FinishRemoval).
func (d *Driver) Expire(now func() time.Time, decide func(nowMs int64) []string) {
	d.Env.Lock()
	expired := decide(now().UnixMilli())
	d.Env.RemovalsStartedLocked(len(expired))
	d.Env.Unlock()
	for _, id := range expired {
		if _, err := d.FinishRemoval(id, true); err != nil {
			d.Log.Error("X-2 expiry removal failed", "entry", id, "err", err)
		}
	}
}

// ObserveClaims looks at which published entries consumers have claimed
// (the store no longer holds them: SU-1) and tells the core
// (Table.ObserveGone). The store is asked without the lock.
func (d *Driver) ObserveClaims() {
	d.Env.Lock()
	ids := d.Table.Published()
	d.Env.Unlock()
	for _, id := range ids {
		ok, err := d.Entries.Exists(id)
		if err != nil || ok {
			continue
		}
		d.Env.Lock()
		d.Table.ObserveGone(id)
		d.Env.Unlock()
	}
}
