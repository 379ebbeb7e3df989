package shareddir

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// Dead-instance sweeping (docs/implementing.md section 4.3, "Orphans").
const (
	// DeadInstanceGraceMs is how old (modification time, ms) an instance
	// directory without a lock file must be before a sweep removes it: a
	// producer is between its mkdir and its lock for microseconds; a
	// directory whose removal was interrupted after its lock went is older.
	DeadInstanceGraceMs = 60_000
	// SweepIntervalMs is the least time between two sweeps of one Dir: the
	// first call always sweeps (producer start), later ones at most this
	// often (the collector calls every pass).
	SweepIntervalMs = 10_000
	// SweepMaxDirs bounds the directories one sweep removes, so a root
	// full of crashed instances cannot stall the collector.
	SweepMaxDirs = 16
)

// SweepDeadInstances removes the instance directories of dead producers
// under the root, at most SweepMaxDirs per call, and sweeps at most once
// every SweepIntervalMs of nowMs (Unix ms; the first call always sweeps).
// A directory <root>/<uuid>/ of another instance is dead when its lock
// file can be locked (FS.TryLock: no live process holds it) or, without a
// lock file, when its modification time is more than DeadInstanceGraceMs
// before nowMs. A dead directory is emptied while its lock is held (every
// file, the lock file last) and removed. A directory whose lock is held
// (ErrLocked) or cannot be opened is never touched; nor is anything whose
// name is not a lowercase UUID, this instance's own directory, or anything
// that is not a directory (a symlink named like one, say).
//
// It returns how many directories it removed. Errors: fs.ErrClosed after
// Close; otherwise every failure joined (the listing, a file that could
// not be deleted, a subdirectory that keeps a directory non-empty). They
// concern other instances, not this one's cleanup: the caller logs them and
// keeps its Health (they are not X-1 even where they wrap ErrCleanup); the
// next sweep retries.
func (d *Dir) SweepDeadInstances(nowMs int64) (removed int, err error) {
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	d.sweepMu.Lock()
	defer d.sweepMu.Unlock()
	if d.sweptOnce && nowMs-d.lastSweepMs < SweepIntervalMs {
		return 0, nil
	}
	d.sweptOnce, d.lastSweepMs = true, nowMs
	des, err := d.fsys.ReadDir(d.root)
	if err != nil {
		return 0, fmt.Errorf("shareddir: list root %s: %w", d.root, err)
	}
	var errs []error
	for _, de := range des {
		if removed == SweepMaxDirs {
			break
		}
		name := de.Name()
		if name == d.instanceID || ValidateInstanceID(name) != nil {
			continue
		}
		ok, err := removeIfDead(d.fsys, filepath.Join(d.root, name), nowMs)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed++
		}
	}
	if removed > 0 {
		if err := d.fsys.SyncDir(d.root); err != nil {
			errs = append(errs, fmt.Errorf("shareddir: fsync root %s: %w", d.root, err))
		}
	}
	return removed, errors.Join(errs...)
}

// removeIfDead removes the instance directory dir if its owner is dead
// (see SweepDeadInstances); removed is true when dir is gone because of it.
func removeIfDead(fsys FS, dir string, nowMs int64) (removed bool, err error) {
	info, err := fsys.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("shareddir: stat %s: %w", dir, err)
	}
	if !info.IsDir() {
		return false, nil // a file or a symlink named like an instance: not ours
	}
	lock, err := fsys.TryLock(join(dir, lockFileName), false, 0)
	switch {
	case err == nil:
		defer lock.Close() // released after the directory is gone
	case errors.Is(err, fs.ErrNotExist):
		// No lock file: a producer still creating its directory (young),
		// or a removal interrupted after the lock file went (old).
		if nowMs-info.ModTime().UnixMilli() <= DeadInstanceGraceMs {
			return false, nil
		}
	default:
		return false, nil // ErrLocked (alive), or a lock we cannot open: never touched
	}
	errs := removeDirFiles(fsys, dir)
	if len(errs) == 0 {
		if err := fsys.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove dead instance dir %s: %w", dir, err))
		} else if err == nil {
			removed = true
		}
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("shareddir: dead instance %s: %w", filepath.Base(dir), errors.Join(errs...))
	}
	return removed, nil
}
