package shareddir

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
)

// Dir is one producer instance's view of a shared root directory: its
// instance directory <root>/<instanceID>/, its HMAC key, and the entry files
// it publishes there. Consumers do not need a Dir: they call LoadProducerKey
// and Claim.
//
// Methods are safe for concurrent use, except that Close must not run
// concurrently with Write (a Write racing Close may leave its entry behind).
type Dir struct {
	fsys       FS
	root       string
	instanceID string
	dir        string         // <root>/<instanceID>
	key        []byte         // keyBytes random bytes, also in <dir>/hmac.key
	keyBuf     [keyBytes]byte // key's storage (in the Dir's own allocation)
	lock       FileLock       // the flock on <dir>/lock, held until Close

	sweepMu     sync.Mutex // serializes SweepDeadInstances
	lastSweepMs int64
	sweptOnce   bool

	mu     sync.Mutex // guards rand, suffix, closed and paths
	rand   io.Reader
	suffix [randSuffixHex / 2]byte // randSuffix's buffer (no allocation per suffix)
	closed bool
	// paths holds entryPath(dir, id) of the entries this Dir wrote, until
	// it removes them or sees them gone (Exists), at most maxCachedPaths:
	// a producer looks at each published entry again and again, and
	// building its path each time was the simulator's most frequent
	// allocation (issue #16).
	paths map[string]string
}

// maxCachedPaths bounds Dir.paths (entries gone behind the Dir's back,
// never looked at again, stay in it).
const maxCachedPaths = 1024

// rememberPath caches entryID's path (Write).
func (d *Dir) rememberPath(entryID, path string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.paths) >= maxCachedPaths {
		return
	}
	if d.paths == nil {
		d.paths = map[string]string{}
	}
	d.paths[entryID] = path
}

// forgetPath drops entryID's cached path: the entry is gone.
func (d *Dir) forgetPath(entryID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.paths, entryID)
}

// entryPath is entryPath(d.dir, entryID), from the cache when there.
// With checkOpen, it is checkOpen's error after Close.
func (d *Dir) entryPath(entryID string, checkOpen bool) (string, error) {
	d.mu.Lock()
	if checkOpen && d.closed {
		d.mu.Unlock()
		return "", fmt.Errorf("shareddir: producer instance %s: %w", d.instanceID, fs.ErrClosed)
	}
	p, ok := d.paths[entryID]
	d.mu.Unlock()
	if !ok {
		p = entryPath(d.dir, entryID)
	}
	return p, nil
}

// OpenProducer creates the instance directory of a new producer instance,
// takes its lock and writes its HMAC key, and returns the producer's Dir.
//
// If root does not exist it is created (parents as needed) and set to mode
// 0700; an existing root is used as it is and its mode is never changed (an
// operator's `chmod 1777` stays), but it must be a directory, not a
// symlink. Then, in this order: <root>/<instanceID>/ is created (0700,
// which must not exist yet: instance ids are fresh UUIDs); the instance
// lock is created as .tmp-lock-<16 hex> (0600), locked (FS.TryLock,
// flock LOCK_EX|LOCK_NB) and renamed to <root>/<instanceID>/lock, so the
// lock file is never visible unlocked while its producer lives; 32 bytes
// read from rand are written to <root>/<instanceID>/hmac.key (0600)
// through a temp file, fsync and rename, so a consumer never reads a
// partial key. The lock is held until Close. rand is also the source of
// temp-file suffixes; it is guarded by the Dir's mutex, so a
// non-concurrent reader is fine. Pass crypto/rand.Reader in the engine.
// Call SweepDeadInstances next to remove crashed producers' directories.
//
// Errors: ErrBadName if instanceID is not a lowercase UUID (nothing touched);
// an error wrapping fs.ErrExist if the instance directory already exists;
// the file system's error otherwise (on failure after the instance directory
// was made it is removed again; a failure of that removal is joined as
// ErrCleanup).
func OpenProducer(fsys FS, root, instanceID string, rand io.Reader) (*Dir, error) {
	if err := ValidateInstanceID(instanceID); err != nil {
		return nil, err
	}
	if fsys == nil || rand == nil || root == "" {
		return nil, errors.New("shareddir: OpenProducer needs a file system, a root and a randomness source")
	}
	if err := ensureRoot(fsys, root); err != nil {
		return nil, err
	}
	dir := instanceDir(root, instanceID)
	if err := fsys.Mkdir(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("shareddir: create producer instance dir %s: %w", dir, err)
	}
	d := &Dir{fsys: fsys, root: root, instanceID: instanceID, dir: dir, rand: rand}
	if err := d.initLockAndKey(); err != nil {
		err = errors.Join(err, d.removeAllFiles())
		if d.lock != nil {
			err = errors.Join(err, d.lock.Close())
		}
		return nil, err
	}
	return d, nil
}

// ensureRoot creates root (0700) if it does not exist, and otherwise only
// checks that it is a directory: a directory baton did not create keeps
// its mode.
func ensureRoot(fsys FS, root string) error {
	ok, err := exists(fsys, root) // a missing root costs no error value
	if err != nil {
		return fmt.Errorf("shareddir: stat root %s: %w", root, err)
	}
	if !ok {
		if parent := filepath.Dir(root); parent != root {
			if err := fsys.MkdirAll(parent, dirPerm); err != nil {
				return fmt.Errorf("shareddir: create the parent of root %s: %w", root, err)
			}
		}
		switch err := fsys.Mkdir(root, dirPerm); {
		case err == nil:
			// Ours: exactly 0700 whatever the umask.
			if err := fsys.Chmod(root, dirPerm); err != nil {
				return fmt.Errorf("shareddir: chmod root %s 0700: %w", root, err)
			}
		case errors.Is(err, fs.ErrExist):
			// Someone else made it meanwhile: not ours to chmod.
		default:
			return fmt.Errorf("shareddir: create root %s: %w", root, err)
		}
	}
	return requireDir(fsys, root)
}

// initLockAndKey sets the instance dir to 0700, takes the instance lock and
// writes a fresh key.
func (d *Dir) initLockAndKey() error {
	if err := d.fsys.Chmod(d.dir, dirPerm); err != nil {
		return fmt.Errorf("shareddir: chmod %s 0700: %w", d.dir, err)
	}
	var hexBuf [randSuffixHex]byte
	suffix, err := d.suffixNoCheck(hexBuf[:0])
	if err != nil {
		return err
	}
	lockPath, tmp, _ := tempFinalPaths(d.dir, lockFileName, lockTmpInfix, suffix)
	lock, err := d.fsys.TryLock(tmp, true, filePerm)
	if err != nil {
		return fmt.Errorf("shareddir: create the instance lock: %w", err)
	}
	d.lock = lock
	if err := d.fsys.Chmod(tmp, filePerm); err != nil {
		return fmt.Errorf("shareddir: chmod %s 0600: %w", tmp, err)
	}
	if err := d.fsys.Rename(tmp, lockPath); err != nil {
		return fmt.Errorf("shareddir: rename the instance lock into place: %w", err)
	}
	return d.initKey()
}

// initKey writes a fresh key.
func (d *Dir) initKey() error {
	key := d.keyBuf[:]
	if _, err := io.ReadFull(d.rand, key); err != nil {
		return fmt.Errorf("shareddir: read HMAC key randomness: %w", err)
	}
	var hexBuf [randSuffixHex]byte
	suffix, err := d.suffixNoCheck(hexBuf[:0])
	if err != nil {
		return err
	}
	keyPath, tmpPath, tmp := tempFinalPaths(d.dir, keyFileName, keyTmpInfix, suffix)
	if err := writeFilePaths(d.fsys, d.dir, tmpPath, keyPath, tmp, keyFileName, key); err != nil {
		return err
	}
	if err := d.fsys.SyncDir(d.root); err != nil {
		return fmt.Errorf("shareddir: fsync root %s: %w", d.root, err)
	}
	d.key = key
	return nil
}

// requireDir returns an error unless path is a directory (not a symlink).
func requireDir(fsys FS, path string) error {
	info, err := fsys.Lstat(path)
	if err != nil {
		return fmt.Errorf("shareddir: stat %s: %w", path, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("shareddir: %s is not a directory (mode %v)", path, info.Mode())
	}
	return nil
}

// InstanceID returns the producer instance id (a lowercase UUID).
func (d *Dir) InstanceID() string { return d.instanceID }

// Path returns the instance directory, <root>/<instanceID>.
func (d *Dir) Path() string { return d.dir }

// Key returns a copy of the instance's 32-byte HMAC key (the content of
// <root>/<instanceID>/hmac.key), for signing references (engine/handoff).
func (d *Dir) Key() []byte { return bytes.Clone(d.key) }

// randSuffix appends 16 fresh lowercase hex digits to dst, or returns
// fs.ErrClosed after Close.
func (d *Dir) randSuffix(dst []byte) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return dst, fmt.Errorf("shareddir: producer instance %s: %w", d.instanceID, fs.ErrClosed)
	}
	return appendRandHex(dst, d.rand, d.suffix[:])
}

// suffixNoCheck appends 16 fresh lowercase hex digits to dst, closed or not.
func (d *Dir) suffixNoCheck(dst []byte) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return appendRandHex(dst, d.rand, d.suffix[:])
}

// checkOpen returns fs.ErrClosed after Close.
func (d *Dir) checkOpen() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("shareddir: producer instance %s: %w", d.instanceID, fs.ErrClosed)
	}
	return nil
}
