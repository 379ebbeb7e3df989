package shareddir

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// FS is the file system this package works through: the real disk (OSFS) in
// the engine, a simulated disk in the simulator. Paths are slash-free ids
// joined under a root with filepath.Join. Errors must satisfy errors.Is with
// fs.ErrNotExist (ENOENT) and fs.ErrExist (EEXIST) like the os package.
//
// Semantics this package relies on: Rename is atomic and, when several
// callers rename the same source concurrently (threads or processes), exactly
// one succeeds and the others get fs.ErrNotExist (CONTRACT SU-1).
type FS interface {
	// MkdirAll creates path and its parents with perm (before umask); no
	// error if path is already a directory.
	MkdirAll(path string, perm fs.FileMode) error
	// Mkdir creates one directory; fs.ErrExist if it exists.
	Mkdir(path string, perm fs.FileMode) error
	// OpenFile opens name with os.OpenFile flags (os.O_RDONLY, os.O_WRONLY|
	// os.O_CREATE|os.O_EXCL, ..., plus O_NOFOLLOW where the platform has it)
	// and perm (before umask) for a created file.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Rename atomically replaces newpath with oldpath (rename(2)).
	Rename(oldpath, newpath string) error
	// Remove deletes a file or an empty directory.
	Remove(name string) error
	// ReadFile returns the whole content of name.
	ReadFile(name string) ([]byte, error)
	// ReadDir lists a directory (any order is fine).
	ReadDir(name string) ([]fs.DirEntry, error)
	// Lstat describes name without following a final symbolic link.
	Lstat(name string) (fs.FileInfo, error)
	// Chmod sets the permission bits of name exactly (no umask).
	Chmod(name string, mode fs.FileMode) error
	// SyncDir makes the directory's entries (creations, renames) durable:
	// fsync(2) of the directory.
	SyncDir(name string) error
	// TryLock takes an exclusive, non-blocking lock on the file name:
	// flock(2) with LOCK_EX|LOCK_NB on a descriptor of its own, held until
	// the returned FileLock is closed (or the process ends, which is how a
	// dead producer's lock becomes free). With create, the file is created
	// exclusively (O_CREAT|O_EXCL, perm before umask); without, an existing
	// regular file is opened read-only without following a symbolic link
	// and without blocking. Errors: an error wrapping ErrLocked when another
	// descriptor holds the lock (its owner is alive); the file system's
	// error otherwise (fs.ErrNotExist, permission, not a regular file).
	TryLock(name string, create bool, perm fs.FileMode) (FileLock, error)
}

// ExistsFS is an FS that tells whether a name exists more cheaply than
// Lstat: without a FileInfo, and without an error value for a missing name
// (the simulator's disk; the package asks on every publish and every look
// at an entry). Exists(name) must answer what Lstat(name) implies: true and
// nil where Lstat succeeds; false and nil where Lstat's error satisfies
// errors.Is(err, fs.ErrNotExist); false and Lstat's error otherwise.
type ExistsFS interface {
	FS
	Exists(name string) (bool, error)
}

// exists reports whether name exists: through ExistsFS where fsys is one,
// else from Lstat.
func exists(fsys FS, name string) (bool, error) {
	if e, ok := fsys.(ExistsFS); ok {
		return e.Exists(name)
	}
	_, err := fsys.Lstat(name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

// FileLock is a lock taken by FS.TryLock. Close releases it and closes its
// descriptor; the file stays.
type FileLock interface {
	Close() error
}

// File is an open file of an FS: reads for a consumer's claimed entry,
// writes+Sync for a producer's temp file, Stat of the open descriptor.
type File interface {
	io.Reader
	io.Writer
	// Stat describes the open file (fstat(2)): size in bytes, mode.
	Stat() (fs.FileInfo, error)
	// Sync flushes the file's data to stable storage (fsync(2)).
	Sync() error
	Close() error
}

// OSFS is FS on the real disk through package os.
type OSFS struct{}

var _ FS = OSFS{}

// MkdirAll is os.MkdirAll.
func (OSFS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }

// Mkdir is os.Mkdir.
func (OSFS) Mkdir(path string, perm fs.FileMode) error { return os.Mkdir(path, perm) }

// OpenFile is os.OpenFile.
func (OSFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // a typed nil *os.File must not become a non-nil File
	}
	return f, nil
}

// Rename is os.Rename.
func (OSFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// Remove is os.Remove.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// ReadFile is os.ReadFile.
func (OSFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// ReadDir is os.ReadDir.
func (OSFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// Lstat is os.Lstat.
func (OSFS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }

// Chmod is os.Chmod.
func (OSFS) Chmod(name string, mode fs.FileMode) error { return os.Chmod(name, mode) }

// TryLock opens (or creates) name and flocks it (see FS.TryLock).
func (OSFS) TryLock(name string, create bool, perm fs.FileMode) (FileLock, error) {
	return tryLock(name, create, perm)
}

// SyncDir opens the directory read-only and fsyncs it.
func (OSFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
