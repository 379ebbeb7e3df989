package simfs

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/baton-dev/baton/engine/cache/shareddir"
)

const (
	root  = "/var/cache/baton"
	inst  = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
	inst2 = "1f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
)

// rng is a deterministic io.Reader for shareddir's suffixes and keys.
type rng struct{ r *rand.Rand }

func (g rng) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return len(b), nil
}

func newRand(seed uint64) rng { return rng{rand.New(rand.NewPCG(seed, 1))} }

func newDisk() (*Disk, *int64) {
	now := new(int64)
	*now = 1_000_000
	return NewDisk(func() int64 { return *now }), now
}

var tensors = []shareddir.Tensor{shareddir.F32Tensor("x", 1, 2, []float32{1, 2})}

func entryID(i int) string { return strings.Repeat("0", 31) + string(rune('a'+i)) }

func TestErrorsAndBasics(t *testing.T) {
	d, _ := newDisk()
	p := d.Proc("p")
	if _, err := p.Lstat("/nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Lstat missing = %v, want ErrNotExist", err)
	}
	if err := p.MkdirAll("/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.Mkdir("/a/b", 0o755); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Mkdir existing = %v, want ErrExist", err)
	}
	f, err := p.OpenFile("/a/b/f", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := p.OpenFile("/a/b/f", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666); !errors.Is(err, fs.ErrExist) {
		t.Errorf("O_EXCL on existing = %v, want ErrExist", err)
	}
	if info, err := p.Lstat("/a/b/f"); err != nil || info.Mode().Perm() != 0o644 || info.Size() != 5 || !info.Mode().IsRegular() {
		t.Errorf("Lstat = %v %v, want a 0644 regular file of 5 bytes (umask 022)", info, err)
	}
	if err := p.Remove("/a/b"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Errorf("Remove non-empty dir = %v", err)
	}
	for _, n := range []string{"z", "m", "c"} {
		g, err := p.OpenFile("/a/b/"+n, os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		g.Close()
	}
	des, err := p.ReadDir("/a/b")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	if !slices.Equal(names, []string{"c", "f", "m", "z"}) {
		t.Errorf("ReadDir = %v, want sorted", names)
	}
	if err := p.Remove("/a/b/f"); err != nil {
		t.Fatal(err)
	}
	must(t, p.Rename("/a/b/z", "/a/b/a"))
	des, err = p.ReadDir("/a/b") // the cached listing is redone after changes
	must(t, err)
	names = names[:0]
	for _, de := range des {
		names = append(names, de.Name())
	}
	if !slices.Equal(names, []string{"a", "c", "m"}) {
		t.Errorf("ReadDir after a remove and a rename = %v", names)
	}
	if err := p.Remove("/a/b/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("second Remove = %v, want ErrNotExist", err)
	}
}

// TestRenameOneWinner: of two renames of one source, exactly one succeeds
// and the other gets ErrNotExist; an open descriptor still reads the file.
func TestRenameOneWinner(t *testing.T) {
	d, _ := newDisk()
	a, b := d.Proc("a"), d.Proc("b")
	must(t, a.MkdirAll("/d", 0o700))
	f, err := a.OpenFile("/d/e", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	must(t, err)
	f.Write([]byte("data"))
	f.Close()
	r, err := b.OpenFile("/d/e", os.O_RDONLY, 0)
	must(t, err)
	errA := a.Rename("/d/e", "/d/a")
	errB := b.Rename("/d/e", "/d/b")
	if errA != nil || !errors.Is(errB, fs.ErrNotExist) {
		t.Errorf("renames = %v, %v; want one winner and ENOENT", errA, errB)
	}
	must(t, a.Remove("/d/a"))
	buf := make([]byte, 8)
	if n, _ := r.Read(buf); string(buf[:n]) != "data" {
		t.Errorf("read after rename and remove = %q", buf[:n])
	}
}

func TestRoundTripAndSingleUse(t *testing.T) {
	d, _ := newDisk()
	prod, c1, c2 := d.Proc("E"), d.Proc("PD0"), d.Proc("PD1")
	r := newRand(1)
	dir, err := shareddir.OpenProducer(prod, root, inst, r)
	must(t, err)
	key, err := shareddir.LoadProducerKey(c1, root, inst)
	if err != nil || !slices.Equal(key, dir.Key()) {
		t.Fatalf("LoadProducerKey = %x, %v", key, err)
	}
	id := entryID(0)
	if _, err := dir.Write(id, tensors, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	if !d.Durable(filepath.Join(root, inst, id+".safetensors")) {
		t.Error("a written entry is not durable")
	}
	got, meta, err := shareddir.Claim(c1, root, inst, id, r, 1<<20)
	if err != nil || len(got) != 1 || meta["k"] != "v" {
		t.Fatalf("Claim = %v %v %v", got, meta, err)
	}
	if _, _, err := shareddir.Claim(c2, root, inst, id, r, 1<<20); !errors.Is(err, shareddir.ErrGone) {
		t.Errorf("second Claim = %v, want ErrGone", err)
	}
	if removed, err := dir.Remove(id); removed || err != nil {
		t.Errorf("Remove after the claim = %v, %v; want false, nil", removed, err)
	}
	// Release wins over a later claim.
	id2 := entryID(1)
	_, err = dir.Write(id2, tensors, nil)
	must(t, err)
	if removed, err := dir.Remove(id2); !removed || err != nil {
		t.Errorf("Remove = %v, %v", removed, err)
	}
	if _, _, err := shareddir.Claim(c1, root, inst, id2, r, 1<<20); !errors.Is(err, shareddir.ErrGone) {
		t.Errorf("Claim after Remove = %v, want ErrGone", err)
	}
	must(t, dir.Close(true))
	if fs := d.Paths(root); len(fs) != 0 {
		t.Errorf("after Close(true): %v", fs)
	}
	if _, _, err := shareddir.Claim(c1, root, inst, id2, r, 1<<20); !errors.Is(err, shareddir.ErrUnknownProducer) {
		t.Errorf("Claim after Close = %v, want ErrUnknownProducer", err)
	}
}

// TestInterleavedClaims: the hook lands a second consumer's whole Claim, or
// the producer's Remove, between a Claim's open and its rename: exactly one
// wins, the loser learns it (ErrGone, removed=false).
func TestInterleavedClaims(t *testing.T) {
	for _, other := range []string{"claim", "remove"} {
		t.Run(other, func(t *testing.T) {
			d, _ := newDisk()
			prod, c1, c2 := d.Proc("E"), d.Proc("PD0"), d.Proc("PD1")
			r := newRand(2)
			dir, err := shareddir.OpenProducer(prod, root, inst, r)
			must(t, err)
			id := entryID(0)
			_, err = dir.Write(id, tensors, nil)
			must(t, err)
			entry := filepath.Join(root, inst, id+".safetensors")
			var otherErr error
			otherWon := false
			d.Hook = func(p *Proc, op Op, path string) error {
				if p != c1 || op != OpRename || path != entry {
					return nil
				}
				d.Hook = nil
				if other == "claim" {
					_, _, otherErr = shareddir.Claim(c2, root, inst, id, r, 1<<20)
					otherWon = otherErr == nil
				} else {
					otherWon, otherErr = dir.Remove(id)
				}
				return nil
			}
			_, _, err = shareddir.Claim(c1, root, inst, id, r, 1<<20)
			if otherErr != nil || !otherWon || !errors.Is(err, shareddir.ErrGone) {
				t.Errorf("interleaved %s won %v (%v); first Claim = %v, want ErrGone", other, otherWon, otherErr, err)
			}
			if files := d.Files(filepath.Join(root, inst)); len(files) != 2 { // hmac.key, lock
				t.Errorf("left: %v", files)
			}
		})
	}
}

// TestPlantedClaimBug: with ClaimBugCopy planted, two Claims of one entry
// both succeed (the bug the simulator must find); restored, one wins.
func TestPlantedClaimBug(t *testing.T) {
	d, _ := newDisk()
	r := newRand(3)
	dir, err := shareddir.OpenProducer(d.Proc("E"), root, inst, r)
	must(t, err)
	id := entryID(0)
	_, err = dir.Write(id, tensors, nil)
	must(t, err)
	restore := shareddir.PlantClaimBugForTest(shareddir.ClaimBugCopy)
	_, _, err1 := shareddir.Claim(d.Proc("PD0"), root, inst, id, r, 1<<20)
	_, _, err2 := shareddir.Claim(d.Proc("PD1"), root, inst, id, r, 1<<20)
	restore()
	if err1 != nil || err2 != nil {
		t.Errorf("with the planted bug: %v, %v; want both to succeed", err1, err2)
	}
	_, _, err1 = shareddir.Claim(d.Proc("PD0"), root, inst, id, r, 1<<20)
	_, _, err2 = shareddir.Claim(d.Proc("PD1"), root, inst, id, r, 1<<20)
	if err1 != nil || !errors.Is(err2, shareddir.ErrGone) {
		t.Errorf("restored: %v, %v; want one winner", err1, err2)
	}
}

// TestLocksAndSweep: a live producer's lock is held; a crashed one's is
// free, so another producer's sweep removes its directory, never a live one's.
func TestLocksAndSweep(t *testing.T) {
	d, now := newDisk()
	r := newRand(4)
	p1, p2 := d.Proc("E1"), d.Proc("E2")
	dir1, err := shareddir.OpenProducer(p1, root, inst, r)
	must(t, err)
	_, err = dir1.Write(entryID(0), tensors, nil)
	must(t, err)
	if _, err := p2.TryLock(filepath.Join(root, inst, "lock"), false, 0); !errors.Is(err, shareddir.ErrLocked) {
		t.Errorf("TryLock of a live producer's lock = %v, want ErrLocked", err)
	}
	dir2, err := shareddir.OpenProducer(p2, root, inst2, r)
	must(t, err)
	if n, err := dir2.SweepDeadInstances(*now); n != 0 || err != nil {
		t.Errorf("sweep with a live neighbour = %d, %v", n, err)
	}
	p1.Crash()
	*now += shareddir.SweepIntervalMs
	if n, err := dir2.SweepDeadInstances(*now); n != 1 || err != nil {
		t.Errorf("sweep after the crash = %d, %v; want 1", n, err)
	}
	if d.Exists(filepath.Join(root, inst)) {
		t.Error("the crashed instance's directory survived the sweep")
	}
	if _, err := dir1.Write(entryID(1), tensors, nil); err == nil {
		t.Error("a crashed process wrote")
	}
}

// TestFaults: ENOSPC on the write leaves nothing; a crash before the fsync
// leaves an unsynced temp file that LoseUnsynced may lose, never a durable
// entry; CollectOrphans takes an old leftover.
func TestFaults(t *testing.T) {
	d, now := newDisk()
	r := newRand(5)
	p := d.Proc("E")
	dir, err := shareddir.OpenProducer(p, root, inst, r)
	must(t, err)
	d.Hook = func(_ *Proc, op Op, _ string) error {
		if op == OpWrite {
			return syscall.ENOSPC
		}
		return nil
	}
	if _, err := dir.Write(entryID(0), tensors, nil); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Write with ENOSPC = %v", err)
	}
	d.Hook = nil
	if files := d.Files(filepath.Join(root, inst)); len(files) != 2 {
		t.Errorf("ENOSPC left %v", files)
	}
	_, err = dir.Write(entryID(1), tensors, nil)
	must(t, err)
	type crash struct{}
	d.Hook = func(_ *Proc, op Op, _ string) error {
		if op == OpSync {
			p.Crash()
			panic(crash{})
		}
		return nil
	}
	func() {
		defer func() {
			if _, ok := recover().(crash); !ok {
				t.Error("no crash")
			}
		}()
		dir.Write(entryID(2), tensors, nil)
	}()
	d.Hook = nil
	var tmp string
	for _, f := range d.Files(root) {
		if strings.Contains(f, "/.tmp-"+entryID(2)) {
			tmp = f
		}
	}
	if tmp == "" || d.Durable(tmp) {
		t.Fatalf("no unsynced temp file after the crash: %v", d.Files(root))
	}
	lost := d.LoseUnsynced(root, func(string) bool { return true })
	if !slices.Equal(lost, []string{tmp}) {
		t.Errorf("lost %v, want only %s", lost, tmp)
	}
	// An orphan of a consumer that crashed after its rename, before its
	// read: the live producer's CollectOrphans takes it once it is old.
	dir2, err := shareddir.OpenProducer(d.Proc("E2"), root, inst2, r)
	must(t, err)
	_, err = dir2.Write(entryID(3), tensors, nil)
	must(t, err)
	c := d.Proc("PD0")
	d.Hook = func(p *Proc, op Op, path string) error {
		if p == c && op == OpRead {
			c.Crash()
			panic(crash{})
		}
		return nil
	}
	func() {
		defer func() { recover() }()
		shareddir.Claim(c, root, inst2, entryID(3), r, 1<<20)
	}()
	d.Hook = nil
	if d.Exists(filepath.Join(root, inst2, entryID(3)+".safetensors")) {
		t.Fatal("the claim did not rename")
	}
	if n, err := dir2.CollectOrphans(60_000, *now); n != 0 || err != nil {
		t.Errorf("CollectOrphans of a young orphan = %d, %v", n, err)
	}
	*now += 60_000
	if n, err := dir2.CollectOrphans(60_000, *now); n != 1 || err != nil {
		t.Errorf("CollectOrphans = %d, %v; want 1", n, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestClean(t *testing.T) {
	for _, p := range []string{"/", "/a", "/a/b", "/a/.tmp-x", "a/b", "/a//b", "/a/./b", "/a/../b", "/a/", "//", "/.", "/a/b/..", ""} {
		if got, want := clean(p), filepath.Clean(p); got != want {
			t.Errorf("clean(%q) = %q, want %q", p, got, want)
		}
	}
}

// TestCleanIsFilepathClean: clean agrees with filepath.Clean.
func TestCleanIsFilepathClean(t *testing.T) {
	parts := []string{"/", "a", "b", ".", "..", ".x", "x.", "...", "//", "/."}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100000; i++ {
		p := ""
		for k := r.IntN(8); k > 0; k-- {
			p += parts[r.IntN(len(parts))]
		}
		if got, want := clean(p), filepath.Clean(p); got != want {
			t.Fatalf("clean(%q) = %q, want %q", p, got, want)
		}
	}
}

// TestDirCacheFollowsRenameAndRemove: the directory cache never answers for
// a directory that was renamed, removed or vanished: lookups through the
// old path fail and the new path (or a new directory there) is found.
func TestDirCacheFollowsRenameAndRemove(t *testing.T) {
	d, _ := newDisk()
	p := d.Proc("p")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	create := func(name string) {
		t.Helper()
		f, err := p.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		must(err)
		must(f.Close())
	}
	must(p.MkdirAll("/a/b", 0o700))
	create("/a/b/f")
	if _, err := p.Lstat("/a/b/f"); err != nil { // caches /a/b
		t.Fatal(err)
	}
	must(p.Rename("/a/b", "/a/c"))
	if _, err := p.Lstat("/a/b/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Lstat through a renamed directory: %v, want ENOENT", err)
	}
	if _, err := p.Lstat("/a/c/f"); err != nil {
		t.Fatalf("Lstat in the renamed directory: %v", err)
	}
	must(p.Remove("/a/c/f"))
	must(p.Remove("/a/c"))
	if _, err := p.OpenFile("/a/c/g", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("create in a removed directory: %v, want ENOENT", err)
	}
	must(p.Mkdir("/a/c", 0o700))
	create("/a/c/g")
	if !d.Exists("/a/c/g") || d.Exists("/a/c/f") {
		t.Fatalf("new directory /a/c: %v", d.Paths("/a"))
	}
	if !d.Vanish("/a/c/g") || !d.Vanish("/a/c") {
		t.Fatal("Vanish")
	}
	if _, err := p.Lstat("/a/c/g"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Lstat in a vanished directory: %v, want ENOENT", err)
	}
	if err := p.Mkdir("/a/c/x", 0o700); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("mkdir in a vanished directory: %v, want ENOENT", err)
	}
}

// TestLstatIsASnapshot: a FileInfo describes the file as it was at its
// call, also when Lstat hands out a reused one for an unchanged file.
func TestLstatIsASnapshot(t *testing.T) {
	d, now := newDisk()
	p := d.Proc("p")
	if err := p.MkdirAll("/a", 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := p.OpenFile("/a/f", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	before, err := p.Lstat("/a/f")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := p.Lstat("/a/f"); again.Size() != 0 || again.Mode() != before.Mode() || again.Name() != "f" {
		t.Fatalf("unchanged file: %v %v %q", again.Size(), again.Mode(), again.Name())
	}
	*now += 5
	if _, err := f.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := p.Chmod("/a/f", 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Rename("/a/f", "/a/g"); err != nil {
		t.Fatal(err)
	}
	after, err := p.Lstat("/a/g")
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() != 3 || after.Mode().Perm() != 0o644 || after.Name() != "g" || after.ModTime().UnixMilli() != *now {
		t.Fatalf("after write, chmod, rename: size %d mode %v name %q mod %v", after.Size(), after.Mode(), after.Name(), after.ModTime())
	}
	if before.Size() != 0 || before.Mode().Perm() != 0o600 || before.Name() != "f" || before.ModTime().UnixMilli() != *now-5 {
		t.Fatalf("the earlier FileInfo changed: size %d mode %v name %q", before.Size(), before.Mode(), before.Name())
	}
	if st, err := f.Stat(); err != nil || st.Size() != 3 {
		t.Fatalf("Stat of the open file: %v, %v", st, err)
	}
}

// TestExistsIsLstat: Exists answers what Lstat implies (shareddir.ExistsFS)
// and runs the same hook, for a file, a directory, a missing name, a path
// through a file (ENOTDIR), an injected error and a crashed process.
func TestExistsIsLstat(t *testing.T) {
	d, _ := newDisk()
	p := d.Proc("p")
	if err := p.MkdirAll("/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := p.OpenFile("/a/b/f", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	check := func(p *Proc, name string) {
		t.Helper()
		ops := d.Ops
		ok, err := p.Exists(name)
		existsOps := d.Ops - ops
		ops = d.Ops
		_, lerr := p.Lstat(name)
		lstatOps := d.Ops - ops
		var want bool
		var wantErr error
		switch {
		case lerr == nil:
			want = true
		case errors.Is(lerr, fs.ErrNotExist):
		default:
			wantErr = lerr
		}
		if ok != want || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("Exists(%q) = %v, %v; Lstat says %v, %v", name, ok, err, want, wantErr)
		}
		if existsOps != lstatOps {
			t.Errorf("Exists(%q) counted %d operations, Lstat %d", name, existsOps, lstatOps)
		}
	}
	for _, name := range []string{"/a/b/f", "/a/b", "/", "/a/b/g", "/x/y", "/a/b/f/g", "a/b/f", "/a/./b/../b/f"} {
		check(p, name)
	}
	d.Hook = func(_ *Proc, op Op, path string) error {
		if op == OpLstat && strings.HasSuffix(path, "eio") {
			return syscall.EIO
		}
		if op == OpLstat && strings.HasSuffix(path, "enoent") {
			return syscall.ENOENT
		}
		return nil
	}
	check(p, "/a/b/eio")
	check(p, "/a/b/enoent")
	d.Hook = nil
	p.Crash()
	check(p, "/a/b/f")
}

// TestStatSnapshots: a FileInfo from a handle's Stat describes the file as
// it was then, after the handle writes and stats again.
func TestStatSnapshots(t *testing.T) {
	d, _ := newDisk()
	p := d.Proc("p")
	f, err := p.OpenFile("/f", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	var infos []fs.FileInfo
	for i := 0; i < 3; i++ {
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, fi)
		if _, err := f.Write([]byte("ab")); err != nil {
			t.Fatal(err)
		}
	}
	for i, fi := range infos {
		if fi.Size() != int64(2*i) || fi.Name() != "f" {
			t.Errorf("Stat %d = %s %d bytes, want f %d", i, fi.Name(), fi.Size(), 2*i)
		}
	}
}
