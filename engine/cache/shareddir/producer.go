package shareddir

import "io"

// This file holds the producer's sequences over its directory that every
// driver follows (engine/server's shared-directory store, the simulator's
// producer over sim/simfs): the start and the collector pass.

// OrphanAgeMs is how old a temporary or claimed file must be before the
// producer's collector takes it (CollectOrphans' olderThanMs): a minute,
// far longer than any Write.
const OrphanAgeMs int64 = 60_000

// Swept is what a sweep of dead instances did: the directories it removed
// and its failure. A failure concerns other instances, never this one's
// cleanup: the caller logs it and keeps its Health (no X-1).
type Swept struct {
	Removed int
	Err     error
}

// StartProducer starts a producer instance on the shared directory:
// OpenProducer (its instance directory, lock and key), then, unless
// skipSweep (the orphan-sweep-skipped mutant), the sweep of crashed
// producers' instance directories (SweepDeadInstances at nowMs; later
// sweeps come from Collect). Errors: OpenProducer's; the sweep's outcome is
// returned apart, and never prevents the start.
func StartProducer(fsys FS, root, instanceID string, rand io.Reader, nowMs int64, skipSweep bool) (*Dir, Swept, error) {
	d, err := OpenProducer(fsys, root, instanceID, rand)
	if err != nil {
		return nil, Swept{}, err
	}
	if skipSweep {
		return d, Swept{}, nil
	}
	n, err := d.SweepDeadInstances(nowMs)
	return d, Swept{Removed: n, Err: err}, nil
}

// Collect is one pass of the producer's collector over its directory:
// CollectOrphans of files OrphanAgeMs old, then, unless skipSweep, the
// (throttled: SweepIntervalMs) sweep of dead instances. It returns how many
// orphans it deleted and CollectOrphans' error (this instance's cleanup:
// ErrCleanup is X-1), and the sweep's outcome apart.
func (d *Dir) Collect(nowMs int64, skipSweep bool) (orphans int, swept Swept, err error) {
	orphans, err = d.CollectOrphans(OrphanAgeMs, nowMs)
	if !skipSweep {
		swept.Removed, swept.Err = d.SweepDeadInstances(nowMs)
	}
	return orphans, swept, err
}
