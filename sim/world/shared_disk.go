package world

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/simfs"
)

// The shared-directory backend under simulation (issue #16): the REAL
// engine/cache/shareddir code over a simulated disk (package simfs). The
// producer E starts with shareddir.StartProducer (OpenProducer, then the
// sweep of dead instances), writes each entry with Dir.Write, releases and
// expires with Dir.Remove, looks for claims with Dir.Exists, collects with
// Dir.Collect (CollectOrphans, then SweepDeadInstances) and closes with
// Dir.Close(true) (S-4): the same shareddir calls the engine's
// shared-directory store makes. A consumer claims with shareddir.Claim. Each
// process works through its own simfs.Proc, so a crash frees its flock.
//
// What stays modelled: the producer table's decisions (engine/handoff's
// ProducerTable decides; this world, like the engine, carries them out), the timing of a slow fsync (the write
// runs when the fsync returns; a crash before then runs the write up to
// its fsync and kills it there), the vanishing of a file (simfs.Disk.Vanish
// behind every process's back), and which faults fire (drawn from the
// fault stream; simfs injects them into the real calls: ENOSPC on the
// entry's write, EIO on a release's rename).
//
// Also modelled: the time a Claim takes (one call; the consumer answers
// 0..3 ms later, evClaimRead), the engine's consumer-side key cache and
// reference tag (reference.go keeps its own key, not hmac.key), and a
// machine crash (simfs.Disk.LoseUnsynced is applied to the crashed
// producer's temp files only, as the model did).
//
// Interleaving: a Claim is one call, but between its open and its rename
// (simfs hook; drawn from this backend's own stream) another process's
// pending operation on the same entry may land first: E's removal, pending
// in the queue, runs the real Dir.Remove there and the removal's event
// later reports what that Remove returned; or another consumer's consume
// due within claimWindowMs is delivered there, so its whole Claim runs
// inside this one. Exactly one of them may win (SU-1). A consumer may also
// die inside its Claim after the rename won (the claimed file is an
// orphan), and E inside a Write's fsync.

// CacheRoot is the shared root directory on the simulated host.
const CacheRoot = "/var/cache/baton"

// subSharedDisk is the stream of shareddir's randomness (keys, temp and
// claimed name suffixes) and of the backend's interleaving draws.
const subSharedDisk subsystem = 0x165667b19e3779f9

// sharedDisk is the simulated host's disk and its processes' views.
type sharedDisk struct {
	w    *World
	Disk *simfs.Disk
	Rng  *rand.Rand // the shared disk's stream (crashes inside a Claim)
	rand rngReader
	// Prod is E's current process and Dir its instance (nil: transfer backend).
	Prod *simfs.Proc
	Dir  *shareddir.Dir
	// Cons is each consumer's current process.
	Cons []*simfs.Proc
	// Slow lists the entries whose slow write is in flight (sim/nodes/fsync.go).
	Slow map[string]bool
	// rngCell holds rng.
	rngCell rngCell
	// early holds the removals that landed inside a consumer's Claim,
	// by entry: whether the Remove took the entry.
	early map[string]bool
	// inj is the fault to inject into the next matching operation.
	inj injection
	// interleave: a pending removal may land inside a Claim (off in the
	// hand-driven worlds of Scenario and Driver, whose scripts order
	// every step themselves).
	interleave bool
	// cl is the Claim running now (for the interleaving).
	cl claiming
	// tensor is entryTensors' scratch.
	tensor entryTensor
	// look is observeClaims' last look that found every entry present.
	look claimsLook
}

// claimsLook is a look of sim/nodes' observeClaims at E's Published list
// that found every entry's file present: the list of E's table at version
// ver, looked at through process prod and instance dir while the disk's
// names were at version names.
type claimsLook struct {
	ok         bool
	ver, names uint64
	prod       *simfs.Proc
	dir        *shareddir.Dir
}

// LookUnchanged reports whether observeClaims may skip its Dir.Exists
// calls for ids, E's Published list at table version ver, because they
// would answer what they answered last time: every one present, with no
// effect but counting n operations. It then counts those operations
// (Disk.Ops, the run's statistics) as the calls would have.
//
// Why the skip changes nothing: the last look (LookedAllPresent) found
// every id of the same list (same table version, same instance) present
// through the same process and Dir. Dir.Exists(id) is ValidateEntryID
// (pure: it passed), the Dir's closed check (only Stop closes it, and
// Stop forgets the look), its path (the Dir's cache of paths, changed
// only when an entry is missing), then Proc.Exists: its dead check (the
// process is alive, checked here), Ops++ (counted here), the hook with
// OpLstat (it acts only on an injection, which is set and cleared around
// one call of another op, and on a Claim's rename or remove: for OpLstat
// it returns nil and changes nothing), and a lookup of the path, whose
// answer depends only on the disk's names, unchanged while NameVersion
// is (its directory cache changes no answer).
func (sd *sharedDisk) LookUnchanged(ver uint64, ids []string) bool {
	l := &sd.look
	if !l.ok || l.ver != ver || l.prod != sd.Prod || l.dir != sd.Dir || sd.Prod.Dead() ||
		l.names != sd.Disk.NameVersion() {
		return false
	}
	sd.Disk.Ops += int64(len(ids))
	return true
}

// LookedAllPresent notes that observeClaims' Dir.Exists calls found every
// entry of E's Published list at table version ver present.
func (sd *sharedDisk) LookedAllPresent(ver uint64) {
	sd.look = claimsLook{ok: true, ver: ver, names: sd.Disk.NameVersion(), prod: sd.Prod, dir: sd.Dir}
}

// injection fails the next operation op of process proc with err, or, with
// crash, kills proc there (a panic of processCrash the caller recovers).
type injection struct {
	proc  *simfs.Proc
	op    simfs.Op
	err   error
	crash bool
}

// claiming is a Claim in progress: consumer cons (-1: E) claiming entry id
// of producer instance through proc.
type claiming struct {
	proc     *simfs.Proc
	instance string
	id       string
	cons     int
}

// isEntry reports whether path is the claimed entry's file,
// EntryPath(cl.instance, cl.id), without building that path (every Claim
// would; the hook asks at each rename and remove).
func (cl *claiming) isEntry(path string) bool {
	if !isPlainElement(cl.instance) || !isPlainElement(cl.id) {
		return path == EntryPath(cl.instance, cl.id)
	}
	rest, ok := strings.CutPrefix(path, CacheRoot+"/")
	if !ok {
		return false
	}
	if rest, ok = strings.CutPrefix(rest, cl.instance); !ok {
		return false
	}
	if rest, ok = strings.CutPrefix(rest, "/"); !ok {
		return false
	}
	id, ok := strings.CutSuffix(rest, ".safetensors")
	return ok && id == cl.id
}

// isPlainElement reports whether filepath.Join keeps s as one element
// unchanged: not empty, ".", "..", and without a separator.
func isPlainElement(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsRune(s, '/')
}

// processCrash is the panic that kills a simulated process inside an FS call.
type processCrash struct{}

// rngReader is an io.Reader over a PCG stream (shareddir's randomness).
type rngReader struct{ r *rand.Rand }

func (g rngReader) Read(b []byte) (int, error) {
	for i := 0; i < len(b); i += 8 {
		v := g.r.Uint64()
		for j := i; j < i+8 && j < len(b); j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
	return len(b), nil
}

// newSharedDisk returns w's shared disk, reusing pool's (bufs.disk) when
// it was w's too, else a new one it leaves in pool for w's next run.
func newSharedDisk(w *World, pool *pooledDisk) *sharedDisk {
	if pool == nil {
		pool = new(pooledDisk)
	}
	if pool.sd == nil || pool.world != w { // w is Run's pooled World when pool's is
		*pool = pooledDisk{world: w, sd: &sharedDisk{Slow: map[string]bool{}}}
		pool.now = func() int64 { return w.Now }
		pool.hook = pool.sd.hook
		pool.disk = simfs.NewDisk(pool.now)
	} else {
		pool.disk.Reset() // nothing of the last run is left to use it
	}
	sd := pool.sd
	// zeroed by releaseBufs but for Slow and Cons (cleared); early: made at its first entry
	*sd = sharedDisk{w: w, Slow: sd.Slow, Cons: sd.Cons[:0], interleave: true}
	sd.Rng = sd.rngCell.seed(w.seed, subSharedDisk)
	sd.rand = rngReader{sd.Rng}
	sd.Disk = pool.disk
	sd.Disk.Hook = pool.hook
	return sd
}

// pooledDisk is a shared disk Run keeps for the next run of its World, and
// its disk's clock and hook, which are bound to that World and disk
// (issue #16: the disk, its map and the two closures were 4 allocs a run),
// and the disk itself, which the next run Resets: its inodes, files,
// listings and file data are then the next run's, without allocating.
type pooledDisk struct {
	world *World
	sd    *sharedDisk
	now   func() int64
	hook  func(*simfs.Proc, simfs.Op, string) error
	disk  *simfs.Disk
}

// release clears sd for pool, or drops it when its maps grew large.
func (pool *pooledDisk) release(sd *sharedDisk) {
	if sd != pool.sd || len(sd.Slow) > maxPooledMap {
		*pool = pooledDisk{}
		return
	}
	clear(sd.Slow)
	clear(sd.Cons[:cap(sd.Cons)])
	*sd = sharedDisk{Slow: sd.Slow, Cons: sd.Cons[:0]}
}

// active reports whether the run uses the shared-directory backend.
func (sd *sharedDisk) active() bool { return sd.w.Set.Backend == BackendSharedDir }

// hook is the disk's hook: injected faults, and the interleaving of a
// pending removal inside a Claim.
func (sd *sharedDisk) hook(p *simfs.Proc, op simfs.Op, path string) error {
	if op == sd.inj.op && p == sd.inj.proc {
		inj := sd.inj
		sd.inj = injection{}
		if inj.crash {
			p.Crash()
			panic(processCrash{})
		}
		return inj.err
	}
	// Between the Claim's open and its next change to the entry's name
	// (its rename; a broken Claim's remove).
	if (op == simfs.OpRename || op == simfs.OpRemove) && p == sd.cl.proc && sd.cl.isEntry(path) && sd.interleave {
		cl := sd.cl
		sd.cl = claiming{}
		sd.w.insideClaim(cl)
	}
	return nil
}

// EntryPath is where instance published entry id.
func EntryPath(instance, id string) string {
	return filepath.Join(CacheRoot, instance, id+".safetensors")
}

// published reports whether rec's entry file is in place (the world's look,
// not a process's: no hook, no fault).
func (sd *sharedDisk) published(rec *EntryRecord) bool {
	return sd.Disk.Exists(EntryPath(rec.Instance, rec.Id))
}

// openProducer starts E's instance p with shareddir.StartProducer (the
// engine's producer start too): OpenProducer, then the sweep of dead
// instances, noting what the sweep removed.
func (sd *sharedDisk) openProducer(p *producerNode) {
	if !sd.active() {
		return
	}
	var before []string // what the sweep may remove, listed only for the trace
	if sd.w.Tracing {
		before = sd.Disk.Files(CacheRoot)
	}
	sd.Prod = sd.Disk.Proc(sd.w.Concat("E/", p.InstanceID)) // in the run's text
	dir, swept, err := shareddir.StartProducer(sd.Prod, CacheRoot, p.InstanceID, sd.rand, sd.w.Now, false)
	if err != nil {
		panic(fmt.Sprintf("sim: StartProducer: %v", err))
	}
	if swept.Err != nil {
		panic(fmt.Sprintf("sim: SweepDeadInstances: %v", swept.Err))
	}
	sd.Dir = dir
	if sd.w.Tracing {
		for _, f := range before {
			if !sd.Disk.Exists(f) {
				sd.w.Notef("sweep removed %s", sd.short(f))
			}
		}
	}
}

// short is path relative to the root, with instance ids abbreviated.
func (sd *sharedDisk) short(path string) string {
	rel, _ := filepath.Rel(CacheRoot, path)
	inst, rest, _ := strings.Cut(rel, "/")
	return Short(inst) + "/" + rest
}

// entryTensors is the content written for an entry of client h: its
// client index, checked at the claim. It is shareddir.F32Tensor("e", 1, 1,
// []float32{float32(h)}) built in sd's scratch (no allocation per
// publish): valid until the next call, and Dir.Write encodes it before any
// file-system call, so before any hook could publish again.
func (sd *sharedDisk) entryTensors(h int) []shareddir.Tensor {
	t := &sd.tensor
	binary.LittleEndian.PutUint32(t.data[:], math.Float32bits(float32(h)))
	t.shape = [2]int{1, 1}
	t.list[0] = shareddir.Tensor{Name: "e", DType: "F32", Shape: t.shape[:], Data: t.data[:]}
	return t.list[:]
}

// entryTensor is entryTensors' scratch.
type entryTensor struct {
	list  [1]shareddir.Tensor
	shape [2]int
	data  [4]byte
}

// Publish writes rec's entry with Dir.Write (no fault: the faults are
// decided before).
func (sd *sharedDisk) Publish(rec *EntryRecord) {
	if _, err := sd.Dir.Write(rec.Id, sd.entryTensors(rec.H), nil); err != nil {
		panic(fmt.Sprintf("sim: Write of %s: %v", rec.Id, err))
	}
}

// WriteENOSPC runs rec's Dir.Write with ENOSPC injected into its write:
// it must fail with ENOSPC and leave nothing (L-5).
func (sd *sharedDisk) WriteENOSPC(rec *EntryRecord) {
	sd.inj = injection{proc: sd.Prod, op: simfs.OpWrite, err: syscall.ENOSPC}
	_, err := sd.Dir.Write(rec.Id, sd.entryTensors(rec.H), nil)
	sd.inj = injection{}
	if !errors.Is(err, syscall.ENOSPC) {
		panic(fmt.Sprintf("sim: Write of %s with ENOSPC: %v", rec.Id, err))
	}
	if sd.published(rec) {
		sd.w.Failf(Correctness, "L-5", "a Write that failed with ENOSPC published %s", Short(rec.Id))
	}
}

// crashInWrite runs id's Dir.Write up to its fsync and kills E there.
func (sd *sharedDisk) crashInWrite(id string, h int) {
	sd.inj = injection{proc: sd.Prod, op: simfs.OpSync, crash: true}
	defer func() {
		sd.inj = injection{}
		if p := recover(); p != nil {
			if _, ok := p.(processCrash); !ok {
				panic(p)
			}
		}
	}()
	sd.Dir.Write(id, sd.entryTensors(h), nil)
}

// Remove is E's Dir.Remove of id; with fail, the rename fails with EIO
// ErrCleanup and the entry stays.
func (sd *sharedDisk) Remove(id string, fail bool) bool {
	if fail {
		sd.inj = injection{proc: sd.Prod, op: simfs.OpRename, err: syscall.EIO}
	}
	removed, err := sd.Dir.Remove(id)
	sd.inj = injection{}
	switch {
	case fail && (removed || !errors.Is(err, shareddir.ErrCleanup)):
		panic(fmt.Sprintf("sim: Remove of %s with EIO = %v, %v; want ErrCleanup", id, removed, err))
	case !fail && err != nil:
		panic(fmt.Sprintf("sim: Remove of %s: %v", id, err))
	}
	return removed
}

// claimOutcome is how a Claim ended.
type claimOutcome int

const (
	ClaimWon claimOutcome = iota + 1 // the Claim's rename won: the entry is the caller's
	claimLost
	// ClaimCrashed: the process died inside the Claim after its rename:
	// the entry is spent, the claimed file is an orphan.
	ClaimCrashed
)

// Claim runs shareddir.Claim of rec as process p of consumer cons (-1:
// E); crashAfterRename kills p at its read (after the rename won). Another
// Claim may run inside it (the interleaving): each saves and restores the
// state of the one it runs in.
func (sd *sharedDisk) Claim(p *simfs.Proc, cons int, rec *EntryRecord, crashAfterRename bool) (out claimOutcome) {
	outerInj, outerCl := sd.inj, sd.cl
	sd.cl = claiming{proc: p, instance: rec.Instance, id: rec.Id, cons: cons}
	sd.inj = injection{}
	if crashAfterRename {
		sd.inj = injection{proc: p, op: simfs.OpRead, crash: true}
	}
	defer func() {
		sd.inj, sd.cl = outerInj, outerCl
		if r := recover(); r != nil {
			if _, ok := r.(processCrash); !ok {
				panic(r)
			}
			out = ClaimCrashed
		}
	}()
	tensors, _, err := shareddir.Receive(p, CacheRoot, rec.Instance, rec.Id, sd.rand, 1<<20, sd.w.Opts.Mutant.SharedDirDecisions()) // the SU-1 mutant reads in place
	switch {
	case err == nil:
		if v, derr := tensors[0].Float32s(); len(tensors) != 1 || derr != nil || len(v) != 1 || v[0] != float32(rec.H) {
			sd.w.Failf(Correctness, "SU-1", "the claim of %s returned another entry's data", Short(rec.Id))
		}
		return ClaimWon
	case errors.Is(err, shareddir.ErrGone), errors.Is(err, shareddir.ErrUnknownProducer):
		return claimLost
	}
	panic(fmt.Sprintf("sim: Claim of %s: %v", rec.Id, err))
}

// insideClaim: inside a Claim, between its open and its rename, another
// process's pending operation on the same entry may land first (drawn from
// the shared disk's stream): E's removal (removalInsideClaim) or another
// consumer's consume arriving within the Claim's few ms (claimInsideClaim).
func (w *World) insideClaim(cl claiming) {
	w.removalInsideClaim(cl.id)
	if cl.cons >= 0 {
		w.claimInsideClaim(cl)
	}
}

// claimInsideClaim: another consumer's consume of the same entry, queued
// to arrive within claimWindowMs, is delivered now, so its whole Claim
// runs between this Claim's open and its rename: exactly one may win.
func (w *World) claimInsideClaim(cl claiming) {
	for i := range w.Q.heap {
		ev := w.Q.at(i)
		if ev.Kind != EvConsumeArrive || ev.Tick > w.Now+claimWindowMs {
			continue
		}
		if rq := ConsumeRequestOf(*ev); rq.Entry != cl.id || int(rq.Consumer) == cl.cons {
			continue
		}
		if w.Sd.Rng.IntN(2) == 0 {
			return
		}
		other := w.Q.removeAt(i)
		w.Reach(stClaimInsideClaim)
		if w.Tracing {
			w.Notef("PD%d's consume of %s (due at %d) arrived inside PD%d's Claim, between its open and its rename", other.c, Short(cl.id), other.Tick, cl.cons)
		}
		w.Dispatch(other)
		return
	}
}

// claimWindowMs is how far ahead a consume may be pulled into a Claim in
// progress: about how long the Claim's own disk work takes (the model's
// claim took 0..3 ms), so the network's delays stay what they were drawn.
const claimWindowMs = 3

// removalInsideClaim: inside a consumer's Claim of id, between its open
// and its rename, E's pending removal of id may land first (drawn).
func (w *World) removalInsideClaim(id string) {
	sd := w.Sd
	if w.Nodes.ProdDown || w.Prod.Stopped || sd.Dir == nil || w.Prod.Table.State(id) != handoff.EntryRemoving {
		return
	}
	if _, ok := sd.early[id]; ok || sd.Rng.IntN(2) == 0 {
		return
	}
	if sd.early == nil {
		sd.early = map[string]bool{}
	}
	sd.early[id] = sd.Remove(id, false)
	w.Reach(stRemovalInsideClaim)
	if w.Tracing {
		w.Notef("E's removal of %s landed inside the claim, between its open and its rename (won=%v)", Short(id), sd.early[id])
	}
}

// TakeEarly returns (and forgets) the outcome of id's removal if it landed
// inside a Claim.
func (sd *sharedDisk) TakeEarly(id string) (won, ok bool) {
	won, ok = sd.early[id]
	delete(sd.early, id)
	return won, ok
}

// CrashProducer: E's process dies. Each slow write in flight runs up to its
// fsync and dies there; its unsynced temp file is then lost or left as an
// orphan (drawn from the nodes stream, one draw per file, as before).
func (sd *sharedDisk) CrashProducer() {
	if !sd.active() || sd.Prod == nil {
		return
	}
	ids := make([]string, 0, len(sd.Slow))
	for id := range sd.Slow {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		sd.crashInWrite(id, sd.w.Ledger.Get(id).H)
	}
	sd.Prod.Crash()
	clear(sd.Slow)
	clear(sd.early)
	w := sd.w
	sd.Disk.LoseUnsynced(sd.Dir.Path(), func(path string) bool {
		if !strings.HasPrefix(filepath.Base(path), ".tmp-") {
			return false
		}
		lost := w.Nodes.Rng.IntN(2) == 0
		if w.Tracing {
			if lost {
				w.Notef("unsynced %s lost", sd.short(path))
			} else {
				w.Notef("unsynced %s left as an orphan", sd.short(path))
			}
		}
		return lost
	})
}

// Files lists every file and directory under the root (the checkers' view).
func (sd *sharedDisk) Files() []string { return sd.Disk.Paths(CacheRoot) }

// Collect is the shared-directory half of E's collector pass, the
// engine's too: shareddir's Dir.Collect (CollectOrphans of files
// shareddir.OrphanAgeMs old, then the throttled sweep of dead instances).
func (sd *sharedDisk) Collect() {
	if !sd.active() {
		return
	}
	n, swept, err := sd.Dir.Collect(sd.w.Now, false)
	if err != nil {
		panic(fmt.Sprintf("sim: CollectOrphans: %v", err))
	}
	if swept.Err != nil {
		panic(fmt.Sprintf("sim: SweepDeadInstances: %v", swept.Err))
	}
	if n > 0 && sd.w.Tracing {
		sd.w.Notef("collected %d orphans", n)
	}
}

// Stop closes E's instance at the end of its drain: S-4 says no entry is
// left but one whose removal failed (X-1, reported), which Close(true)
// then takes with everything else of the instance.
func (sd *sharedDisk) Stop() {
	if !sd.active() {
		return
	}
	w := sd.w
	sd.look = claimsLook{} // the Dir closes: its Exists fails from now on
	ids, err := sd.Dir.List()
	if err != nil {
		panic(fmt.Sprintf("sim: List: %v", err))
	}
	for _, id := range ids {
		if !w.Ledger.Get(id).RemoveFailed {
			w.Failf(Correctness, "S-4", "drained producer left entry %s in the cache directory", Short(id))
		}
	}
	if err := sd.Dir.Close(true); err != nil {
		panic(fmt.Sprintf("sim: Close: %v", err))
	}
}
