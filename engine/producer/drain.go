package producer

// Drain removes every unconsumed entry (S-2: Table.Drain, each removal
// counted as started in the same critical section) and closes the store,
// which removes the instance directory with its key (S-4; a failure is
// It returns the first failure. Only the S-2 mutant
// (handoff.Mutants.DrainBeforeCleanup, through Table.DrainDone) returns
// with removals pending: they are left to run after the drain returned,
// and the process exits first.
func (d *Driver) Drain() error {
	d.ObserveClaims()
	d.Env.Lock()
	ids := d.Table.Drain()
	d.Env.RemovalsStartedLocked(len(ids))
	done := len(ids) > 0 && d.Table.DrainDone(len(ids), 0, d.Env.Decisions())
	d.Env.Unlock()
	if done {
		d.Log.Warn("drain returns before its removals", "pending", len(ids))
		return nil
	}
	var first error
	for _, id := range ids {
		if _, err := d.FinishRemoval(id, false); err != nil && first == nil {
			first = err
		}
	}
	if err := d.Entries.Close(); err != nil {
		d.Env.FailCleanup("close the entry store", err)
		if first == nil {
			first = err
		}
	}
	return first
}
