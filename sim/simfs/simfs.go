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
	// children of a directory, sorted by name (a directory holds a few
	// dozen names at most: a search of a short sorted list costs less
	// than hashing the name, and ReadDir needs no sort).
	children []link
	// lockedBy is the process holding its flock (nil: none).
	lockedBy *Proc
	// list caches a directory's sorted ReadDir answer until its children
	// change (CollectOrphans lists its directory at every collector pass).
	list []fs.DirEntry
	// stat is the last FileInfo handed out for it (see stat).
	stat *fileInfo
}

// link is a name in a directory and the inode it names.
type link struct {
	name string
	n    *inode
}

// find returns where name is, or belongs, in n's sorted children, and
// whether it is there.
func (n *inode) find(name string) (int, bool) {
	kids := n.children
	i, j := 0, len(kids)
	for i < j {
		h := int(uint(i+j) >> 1)
		// the first bytes decide most comparisons (entry ids are
		// random) without a call of the runtime's string compare
		k := kids[h].name
		var less bool
		if k != "" && name != "" && k[0] != name[0] {
			less = k[0] < name[0]
		} else {
			less = k < name
		}
		if less {
			i = h + 1
		} else {
			j = h
		}
	}
	return i, i < len(kids) && kids[i].name == name
}

// child returns the inode name names in directory n.
func (n *inode) child(name string) (*inode, bool) {
	if i, ok := n.find(name); ok {
		return n.children[i].n, true
	}
	return nil, false
}

// setChild names c name in directory n.
func (n *inode) setChild(name string, c *inode) {
	i, ok := n.find(name)
	if ok {
		n.children[i].n = c
	} else {
		n.children = slices.Insert(n.children, i, link{name: name, n: c})
	}
	n.list = nil
}

// delChild removes name from directory n.
func (n *inode) delChild(name string) {
	if i, ok := n.find(name); ok {
		n.children = slices.Delete(n.children, i, i+1)
	}
	n.list = nil
}

// Disk is one simulated host's disk. It is not safe for concurrent use:
// the simulator calls it from one goroutine.
type Disk struct {
	root     *inode // "/": rootNode
	rootNode inode
	now      func() int64
	// Hook, when set, is called before every operation (see the package doc).
	Hook func(p *Proc, op Op, path string) error
	// Ops counts the operations run (for the simulator's statistics).
	Ops int64
	// names counts the changes of names (NameVersion).
	names uint64
	// dirs caches the directories found by path (a path as looked up,
	// clean): every operation looks up its directory, so the cache saves
	// one search per element of the path. A cached entry is exact while
	// no directory is removed or renamed; both clear the cache. A disk
	// has a few directories: a scan of a short list costs less than
	// hashing the path (at most maxCachedDirs; past them lookups walk).
	dirs []dirPath
	// lastDir is the directory the cache gave last, lastPath its path:
	// most operations in a row work in one directory, so most lookups
	// find it here without a scan of dirs (cleared with dirs).
	lastPath string
	lastDir  *inode
	// The storage of the inodes, open files, processes, file data and
	// listings the disk hands out, and the spare lists of children of
	// the directories of before a Reset: a run of the simulator uses one
	// disk, and Reset lets the next run reuse all of it (issue #16).
	inodes  slab[inode]
	files   slab[file]
	procs   slab[Proc]
	locks   slab[lock]
	stats   slab[fileInfo]
	bytes   slab[byte]
	ents    slab[dirEntry]
	entries slab[fs.DirEntry]
	dirList []*inode // the directories made since NewDisk or Reset
	kids    [][]link // spare lists of children, cleared
}

// cachedDir returns the cached directory at the clean path.
func (d *Disk) cachedDir(path string) (*inode, bool) {
	if d.lastDir != nil && path == d.lastPath {
		return d.lastDir, true
	}
	for i := range d.dirs {
		if c := &d.dirs[i]; c.path == path {
			d.lastPath, d.lastDir = path, c.n
			return c.n, true
		}
	}
	return nil, false
}

// dirPath is an entry of Disk.dirs: a directory and its clean path.
type dirPath struct {
	path string
	n    *inode
}

// maxCachedDirs bounds Disk.dirs.
const maxCachedDirs = 32

// NameVersion is the version of d's names: every creation, removal or
// rename of a file or directory (by a process, Vanish, LoseUnsynced or
// Reset) bumps it, so while it is unchanged every path names what it
// named (or is missing as it was) when it was read. A file's data, mode,
// durability and locks are not names: changing them leaves it as it is.
func (d *Disk) NameVersion() uint64 { return d.names }

// NewDisk returns an empty disk (only "/") whose modification times are
// nowMs() Unix ms.
func NewDisk(nowMs func() int64) *Disk {
	d := &Disk{now: nowMs}
	d.bytes.block = 4096 // a few dozen entries' files
	d.Reset()
	return d
}

// Reset empties d, as NewDisk returns it (only "/"), keeping its storage
// for what it hands out next: every process, open file, lock and listing
// d handed out before is invalid from then on, and must no longer be used
// (the simulator resets a run's disk for its next run, when nothing of the
// finished run is left).
func (d *Disk) Reset() {
	for _, n := range d.dirList {
		if k := n.children; cap(k) <= maxSpareKids && len(d.kids) < maxSpareDirs {
			clear(k[:cap(k)])
			d.kids = append(d.kids, k[:0])
		}
	}
	clear(d.dirList)
	d.dirList = d.dirList[:0]
	d.inodes.reset()
	d.files.reset()
	d.procs.reset()
	d.locks.reset()
	d.stats.reset()
	d.bytes.reset()
	d.ents.reset()
	d.entries.reset()
	kids := d.rootNode.children
	clear(kids)
	d.rootNode = inode{dir: true, perm: 0o755, children: kids[:0], named: true, synced: true}
	d.root = &d.rootNode
	clear(d.dirs)
	d.dirs = d.dirs[:0]
	d.lastPath, d.lastDir = "", nil
	d.Hook, d.Ops = nil, 0
	d.names++
}

// Bounds of what Reset keeps of the directories' lists of children.
const (
	maxSpareKids = 256
	maxSpareDirs = 16
)

// slab hands out runs of T from blocks it keeps until reset; reset
// clears them for reuse (Disk.Reset). A run is never handed out twice
// between resets, so what holds one may keep it until then.
type slab[T any] struct {
	blocks [][]T
	cur    int // the block handing out now
	used   int // how much of blocks[cur] is handed out
	block  int // the block size in elements (0: slabBlock)
}

// slabBlock is a slab's block size in elements.
const slabBlock = 32

// take returns n zeroed elements, of capacity n (an append copies).
func (s *slab[T]) take(n int) []T {
	for s.cur < len(s.blocks) {
		if b := s.blocks[s.cur]; s.used+n <= len(b) {
			out := b[s.used : s.used+n : s.used+n]
			s.used += n
			return out
		}
		s.cur++
		s.used = 0
	}
	size := s.block
	if size == 0 {
		size = slabBlock
	}
	b := make([]T, max(size, n))
	s.blocks = append(s.blocks, b)
	s.cur, s.used = len(s.blocks)-1, n
	return b[:n:n]
}

// one returns one zeroed element.
func (s *slab[T]) one() *T { return &s.take(1)[0] }

// maxSlabBlocks bounds the blocks a reset keeps (a huge run's are dropped).
const maxSlabBlocks = 16

// reset clears what was handed out and makes it available again.
func (s *slab[T]) reset() {
	for i := 0; i < len(s.blocks) && i < s.cur; i++ {
		clear(s.blocks[i])
	}
	if s.cur < len(s.blocks) {
		clear(s.blocks[s.cur][:s.used]) // past used: never handed out
	}
	if len(s.blocks) > maxSlabBlocks {
		clear(s.blocks[maxSlabBlocks:])
		s.blocks = s.blocks[:maxSlabBlocks]
	}
	s.cur, s.used = 0, 0
}

// Proc returns a new process's view of the disk.
func (d *Disk) Proc(name string) *Proc {
	p := d.procs.one()
	*p = Proc{d: d, name: name}
	return p
}

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
		c, ok := pn.child(base)
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
			c, ok := pn.child(path[i+1:])
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
		if len(d.dirs) < maxCachedDirs {
			d.dirs = append(d.dirs, dirPath{path: path, n: n})
		}
	}
	return n, err
}

// dirGone clears the directory cache when n, a removed or renamed inode,
// is a directory.
func (d *Disk) dirGone(n *inode) {
	if n.dir {
		clear(d.dirs)
		d.dirs = d.dirs[:0]
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
		c, ok := n.child(part)
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
		c, ok := n.child(part)
		if !ok {
			c = p.d.newDir(perm)
			n.setChild(part, c)
			p.d.names++
		} else if !c.dir {
			return perr("mkdir", path, syscall.ENOTDIR)
		}
		n = c
	}
	return nil
}

func (d *Disk) newDir(perm fs.FileMode) *inode {
	n := d.inodes.one()
	var kids []link // a spare list of Reset's, or made at the first name
	if k := len(d.kids); k > 0 {
		kids, d.kids = d.kids[k-1], d.kids[:k-1]
	}
	*n = inode{dir: true, perm: perm.Perm() &^ Umask, children: kids, modMs: d.now(), synced: true}
	d.dirList = append(d.dirList, n)
	return n
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
	if _, ok := pn.child(base); ok {
		return perr("mkdir", path, syscall.EEXIST)
	}
	pn.setChild(base, p.d.newDir(perm))
	p.d.names++
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
	n, ok := pn.child(base)
	var f *file
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, perr("open", name, syscall.EEXIST)
	case !ok && flag&os.O_CREATE == 0:
		return nil, perr("open", name, syscall.ENOENT)
	case !ok:
		// from the disk's storage (every publish creates its temp file)
		n = p.d.inodes.one()
		*n = inode{perm: perm.Perm() &^ Umask, modMs: p.d.now(), synced: true}
		pn.setChild(base, n)
		p.d.names++
		pn.modMs = p.d.now()
	}
	write := flag&(os.O_WRONLY|os.O_RDWR) != 0
	if n.dir && write {
		return nil, perr("open", name, syscall.EISDIR)
	}
	if write && flag&os.O_TRUNC != 0 {
		n.data, n.synced, n.modMs = nil, false, p.d.now()
	}
	f = p.d.files.one()
	*f = file{p: p, n: n, name: name, write: write, read: flag&os.O_WRONLY == 0, append: flag&os.O_APPEND != 0}
	return f, nil
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
	n, ok := op.child(ob)
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.ENOENT}
	}
	np, nb, err := p.d.parent(newpath)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	if old, ok := np.child(nb); ok {
		if old == n {
			return nil
		}
		if old.dir || n.dir {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EISDIR}
		}
	}
	op.delChild(ob)
	np.setChild(nb, n)
	p.d.names++
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
	n, ok := pn.child(base)
	if !ok {
		return perr("remove", name, syscall.ENOENT)
	}
	if n.dir && len(n.children) > 0 {
		return perr("remove", name, syscall.ENOTEMPTY)
	}
	pn.delChild(base)
	p.d.names++
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

// ReadDir lists a directory, sorted by name. The listing comes from the
// disk's storage and stays valid until the disk's Reset (the next run),
// which hands its memory out again; shareddir reads a listing only within
// the call that made it.
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
		n.list = p.d.newDirList(n.children)
	}
	out := n.list[:len(n.list):len(n.list)] // shared: a caller's append copies
	return out, nil
}

// newDirList returns the listing of kids, sorted already, from the
// disk's storage (issue #16: CollectOrphans lists its directory at every
// collector pass): not nil, also when empty (the cached answer).
func (d *Disk) newDirList(kids []link) []fs.DirEntry {
	if len(kids) == 0 {
		return []fs.DirEntry{}
	}
	ents, list := d.ents.take(len(kids)), d.entries.take(len(kids))
	for i, k := range kids {
		ents[i] = dirEntry{name: k.name, n: k.n}
		list[i] = &ents[i]
	}
	return list
}

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
	return n.statAs(p.d, filepath.Base(name), nil), nil
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
		c.n.named = true
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
	l := d.locks.one()
	*l = lock{p: p, n: n}
	return l, nil
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
		f.n.data = f.p.d.grow(f.n.data, end)
	}
	copy(f.n.data[f.off:], b)
	f.off += len(b)
	f.n.synced = false
	f.n.modMs = f.p.d.now()
	return len(b), nil
}

// grow returns data extended with zeros to length end (> len(data)), in
// the disk's storage when it must move (the data of a file is only ever
// copied out: ReadFile and Read copy it).
func (d *Disk) grow(data []byte, end int) []byte {
	if end <= cap(data) {
		old := len(data)
		data = data[:end]
		clear(data[old:])
		return data
	}
	nd := d.bytes.take(end)
	copy(nd, data)
	return nd
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
	fi := f.n.statAs(f.p.d, filepath.Base(f.name), spare)
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
// entry at every collector pass), else a new one from d. A fileInfo is never
// changed once handed out, so each is the snapshot of its call, as with
// os.Lstat.
func (n *inode) statAs(d *Disk, name string, spare *fileInfo) *fileInfo {
	fi := info(name, n)
	if n.stat != nil && *n.stat == fi {
		return n.stat
	}
	// A copy in d's storage only on a miss (in spare, when given:
	// storage the caller allocated already): taking fi's address would
	// move every call's fi to the heap, the hits' too.
	if spare == nil {
		spare = d.stats.one()
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
	for _, c := range slices.Clone(n.children) { // sorted
		cp := filepath.Join(path, c.name)
		fn(cp, c.n)
		if c.n.dir {
			walk(cp, c.n, fn)
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
		for _, k := range n.children { // sorted; visit changes none
			cn, c := k.n, k.name
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
			d.names++
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
	n, ok := pn.child(base)
	if !ok {
		return false
	}
	pn.delChild(base)
	d.names++
	d.dirGone(n)
	return true
}

// ErrInjected is the I/O error a hook may return for an injected failure
// other than ENOSPC (errors.Is(err, ErrInjected)).
var ErrInjected = errors.New("simfs: injected I/O error")
