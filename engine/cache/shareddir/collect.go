package shareddir

import (
	"errors"
	"fmt"
	"io/fs"
)

// CollectOrphans deletes the temp files (.tmp-*) and claimed files
// (.claimed-*) of this instance whose modification time is at least
// olderThanMs before nowMs (Unix ms): what a crashed consumer or an
// interrupted write left behind. A claimed file keeps its entry's write time,
// so it may be collected while a consumer still reads it; that is harmless,
// because Claim reads through a descriptor opened before its rename.
// olderThanMs must exceed the longest Write, or an in-progress Write fails.
// Entry files are never touched (their TTL is the table's decision; expire
// them with Remove). Files that vanish concurrently are skipped.
//
// It returns how many files this call deleted. Errors: fs.ErrClosed after
// Close; the listing's error; ErrCleanup joining every stat or delete
// that failed other than with "not found" (the rest are still collected).
func (d *Dir) CollectOrphans(olderThanMs int64, nowMs int64) (removed int, err error) {
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	des, err := d.fsys.ReadDir(d.dir)
	if err != nil {
		return 0, fmt.Errorf("shareddir: list %s: %w", d.dir, err)
	}
	var errs []error
	for _, de := range des {
		name := de.Name()
		if !isOrphanCandidate(name) {
			continue
		}
		p := join(d.dir, name)
		info, err := d.fsys.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // claimed, deleted or renamed into place meanwhile
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: X-2 stat %s: %w", ErrCleanup, p, err))
			continue
		}
		if nowMs-info.ModTime().UnixMilli() < olderThanMs {
			continue
		}
		if err := d.fsys.Remove(p); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("%w: X-2 remove %s: %w", ErrCleanup, p, err))
			}
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// Close ends the producer instance. With removeAll (shutdown, S-4) it
// releases every entry still present (as Remove does, so a consumer racing
// the shutdown either wins its claim or gets ErrGone), deletes every other
// file of the instance directory (temp and claimed files, hmac.key, then
// the lock file last) and the directory itself, leaving nothing of this
// instance under root. The driver should release entries through Remove
// first to learn each outcome; Close is the backstop. Without removeAll
// the files stay. Either way the instance lock is released last, so from
// then on another producer's SweepDeadInstances may remove what is left.
// Later calls of Write, Remove, Exists, List, CollectOrphans and
// SweepDeadInstances return fs.ErrClosed; a second Close returns nil.
//
// Errors: ErrCleanup joining every failure; a missing instance
// directory is not an error.
func (d *Dir) Close(removeAll bool) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	var err error
	if removeAll {
		err = d.removeAllFiles()
	}
	if d.lock != nil {
		if lerr := d.lock.Close(); lerr != nil {
			err = errors.Join(err, fmt.Errorf("%w: release the instance lock: %w", ErrCleanup, lerr))
		}
	}
	return err
}

// removeAllFiles releases the entries, deletes every file (the lock file
// last) and the instance directory. Every failure is returned, wrapped in
// ErrCleanup.
func (d *Dir) removeAllFiles() error {
	var errs []error
	ids, err := d.list()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: S-4 %w", ErrCleanup, err)
	}
	for _, id := range ids {
		if _, err := d.remove(id); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, removeDirFiles(d.fsys, d.dir)...)
	if err := removeFile(d.fsys, d.dir); err != nil {
		errs = append(errs, err)
	} else if err := d.fsys.SyncDir(d.root); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("%w: S-4 fsync root %s: %w", ErrCleanup, d.root, err))
	}
	return errors.Join(errs...)
}

// removeDirFiles deletes every entry of dir, the lock file last (so an
// interrupted removal leaves a lock for the next sweeper to take). Files
// that vanish concurrently are fine; every other failure wraps ErrCleanup.
func removeDirFiles(fsys FS, dir string) []error {
	des, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return []error{fmt.Errorf("%w: list %s: %w", ErrCleanup, dir, err)}
	}
	var errs []error
	hasLock := false
	for _, de := range des {
		if de.Name() == lockFileName {
			hasLock = true
			continue
		}
		if err := removeFile(fsys, join(dir, de.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if hasLock && len(errs) == 0 {
		if err := removeFile(fsys, join(dir, lockFileName)); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
