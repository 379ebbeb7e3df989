// Package simfs is an in-memory, deterministic file system implementing
// shareddir.FS for the simulator (package sim), so the simulator drives the
// REAL shared-directory code (engine/cache/shareddir: OpenProducer, Write,
// Claim, Remove, CollectOrphans, SweepDeadInstances, Close) instead of a
// model of it.
//
// A Disk is the shared disk of one simulated host; each simulated process
// works through its own Proc (a shareddir.FS), which owns the flocks it
// takes and the files it opens. Proc.Crash kills the process: its locks are
// free from then on (as the kernel frees a dead process's flocks) and its
// open files fail.
//
// Semantics (those shareddir relies on, see shareddir.FS):
//   - Rename is atomic; of several renames of one source exactly one
//     succeeds and the others get ENOENT (the SU-1 primitive). Everything
//     runs in the simulator's one goroutine, so "concurrent" calls are
//     calls interleaved between other FS calls (see Hook).
//   - Errors are *fs.PathError wrapping syscall errnos (ENOENT, EEXIST,
//     ENOTDIR, ENOTEMPTY, ENOSPC), so errors.Is(err, fs.ErrNotExist) and
//     errors.Is(err, fs.ErrExist) hold as with package os.
//   - ReadDir lists names sorted (no map order is ever observable).
//   - An open file reads the inode it opened, also after a rename or a
//     removal of its name (what Claim relies on).
//   - No symbolic links or FIFOs exist, so O_NOFOLLOW and O_NONBLOCK are
//     accepted and ignored.
//   - Durability: a file's data is durable after File.Sync; a name
//     (creation or rename target) is durable after SyncDir of its
//     directory. LoseUnsynced models losing what was not durable (a
//     crash of the machine, or the simulator's "unsynced data lost"):
//     a file whose data or name is not durable may disappear. A rename
//     whose target name is lost does not bring back the old name (a
//     simplification: shareddir only renames fresh temp and claimed
//     names).
//
// Fault injection and interleaving go through Disk.Hook: it is called
// before every operation with the process, the operation and the path; a
// non-nil error fails the operation with that error (ENOSPC on a write, an
// I/O error), and the hook may itself run other processes' operations
// first (another consumer's Claim, a producer's Remove landing between a
// Claim's open and its rename) or panic to crash the calling process in
// the middle of a call. The simulator draws those decisions from its own
// seeded streams, so a run stays a function of its seed.
package simfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/baton-dev/baton/engine/cache/shareddir"
)

// Op names an operation for Disk.Hook.
type Op uint8

// The operations.
const (
	OpMkdir Op = iota + 1
	OpOpen
	OpRead
	OpWrite
	OpSync
	OpRename
	OpRemove
	OpReadFile
	OpReadDir
	OpLstat
	OpChmod
	OpSyncDir
	OpTryLock
)

var opNames = [...]string{OpMkdir: "mkdir", OpOpen: "open", OpRead: "read", OpWrite: "write", OpSync: "fsync",
	OpRename: "rename", OpRemove: "remove", OpReadFile: "readfile", OpReadDir: "readdir", OpLstat: "lstat",
	OpChmod: "chmod", OpSyncDir: "fsyncdir", OpTryLock: "trylock"}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Umask is applied to the permissions of created files and directories.
const Umask = 0o022

// inode is a file or a directory.
type inode struct {
	dir   bool
	perm  fs.FileMode
	data  []byte
	modMs int64
	// synced: the data is durable (File.Sync since the last write);
	// named: the current name is durable (SyncDir of its directory since
	// it got the name).
	synced, named bool
	// children of a directory, by name.
	children map[string]*inode
	// lockedBy is the process holding its flock (nil: none).
	lockedBy *Proc
	// list caches a directory's sorted ReadDir answer until its children
	// change (CollectOrphans lists its directory at every collector pass).
	list []fs.DirEntry
	// stat is the last FileInfo handed out for it (see stat).
	stat *fileInfo
}

// setChild names c name in directory n.
func (n *inode) setChild(name string, c *inode) {
	n.children[name] = c
	n.list = nil
}

// delChild removes name from directory n.
func (n *inode) delChild(name string) {
	delete(n.children, name)
	n.list = nil
}

// Disk is one simulated host's disk. It is not safe for concurrent use:
// the simulator calls it from one goroutine.
type Disk struct {
	root     *inode // "/": rootNode
	rootNode inode
	// procs are allocated processes not yet handed out (Proc).
	procs []Proc
	now   func() int64
	// Hook, when set, is called before every operation (see the package doc).
	Hook func(p *Proc, op Op, path string) error
	// Ops counts the operations run (for the simulator's statistics).
	Ops int64
	// dirs caches the directories found by path (a path as looked up,
	// clean): every operation looks up its directory, so the cache saves
	// one map lookup per element of the path. A cached entry is exact
	// while no directory is removed or renamed; both clear the cache.
	dirs map[string]*inode
	// lastDir is the directory the cache gave last, lastPath its path:
	// most operations in a row work in one directory, so most lookups
	// find it here without hashing its path (cleared with dirs).
	lastPath string
	lastDir  *inode
	// spareDir is the directory listed last, and spareEnts and spareList
	// the memory of that listing, which its next listing reuses
	// (dirListFor).
	spareDir  *inode
	spareEnts []dirEntry
	spareList []fs.DirEntry
}

// cachedDir returns the cached directory at the clean path.
func (d *Disk) cachedDir(path string) (*inode, bool) {
	if d.lastDir != nil && path == d.lastPath {
		return d.lastDir, true
	}
	n, ok := d.dirs[path]
	if ok {
		d.lastPath, d.lastDir = path, n
	}
	return n, ok
}

// NewDisk returns an empty disk (only "/") whose modification times are
// nowMs() Unix ms.
func NewDisk(nowMs func() int64) *Disk {
	d := &Disk{rootNode: inode{dir: true, perm: 0o755, children: map[string]*inode{}, named: true, synced: true}, now: nowMs,
		dirs: map[string]*inode{}}
	d.root = &d.rootNode
	return d
}

// Proc returns a new process's view of the disk.
func (d *Disk) Proc(name string) *Proc {
	if len(d.procs) == 0 {
		d.procs = make([]Proc, procChunk)
	}
	p := &d.procs[0]
	d.procs = d.procs[1:]
	*p = Proc{d: d, name: name}
	return p
}

// procChunk is how many processes Disk.Proc allocates at a time (a run of
// the simulator starts a few).
const procChunk = 4

// Proc is one process's view of a Disk: a shareddir.FS.
type Proc struct {
	d    *Disk
	name string
	dead bool
}

var _ shareddir.ExistsFS = (*Proc)(nil)

// Name is the process's name.
func (p *Proc) Name() string { return p.name }

// Disk is the disk p works on.
func (p *Proc) Disk() *Disk { return p.d }

// Crash kills the process: its flocks are free from now on, its open files
// and later calls fail with fs.ErrClosed. What it wrote stays (a process
// crash loses no data the kernel has; see Disk.LoseUnsynced for that).
func (p *Proc) Crash() { p.dead = true }

// Dead reports whether Crash was called.
func (p *Proc) Dead() bool { return p.dead }

func perr(op, path string, err error) error { return &fs.PathError{Op: op, Path: path, Err: err} }

// enter runs the hook for op; it returns the hook's error or the dead
// process's.
func (p *Proc) enter(op Op, path string) error {
	if p.dead {
		return perr(op.String(), path, fs.ErrClosed)
	}
	p.d.Ops++
	if p.d.Hook != nil {
		if err := p.d.Hook(p, op, path); err != nil {
			return perr(op.String(), path, err)
		}
	}
	return nil
}

// lookup returns the inode at path (absolute, or relative to "/"). It
// walks the path's elements without allocating (the simulator's hot path).
func (d *Disk) lookup(path string) (*inode, error) {
	if path == "" {
		return nil, syscall.ENOENT
	}
	if pn, base, ok := d.cachedParent(path); ok {
		c, ok := pn.children[base]
		if !ok {
			return nil, syscall.ENOENT
		}
		return c, nil
	}
	return d.lookupClean(clean(path))
}

// cachedParent is parent's answer for a path whose directory is in the
// cache and whose last element is a plain name: such a path is clean (the
// cache holds clean paths), so it needs no cleaning pass (every operation
// looks up a path; the simulator runs millions).
func (d *Disk) cachedParent(path string) (*inode, string, bool) {
	var i int
	if n := len(d.lastPath); d.lastDir != nil && n > 0 && len(path) > n && path[n] == '/' &&
		path[:n] == d.lastPath && strings.IndexByte(path[n+1:], '/') < 0 {
		// In the directory the cache gave last (most paths are): its path
		// is a prefix and the rest has no separator, so the last one is at
		// n. Found so, with a vectorised compare and IndexByte, instead of
		// LastIndexByte's byte-by-byte walk back over the base name (a
		// percent of a run).
		i = n
	} else {
		i = strings.LastIndexByte(path, '/')
	}
	if i <= 0 {
		return nil, "", false
	}
	base := path[i+1:]
	if base == "" || base == "." || base == ".." {
		return nil, "", false
	}
	pn, ok := d.cachedDir(path[:i])
	return pn, base, ok
}

// lookupClean is lookup of a path clean already (parent's directory).
func (d *Disk) lookupClean(path string) (*inode, error) {
	if i := strings.LastIndexByte(path, '/'); i > 0 {
		if pn, ok := d.cachedDir(path[:i]); ok {
			c, ok := pn.children[path[i+1:]]
			if !ok {
				return nil, syscall.ENOENT
			}
			return c, nil
		}
	}
	return d.walkClean(path)
}

// lookupDir is lookupClean of a directory's path, through the cache.
func (d *Disk) lookupDir(path string) (*inode, error) {
	if n, ok := d.cachedDir(path); ok {
		return n, nil
	}
	n, err := d.walkClean(path)
	if err == nil && n.dir {
		d.dirs[path] = n
	}
	return n, err
}

// dirGone clears the directory cache when n, a removed or renamed inode,
// is a directory.
func (d *Disk) dirGone(n *inode) {
	if n.dir {
		clear(d.dirs)
		d.lastPath, d.lastDir = "", nil
	}
}

// walkClean is lookupClean element by element, without the cache.
func (d *Disk) walkClean(path string) (*inode, error) {
	n := d.root
	rest := path
	for rest != "" && rest[0] == '/' {
		rest = rest[1:]
	}
	for rest != "" && rest != "." {
		var part string
		part, rest, _ = strings.Cut(rest, "/")
		if !n.dir {
			return nil, syscall.ENOTDIR
		}
		c, ok := n.children[part]
		if !ok {
			return nil, syscall.ENOENT
		}
		n = c
	}
	return n, nil
}

// clean is filepath.Clean, without its cost for a path that is clean
// already (shareddir forms every path with filepath.Join).
func clean(p string) string {
	if p == "" || p[0] != '/' || (len(p) > 1 && p[len(p)-1] == '/') {
		return filepath.Clean(p)
	}
	// One pass: an absolute path without a trailing slash is clean unless
	// an element is empty ("//"), "." or "..".
	for i := 0; i < len(p); i++ {
		j := strings.IndexByte(p[i:], '/')
		if j < 0 {
			break
		}
		i += j
		rest := p[i+1:]
		if rest == "" && len(p) > 1 {
			return filepath.Clean(p)
		}
		if rest != "" && rest[0] == '/' {
			return filepath.Clean(p)
		}
		if rest != "" && rest[0] == '.' {
			if len(rest) == 1 || rest[1] == '/' || (rest[1] == '.' && (len(rest) == 2 || rest[2] == '/')) {
				return filepath.Clean(p)
			}
		}
	}
	return p
}

// parent returns the directory inode holding path and path's last element.
func (d *Disk) parent(path string) (*inode, string, error) {
	if pn, base, ok := d.cachedParent(path); ok {
		return pn, base, nil
	}
	path = clean(path)
	dir, base := "/", path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		dir, base = path[:i], path[i+1:]
		if i == 0 {
			dir = "/"
		}
	}
	if base == "" || base == "." || base == ".." {
		return nil, "", syscall.EINVAL
	}
	pn, err := d.lookupDir(dir) // a prefix of a clean path is clean
	if err != nil {
		return nil, "", err
	}
	if !pn.dir {
		return nil, "", syscall.ENOTDIR
	}
	return pn, base, nil
}

// MkdirAll creates path and missing parents.
func (p *Proc) MkdirAll(path string, perm fs.FileMode) error {
	if err := p.enter(OpMkdir, path); err != nil {
		return err
	}
	n := p.d.root
	// The elements of the clean path, walked without making a list.
	for rest := strings.TrimPrefix(clean(path), "/"); rest != "" && rest != "."; {
		var part string
		part, rest, _ = strings.Cut(rest, "/")
		c, ok := n.children[part]
		if !ok {
			c = p.d.newDir(perm)
			n.setChild(part, c)
		} else if !c.dir {
			return perr("mkdir", path, syscall.ENOTDIR)
		}
		n = c
	}
	return nil
}

func (d *Disk) newDir(perm fs.FileMode) *inode {
	return &inode{dir: true, perm: perm.Perm() &^ Umask, children: map[string]*inode{}, modMs: d.now(), synced: true}
}

// Mkdir creates one directory.
func (p *Proc) Mkdir(path string, perm fs.FileMode) error {
	if err := p.enter(OpMkdir, path); err != nil {
		return err
	}
	pn, base, err := p.d.parent(path)
	if err != nil {
		return perr("mkdir", path, err)
	}
	if _, ok := pn.children[base]; ok {
		return perr("mkdir", path, syscall.EEXIST)
	}
	pn.setChild(base, p.d.newDir(perm))
	pn.modMs = p.d.now()
	return nil
}

// OpenFile opens name; see shareddir.FS.
func (p *Proc) OpenFile(name string, flag int, perm fs.FileMode) (shareddir.File, error) {
	if err := p.enter(OpOpen, name); err != nil {
		return nil, err
	}
	pn, base, err := p.d.parent(name)
	if err != nil {
		return nil, perr("open", name, err)
	}
	n, ok := pn.children[base]
	var f *file
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, perr("open", name, syscall.EEXIST)
	case !ok && flag&os.O_CREATE == 0:
		return nil, perr("open", name, syscall.ENOENT)
	case !ok:
		// A created file and its first open in one allocation (every
		// publish creates its temp file).
		c := &created{n: inode{perm: perm.Perm() &^ Umask, modMs: p.d.now(), synced: true}}
		n, f = &c.n, &c.f
		pn.setChild(base, n)
		pn.modMs = p.d.now()
	}
	write := flag&(os.O_WRONLY|os.O_RDWR) != 0
	if n.dir && write {
		return nil, perr("open", name, syscall.EISDIR)
	}
	if write && flag&os.O_TRUNC != 0 {
		n.data, n.synced, n.modMs = nil, false, p.d.now()
	}
	if f == nil {
		f = new(file)
	}
	*f = file{p: p, n: n, name: name, write: write, read: flag&os.O_WRONLY == 0, append: flag&os.O_APPEND != 0}
	return f, nil
}

// created is a new inode and the open file that created it (OpenFile).
type created struct {
	n inode
	f file
}

// Rename atomically moves oldpath to newpath (replacing a file there).
func (p *Proc) Rename(oldpath, newpath string) error {
	if err := p.enter(OpRename, oldpath); err != nil {
		return err
	}
	op, ob, err := p.d.parent(oldpath)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	n, ok := op.children[ob]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.ENOENT}
	}
	np, nb, err := p.d.parent(newpath)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	if old, ok := np.children[nb]; ok {
		if old == n {
			return nil
		}
		if old.dir || n.dir {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EISDIR}
		}
	}
	op.delChild(ob)
	np.setChild(nb, n)
	p.d.dirGone(n)
	n.named = false
	now := p.d.now()
	op.modMs, np.modMs = now, now
	return nil
}

// Remove deletes a file or an empty directory.
func (p *Proc) Remove(name string) error {
	if err := p.enter(OpRemove, name); err != nil {
		return err
	}
	pn, base, err := p.d.parent(name)
	if err != nil {
		return perr("remove", name, err)
	}
	n, ok := pn.children[base]
	if !ok {
		return perr("remove", name, syscall.ENOENT)
	}
	if n.dir && len(n.children) > 0 {
		return perr("remove", name, syscall.ENOTEMPTY)
	}
	pn.delChild(base)
	p.d.dirGone(n)
	pn.modMs = p.d.now()
	return nil
}

// ReadFile returns a copy of name's content.
func (p *Proc) ReadFile(name string) ([]byte, error) {
	if err := p.enter(OpReadFile, name); err != nil {
		return nil, err
	}
	n, err := p.d.lookup(name)
	if err != nil {
		return nil, perr("open", name, err)
	}
	if n.dir {
		return nil, perr("read", name, syscall.EISDIR)
	}
	return append([]byte(nil), n.data...), nil
}

// ReadDir lists a directory, sorted by name. The listing is valid until
// the directory changes and is listed again, which reuses its memory
// (shareddir reads a listing only within the call that made it).
func (p *Proc) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := p.enter(OpReadDir, name); err != nil {
		return nil, err
	}
	n, err := p.d.lookup(name)
	if err != nil {
		return nil, perr("open", name, err)
	}
	if !n.dir {
		return nil, perr("readdirent", name, syscall.ENOTDIR)
	}
	if n.list == nil {
		ents, list := p.d.dirListFor(n, len(n.children))
		for c, cn := range n.children {
			ents = append(ents, dirEntry{name: c, n: cn})
		}
		slices.SortFunc(ents, func(a, b dirEntry) int { return strings.Compare(a.name, b.name) })
		for i := range ents {
			list[i] = &ents[i]
		}
		n.list = list
	}
	out := n.list[:len(n.list):len(n.list)] // shared: a caller's append copies
	return out, nil
}

// dirListFor returns room for a new listing of directory n's k entries
// (see newDirList): the memory of n's last listing, out of date since (n
// changed), when it was the disk's last listing and has room (E's
// collector lists its instance directory at every pass, and a new
// listing each was several allocations a run), else new memory with room
// to grow, which it keeps for n's next listing.
func (d *Disk) dirListFor(n *inode, k int) (ents []dirEntry, list []fs.DirEntry) {
	if k == 0 {
		return newDirList(0)
	}
	if d.spareDir == n && cap(d.spareEnts) >= k {
		ents, list = d.spareEnts[:0], d.spareList[:k]
	} else {
		c := k
		if d.spareDir == n {
			c = max(k, 2*cap(d.spareEnts))
		}
		ents, list = newDirList(c)
		list = list[:k]
	}
	d.spareDir, d.spareEnts, d.spareList = n, ents[:0:cap(ents)], list[:cap(list)]
	return ents, list
}

// newDirList returns room for a listing of k entries: ents empty with
// capacity k, list of length k. A listing of up to four, most of them,
// takes one allocation (issue #16).
func newDirList(k int) (ents []dirEntry, list []fs.DirEntry) {
	switch {
	case k == 0:
		return nil, []fs.DirEntry{} // not nil: the cached answer
	case k <= 2:
		l := new(dirList2)
		return l.ents[:0:k], l.list[:k:k]
	case k <= 4:
		l := new(dirList4)
		return l.ents[:0:k], l.list[:k:k]
	}
	return make([]dirEntry, 0, k), make([]fs.DirEntry, k)
}

// dirList2 and dirList4 are a listing's entries and the list of them in
// one allocation (newDirList).
type (
	dirList2 struct {
		ents [2]dirEntry
		list [2]fs.DirEntry
	}
	dirList4 struct {
		ents [4]dirEntry
		list [4]fs.DirEntry
	}
)

// dirEntry is a ReadDir entry.
type dirEntry struct {
	name string
	n    *inode
}

func (e *dirEntry) Name() string               { return e.name }
func (e *dirEntry) IsDir() bool                { return e.n.dir }
func (e *dirEntry) Type() fs.FileMode          { return info(e.name, e.n).Mode().Type() }
func (e *dirEntry) Info() (fs.FileInfo, error) { return info(e.name, e.n), nil }

// Lstat describes name.
func (p *Proc) Lstat(name string) (fs.FileInfo, error) {
	if err := p.enter(OpLstat, name); err != nil {
		return nil, err
	}
	n, err := p.d.lookup(name)
	if err != nil {
		return nil, perr("lstat", name, err)
	}
	return n.statAs(filepath.Base(name), nil), nil
}

// Exists implements shareddir.ExistsFS: Lstat's answer, through the same
// hook call (OpLstat), without a FileInfo or an error value for a missing
// name.
func (p *Proc) Exists(name string) (bool, error) {
	if err := p.enter(OpLstat, name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	if _, err := p.d.lookup(name); err != nil {
		// (lookup's ENOENT is compared first: errors.Is's walk of it
		// was a tenth of Exists)
		if err == syscall.ENOENT || errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, perr("lstat", name, err)
	}
	return true, nil
}

// Chmod sets the permission bits of name.
func (p *Proc) Chmod(name string, mode fs.FileMode) error {
	if err := p.enter(OpChmod, name); err != nil {
		return err
	}
	n, err := p.d.lookup(name)
	if err != nil {
		return perr("chmod", name, err)
	}
	n.perm = mode.Perm()
	return nil
}

// SyncDir makes the names in directory name durable.
func (p *Proc) SyncDir(name string) error {
	if err := p.enter(OpSyncDir, name); err != nil {
		return err
	}
	n, err := p.d.lookup(name)
	if err != nil {
		return perr("open", name, err)
	}
	if !n.dir {
		return perr("fsync", name, syscall.ENOTDIR)
	}
	for _, c := range n.children {
		c.named = true
	}
	return nil
}

// TryLock takes the flock of name for p; see shareddir.FS.TryLock. A lock
// held by a crashed process is free.
func (p *Proc) TryLock(name string, create bool, perm fs.FileMode) (shareddir.FileLock, error) {
	if err := p.enter(OpTryLock, name); err != nil {
		return nil, err
	}
	flag := os.O_RDONLY
	if create {
		flag = os.O_RDWR | os.O_CREATE | os.O_EXCL
	}
	d := p.d
	hook := d.Hook
	d.Hook = nil // one operation: the hook ran above
	f, err := p.OpenFile(name, flag, perm)
	d.Hook = hook
	d.Ops--
	if err != nil {
		return nil, err
	}
	n := f.(*file).n
	if n.dir {
		return nil, fmt.Errorf("simfs: lock %s is not a regular file (mode %v)", name, info(name, n).Mode())
	}
	if n.lockedBy != nil && !n.lockedBy.dead {
		return nil, fmt.Errorf("%w: %s", shareddir.ErrLocked, name)
	}
	n.lockedBy = p
	return &lock{p: p, n: n}, nil
}

// lock is a held flock.
type lock struct {
	p *Proc
	n *inode
}

func (l *lock) Close() error {
	if l.n == nil {
		return fs.ErrClosed
	}
	if l.n.lockedBy == l.p {
		l.n.lockedBy = nil
	}
	l.n = nil
	return nil
}

// file is an open file.
type file struct {
	p                   *Proc
	n                   *inode
	name                string
	off                 int
	read, write, append bool
	closed              bool
	// stat is the first FileInfo Stat had to make, in the handle's own
	// allocation (issue #16); statUsed once it has been handed out.
	stat     fileInfo
	statUsed bool
}

func (f *file) check(op Op) error {
	if f.closed {
		return perr(op.String(), f.name, fs.ErrClosed)
	}
	return f.p.enter(op, f.name)
}

func (f *file) Read(b []byte) (int, error) {
	if err := f.check(OpRead); err != nil {
		return 0, err
	}
	if !f.read {
		return 0, perr("read", f.name, syscall.EBADF)
	}
	if f.n.dir {
		return 0, perr("read", f.name, syscall.EISDIR)
	}
	if f.off >= len(f.n.data) {
		return 0, io.EOF
	}
	n := copy(b, f.n.data[f.off:])
	f.off += n
	return n, nil
}

func (f *file) Write(b []byte) (int, error) {
	if err := f.check(OpWrite); err != nil {
		return 0, err
	}
	if !f.write {
		return 0, perr("write", f.name, syscall.EBADF)
	}
	if f.append {
		f.off = len(f.n.data)
	}
	if end := f.off + len(b); end > len(f.n.data) {
		f.n.data = append(f.n.data, make([]byte, end-len(f.n.data))...)
	}
	copy(f.n.data[f.off:], b)
	f.off += len(b)
	f.n.synced = false
	f.n.modMs = f.p.d.now()
	return len(b), nil
}

func (f *file) Stat() (fs.FileInfo, error) {
	if f.closed {
		return nil, perr("stat", f.name, fs.ErrClosed)
	}
	if f.p.dead {
		return nil, perr("stat", f.name, fs.ErrClosed)
	}
	var spare *fileInfo
	if !f.statUsed {
		spare = &f.stat
	}
	fi := f.n.statAs(filepath.Base(f.name), spare)
	if fi == spare {
		f.statUsed = true // handed out: never overwritten
	}
	return fi, nil
}

func (f *file) Sync() error {
	if err := f.check(OpSync); err != nil {
		return err
	}
	f.n.synced = true
	return nil
}

func (f *file) Close() error {
	if f.closed {
		return perr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}

// fileInfo describes an inode.
type fileInfo struct {
	name string
	size int64
	mode fs.FileMode
	mod  int64
}

func info(name string, n *inode) fileInfo {
	m := n.perm
	if n.dir {
		m |= fs.ModeDir
	}
	return fileInfo{name: name, size: int64(len(n.data)), mode: m, mod: n.modMs}
}

// statAs is info(name, n) as an fs.FileInfo: the one handed out last when
// it still describes n under name (a producer looks at each published
// entry at every collector pass), else a new one. A fileInfo is never
// changed once handed out, so each is the snapshot of its call, as with
// os.Lstat.
func (n *inode) statAs(name string, spare *fileInfo) *fileInfo {
	fi := info(name, n)
	if n.stat != nil && *n.stat == fi {
		return n.stat
	}
	// A copy on the heap only on a miss (in spare, when given: storage
	// the caller allocated already): taking fi's address would move
	// every call's fi to the heap, the hits' too.
	if spare == nil {
		spare = new(fileInfo)
	}
	*spare = fi
	n.stat = spare
	return spare
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return i.mode }
func (i fileInfo) ModTime() time.Time { return time.UnixMilli(i.mod) }
func (i fileInfo) IsDir() bool        { return i.mode.IsDir() }
func (i fileInfo) Sys() any           { return nil }

// ---- inspection (the simulator's checkers and tests; no hook runs) ----

// Files lists every regular file's path under dir (recursively), sorted.
func (d *Disk) Files(dir string) []string {
	n, err := d.lookup(dir)
	if err != nil || !n.dir {
		return nil
	}
	var out []string
	walk(filepath.Clean(dir), n, func(path string, c *inode) {
		if !c.dir {
			out = append(out, path)
		}
	})
	return out
}

// Paths lists every file and directory under dir (dir excluded), sorted.
func (d *Disk) Paths(dir string) []string {
	n, err := d.lookup(dir)
	if err != nil || !n.dir {
		return nil
	}
	var out []string
	walk(filepath.Clean(dir), n, func(path string, _ *inode) { out = append(out, path) })
	return out
}

func walk(path string, n *inode, fn func(string, *inode)) {
	names := make([]string, 0, len(n.children))
	for c := range n.children {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		cp := filepath.Join(path, c)
		fn(cp, n.children[c])
		if n.children[c].dir {
			walk(cp, n.children[c], fn)
		}
	}
}

// Exists reports whether path names a file or directory.
func (d *Disk) Exists(path string) bool {
	_, err := d.lookup(path)
	return err == nil
}

// Durable reports whether path exists with its data synced and its name
// made durable by a SyncDir of its directory.
func (d *Disk) Durable(path string) bool {
	n, err := d.lookup(path)
	return err == nil && n.synced && n.named
}

// LoseUnsynced models a loss of what was not durable under dir: each file
// (sorted order) whose data was not synced or whose name was not synced
// since it got it is deleted when lose(path) says so. It returns the paths
// lost.
func (d *Disk) LoseUnsynced(dir string, lose func(path string) bool) []string {
	n, err := d.lookup(dir)
	if err != nil || !n.dir {
		return nil
	}
	type victim struct {
		parent *inode
		name   string
		path   string
	}
	var vs []victim
	var visit func(path string, n *inode)
	visit = func(path string, n *inode) {
		names := make([]string, 0, len(n.children))
		for c := range n.children {
			names = append(names, c)
		}
		sort.Strings(names)
		for _, c := range names {
			cn := n.children[c]
			cp := filepath.Join(path, c)
			if cn.dir {
				visit(cp, cn)
			} else if !cn.synced || !cn.named {
				vs = append(vs, victim{n, c, cp})
			}
		}
	}
	visit(filepath.Clean(dir), n)
	var lost []string
	for _, v := range vs {
		if lose(v.path) {
			v.parent.delChild(v.name)
			lost = append(lost, v.path)
		}
	}
	return lost
}

// Vanish deletes path behind every process's back (an operator, a tmp
// cleaner: the X-2 "file vanished" fault). It reports whether it existed.
func (d *Disk) Vanish(path string) bool {
	pn, base, err := d.parent(path)
	if err != nil {
		return false
	}
	n, ok := pn.children[base]
	if !ok {
		return false
	}
	pn.delChild(base)
	d.dirGone(n)
	return true
}

// ErrInjected is the I/O error a hook may return for an injected failure
// other than ENOSPC (errors.Is(err, ErrInjected)).
var ErrInjected = errors.New("simfs: injected I/O error")
