package world

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime/debug"
	"sync"

	"github.com/baton-dev/baton/engine/handoff"
)

// ErrBadSettings marks settings, a trace or a mutant name a run cannot use.
var ErrBadSettings = errors.New("sim: bad settings")

// Verdict is how a run ended; its number is `baton sim`'s exit code.
type Verdict int

// Verdicts.
const (
	// Passed: no checker failed and every handoff ended and every node drained in the budget.
	Passed Verdict = 0
	// Correctness: a safety checker failed (SU-1..SU-6, Q-1..Q-5, C-2..C-4, C-6, X-1, X-2, S-1, S-2, S-4, L-1, L-4, N-1, core invariants).
	Correctness Verdict = 1
	// Liveness: after faults healed, a handoff did not end or a node did not drain within the budget.
	Liveness Verdict = 2
	// Crash: the world panicked (a bug in the core or the simulator).
	Crash Verdict = 3
)

func (v Verdict) String() string {
	switch v {
	case Passed:
		return "PASSED"
	case Correctness:
		return "CORRECTNESS FAILURE"
	case Liveness:
		return "LIVENESS FAILURE"
	case Crash:
		return "CRASH"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Options are a run's outputs and its mutant; none changes what happens.
type Options struct {
	// Mutant injects one broken decision (MutantNone for the correct driver).
	Mutant Mutant
	// Trace, when set, receives the JSONL trace: a header line with the seed,
	// mutant and settings, one line per step, and a verdict line.
	Trace io.Writer
	// Verbose, when set, receives one status line per step.
	Verbose io.Writer
	// KeepHistory keeps the client-visible operations in Result.History.
	KeepHistory bool
	// HistoryOnly turns every other checker off, so the history check alone
	// must catch what is wrong (the test that it catches a mutant).
	HistoryOnly bool
	// Coverage, when set, gets the run's coverage added when it ends (coverage.go).
	Coverage *Coverage
}

// Result is the outcome of one run.
type Result struct {
	// Seed, Settings and Mutant are the run's inputs.
	Seed     uint64
	Settings Settings
	Mutant   Mutant
	Verdict  Verdict
	// Rule is the rule ID the failing checker names ("" when passed).
	Rule string
	// Failure is the checker's message ("" when passed).
	Failure string
	// Ticks is the virtual time at the end, in ms; Events the number of steps taken.
	Ticks  int64
	Events int64
	// Fired counts the faults that fired, by site.
	Fired map[Site]int
	// History is the client-visible operations (Options.KeepHistory only).
	History []HistoryOp
}

// ReplayCommand is the command that re-runs r.
func (r Result) ReplayCommand() string {
	cmd := fmt.Sprintf("baton sim --seed %d", r.Seed)
	if r.Mutant != MutantNone {
		cmd += " --mutant " + string(r.Mutant)
	}
	return cmd
}

type phase int

const (
	phaseSafety phase = iota
	phaseLiveness
	phaseShutdown
)

// failure is a checker's verdict inside a run.
type failure struct {
	verdict Verdict
	Rule    string
	Msg     string
}

// World is one simulated deployment: the producer E, the PD consumers, the
// clients, the shared directory, registered memory and the network, all
// stepped by one event queue.
type World struct {
	seed uint64
	Set  Settings
	Opts Options
	// checks are the checkers this world runs (SetChecks).
	checks Checks
	// behaviour is the node behaviour this world runs (SetBehaviour).
	behaviour *Behaviour
	// Decisions are the core's broken decisions opts.Mutant switches on
	// (handoff.Mutants): the core decides, the driver carries it out.
	Decisions handoff.Mutants
	// ProofSeen is what the Q-6 checker saw at its last look (check_proof.go).
	ProofSeen proofSeen
	// firstProd is the run's first producer (Start), which Run keeps for
	// the World's next run (releaseBufs).
	firstProd *producerNode

	Q     queue
	Now   int64
	Steps int64
	phase phase
	// SettledStep is the step at which every client was done, in the
	// liveness phase, just before the nodes are shut down (0 before): the
	// moment a live E's consumers must have ended every quarantine whose
	// proof is theirs to bring about (checks.checkCarriersRetired, Q-6).
	SettledStep int64
	WorkRNG     *rand.Rand // the workload stream (encode times, late cancels)
	idRNG       *rand.Rand
	// textBuf is the run's current chunk of text (text.go): ids, receive keys.
	textBuf []byte
	NetRNG  *rand.Rand // the network stream (delays, WRITE timing and faults)
	DiskRNG *rand.Rand // the disk stream (removal and claim-read times)
	ProcRNG *rand.Rand
	// rngs hold the streams above, the faults' and the nodes' (rngCell).
	rngs   [7]rngCell
	Faults *faults
	// faults is what Faults points to (issue #16: one allocation less a run).
	faults faults

	Prod    *producerNode
	Cons    []*ConsumerNode
	Clients []*Client
	Ledger  *ledger
	Hist    *history
	// ledger and hist are what Ledger and Hist point to (issue #16: two
	// allocations less a run).
	ledger ledger
	hist   history
	// Sd is the shared directory: the real shareddir code over a simulated disk (shared_disk.go).
	Sd      *sharedDisk
	Sources map[string]sourceState
	Writes  []*Write // every WRITE posted, by number-1
	// Xf is the transfer backend: real xfer agents on a simulated transport (transport.go).
	Xf    xferWorld
	Xreqs []Xreq // every transfer request, by receive number-1
	// recvs is where NewRecv allocates receives, a block at a time;
	// conns where NewCtrlConn allocates connections.
	recvs []Recv
	conns []CtrlConn
	// Admit is sim/nodes' consumerCheckRef's admission, its callbacks made once.
	Admit ConsumeAdmission
	// TransferAdmit is sim/nodes' producerCheckRef's, likewise.
	TransferAdmit TransferAdmission
	// dir is the Driver's directed transfer faults (nil in seeded runs).
	dir *directed
	// RecvEnds lists how each transfer receive ended; upstream the
	// producer's TransferEncoderCache answers as they left it (before any
	// network fault), by receive number; probeAnswers the answers that
	// reached clients for their probe calls (check_answers.go).
	RecvEnds     []RecvEnd
	Upstream     []upstreamAnswer
	ProbeAnswers []ProbeAnswer
	// probeBuf is where ProbeAnswers starts (AddProbeAnswer): a run's
	// clients probe rarely, a few at most.
	probeBuf [4]ProbeAnswer
	// Judged counts the entries of each log above (and the ledger's) the
	// answer checks have judged; nextExpiryCheck is the tick of the next X-2 look.
	Judged          judgedLogs
	NextExpiryCheck int64
	// LateAdmissions counts the (arrival, admission) pairs appended to any
	// consumer's LateAdmissions (sim/nodes bumps it with each append): while
	// it is 0 every such list is empty and Q-5's scan has nothing to find.
	LateAdmissions int
	// Nodes: partitions, slow fsync, producer crash, P and D (nodes.go).
	Nodes nodeWorld

	// ProdHealthSig is the signature checkHealth last checked fully for E.
	ProdHealthSig HealthSig
	// ProdCheapSig is the signature checkHealth last checked cheaply for E.
	ProdCheapSig CheapCheck
	// CleanupFailuresSeen is the removal failures checkCleanupFailures last checked.
	CleanupFailuresSeen int
	// Media is the media model: items, content hashes, prefix caches, answers (media.go).
	Media mediaWorld

	// cov is the run's coverage counts (coverage.go).
	cov runCoverage

	// Bufs are the pooled buffers Run gave this world (nil otherwise).
	Bufs *runBufs
	// consBufs is what is left of Bufs' consumer buffers for the
	// consumers' first incarnations to take (ConsumerNode.Boot), and
	// consNodes of its consumers for newConsumerNode to take.
	consBufs  []buffer
	consNodes []ConsumerNode
	// incs is Run's pooled state of the consumers' restarts (Boot).
	incs []incarnation
	// recvMaps are Run's pooled maps for the consumers' receives (Boot),
	// and consMem its memory for their first incarnations' buffers.
	recvMaps []map[int64]*Recv
	consMem  []byte
	// retiredRecvs are the maps of receives of the consumers' past
	// incarnations (Boot), which releaseBufs pools.
	retiredRecvs []map[int64]*Recv

	// sendSlots hold the events sendHooked hands the send hooks, by
	// nesting depth (sendDepth).
	sendSlots [2]Event
	sendDepth int

	Fail    *failure
	Tracing bool
	note    string
	trace   *traceWriter
	traceW  traceWriter // what trace points to (one allocation less a run)
}

// Run runs the world for seed with settings s and returns its result. It
// never panics: a panic inside the world is the Crash verdict.
func Run(seed uint64, s Settings, opts Options) (res Result) {
	res = Result{Seed: seed, Settings: s, Mutant: opts.Mutant}
	if err := s.Validate(); err != nil {
		res.Verdict, res.Failure = Crash, err.Error()
		return res
	}
	bufs := runBufPool.Get().(*runBufs)
	w := newWorldBufs(seed, s, opts, bufs)
	defer w.releaseBufs()         // last: nothing reads the world after it
	defer opts.Coverage.addRun(w) // after the recover below
	defer func() {
		if p := recover(); p != nil {
			res.Verdict = Crash
			res.Failure = fmt.Sprintf("panic at tick %d step %d: %v\n%s", w.Now, w.Steps, p, debug.Stack())
			res.Ticks, res.Events, res.Fired = w.Now, w.Steps, w.Faults.Fired()
			if opts.KeepHistory {
				res.History = w.History()
			}
			w.trace.verdict(res)
		}
	}()
	w.trace.header(seed, opts.Mutant, s)
	w.Start()
	w.Loop()
	res.Ticks, res.Events, res.Fired = w.Now, w.Steps, w.Faults.Fired()
	if w.Fail != nil {
		res.Verdict, res.Rule, res.Failure = w.Fail.verdict, w.Fail.Rule, w.Fail.Msg
	}
	if opts.KeepHistory {
		res.History = w.History()
	}
	w.trace.verdict(res)
	return res
}

// RunSeed runs seed with the settings it draws.
func RunSeed(seed uint64, opts Options) Result { return Run(seed, DrawSettings(seed), opts) }

func NewWorld(seed uint64, s Settings, opts Options) *World { return newWorldBufs(seed, s, opts, nil) }

// runBufs are the per-run buffers a finished Run hands to the next one
// (issue #16: allocating them for every run was a fifth of a run's bytes,
// so of its garbage-collection work). A World that has them gives them
// back in releaseBufs, cleared, when nothing can read it any more.
type runBufs struct {
	slab       []Event
	heap       []qent
	free       []int32
	ops        []HistoryOp
	Checked    []HistoryOp // checkHistory's copy of the history
	clients    []Client
	clientPtrs []*Client
	xreqs      []Xreq
	// recs is the ledger's first block of records and all its list
	// (a run's records are referred to by pointer only within the run).
	recs []EntryRecord
	all  []*EntryRecord
	// upstream, recvEnds and writes are the World's logs, cleared.
	upstream []upstreamAnswer
	recvEnds []RecvEnd
	writes   []*Write
	// recvMaps are the consumers' maps of receives, cleared; retired
	// the World's list of its past incarnations' maps, cleared.
	recvMaps []map[int64]*Recv
	retired  []map[int64]*Recv
	// fired is the run's coverage of fired faults; consMem the memory of
	// the consumers' first incarnations' buffers (transfer backend), cleared.
	fired   []firedCell
	consMem []byte
	// recvs is the run's first block of receives (NewRecv), takes and
	// touched the ledger's lists of them, cleared.
	recvs       []Recv
	takes       []Take
	touched     []*EntryRecord
	unpublished []Unpublished
	// entries and sources are the ledger's and the world's maps, cleared.
	entries map[string]*EntryRecord
	sources map[string]sourceState
	// world is the World itself, zeroed; consBufs the buffers of the
	// consumers' first incarnations, cleared (ConsumerNode.Boot).
	world    *World
	consBufs []buffer
	// consNodes are the consumers themselves and consPtrs the World's
	// list of them, cleared.
	consNodes []ConsumerNode
	consPtrs  []*ConsumerNode
	// incs is the state of the consumers' restarts (pooledRestarts), cleared.
	incs []incarnation
	// conns is the run's first block of control connections (NewCtrlConn), cleared.
	conns []CtrlConn
	// nodes is what the World's E+P+D nodes keep (pooledNodes).
	nodes pooledNodes
	// enabled is the faults' map of enabled sites, cleared.
	enabled map[Site]bool
	// pending is the history's map of unanswered calls, cleared.
	pending map[opKey]int
	// admit and transferAdmit are world's admissions, their callbacks
	// (bound to world, which they read) kept and their per-run fields
	// cleared (sim/nodes binds them once per World, not once per run).
	admit         ConsumeAdmission
	transferAdmit TransferAdmission
	// The media model's: the first block of published media, and the
	// published, answers and by-hash lists, cleared; cache is the
	// consumers' prefix caches' map, cleared.
	arena     []PublishedMedia
	published []*PublishedMedia
	answers   []MediaAnswer
	byHash    []ItemRef
	cache     map[CacheKey]uint64
	// disk is the World's shared disk, zeroed but for its slow list and
	// processes (cleared).
	disk pooledDisk
	// proofCons is the Q-6 checker's list of what it saw of each
	// consumer, cleared.
	proofCons []ConsumerProofs
	// prod is the World's first producer, zeroed but for its key's and
	// lists' buffers (cleared).
	prod *producerNode
	// xf is what the World's transfer backend keeps (pooledXfer).
	xf pooledXfer
}

var runBufPool = sync.Pool{New: func() any { return new(runBufs) }}

// maxPooledMap bounds the maps a finished run hands on (runBufs).
const maxPooledMap = 256

// maxPooledRecvMaps bounds the consumers' maps of receives a finished run
// hands on: enough for the most consumers a run draws and a few of their
// restarts.
const maxPooledRecvMaps = 16

// reuse returns b[:0] when it can hold n, else a new slice of capacity n.
func reuse[T any](b []T, n int) []T {
	if cap(b) >= n {
		return b[:0]
	}
	return make([]T, 0, n)
}

// releaseBufs clears the run's buffers and returns them to the pool.
func (w *World) releaseBufs() {
	b := w.Bufs
	if b == nil {
		return
	}
	w.Bufs = nil
	clear(w.Q.slab)
	clear(w.Hist.ops)
	clear(w.Clients)
	clear(b.clients)
	clear(w.Xreqs)
	// the first block's used records, whatever the ledger grew to since
	// (Add allocates records in order, one per entry of All)
	clear(b.recs[:min(len(w.Ledger.All), cap(b.recs))])
	clear(w.Ledger.All)
	b.recs, b.all = b.recs[:0], w.Ledger.All[:0]
	// the first block's used receives, whatever the world grew to since
	// (NewRecv allocates them in order, at most one per request of Xreqs)
	clear(b.recvs[:min(len(w.Xreqs), cap(b.recvs))])
	b.recvs = b.recvs[:0]
	clear(w.Ledger.Takes)
	clear(w.Ledger.Touched[:cap(w.Ledger.Touched)]) // Untouch clears only what it empties
	b.takes, b.touched = w.Ledger.Takes[:0], w.Ledger.Touched[:0]
	clear(w.Ledger.Unpublished)
	b.unpublished = w.Ledger.Unpublished[:0]
	clear(w.Upstream)
	clear(w.RecvEnds)
	clear(w.Writes)
	b.upstream, b.recvEnds, b.writes = w.Upstream[:0], w.RecvEnds[:0], w.Writes[:0]
	b.fired = w.cov.fired[:0]
	clear(b.consMem[:len(w.consMem)]) // what the run took (the rest is clear)
	b.recvMaps = w.recvMaps           // those this run did not take (empty)
	for _, c := range w.Cons {
		if len(c.Recvs) <= maxPooledMap && c.Recvs != nil && len(b.recvMaps) < maxPooledRecvMaps {
			clear(c.Recvs)
			b.recvMaps = append(b.recvMaps, c.Recvs)
		}
	}
	for _, m := range w.retiredRecvs {
		if len(m) <= maxPooledMap && len(b.recvMaps) < maxPooledRecvMaps {
			clear(m)
			b.recvMaps = append(b.recvMaps, m)
		}
	}
	clear(w.retiredRecvs)
	b.retired = w.retiredRecvs[:0]
	b.entries, b.sources = nil, nil
	if len(w.Ledger.Entries) <= maxPooledMap && len(w.Sources) <= maxPooledMap {
		// (clearing a map costs its capacity: a huge run's is not kept)
		clear(w.Ledger.Entries)
		clear(w.Sources)
		b.entries, b.sources = w.Ledger.Entries, w.Sources
	}
	b.slab, b.heap, b.free = w.Q.slab[:0], w.Q.heap[:0], w.Q.free[:0]
	b.ops, b.clientPtrs, b.xreqs = w.Hist.ops[:0], w.Clients[:0], w.Xreqs[:0]
	clear(b.consBufs[:len(b.consBufs)-len(w.consBufs)]) // what the run took (the rest is clear)
	clear(b.incs[:len(w.incs)])
	// the first block's used connections, whatever the world grew to since
	// (NewCtrlConn allocates them in order)
	clear(b.conns[:cap(b.conns)])
	b.conns = b.conns[:0]
	clear(b.consNodes)
	clear(w.Cons)
	b.consPtrs = w.Cons[:0]
	m := &w.Media
	clear(b.arena[:cap(b.arena)]) // the first block, whatever the media grew to since
	clear(m.Published)
	clear(m.Answers)
	clear(m.ByHash)
	b.arena, b.published, b.answers, b.byHash = b.arena[:0], m.Published[:0], m.Answers[:0], m.ByHash[:0]
	b.pending, b.cache = nil, nil
	if len(w.Hist.pending) <= maxPooledMap && len(m.Cache) <= maxPooledMap {
		clear(w.Hist.pending)
		clear(m.Cache)
		b.pending, b.cache = w.Hist.pending, m.Cache
	}
	b.admit = ConsumeAdmission{Adm: w.Admit.Adm}
	b.admit.Adm.Accepted, b.admit.Adm.Mutants, b.admit.Adm.OpaqueBytes = nil, handoff.Mutants{}, 0
	b.transferAdmit = TransferAdmission{Adm: w.TransferAdmit.Adm}
	b.transferAdmit.Adm.OpaqueBytes, b.transferAdmit.Adm.Self, b.transferAdmit.Adm.NowUnixMs = 0, "", 0
	if e := w.faults.Enabled; e != nil {
		clear(e)
		b.enabled = e
	}
	b.disk.release(w.Sd)
	b.nodes.release(&w.Nodes)
	b.xf.release(w)
	clear(w.ProofSeen.Cons)
	b.proofCons = w.ProofSeen.Cons[:0]
	if p := w.firstProd; p != nil {
		clear(p.Observed[:cap(p.Observed)])
		if w.Set.Handoffs > maxPooledMap { // its map may have grown large
			p.table = handoff.ProducerTable{} // (clearing a map costs its capacity)
		}
		p.table.Reset(handoff.ProducerConfig{}) // emptied, its maps kept: no slab to copy
		table := p.table
		*p = producerNode{key: p.key[:0], Observed: p.Observed[:0], table: table}
		b.prod = p
	}
	*w = World{} // nothing of this run stays reachable from the pool
	b.world = w
	runBufPool.Put(b)
}

// newWorldBufs is newWorld taking its buffers from bufs when not nil.
func newWorldBufs(seed uint64, s Settings, opts Options, bufs *runBufs) *World {
	if installed.End == nil {
		panic("sim/world: no checkers installed (package sim installs them: world.SetChecks)")
	}
	if installedBehaviour == nil {
		panic("sim/world: no node behaviour installed (package sim installs it: world.SetBehaviour)")
	}
	var w *World
	pooled := bufs != nil && bufs.world != nil
	if pooled {
		w, bufs.world = bufs.world, nil // zeroed by releaseBufs
	} else {
		w = new(World)
	}
	*w = World{
		seed: seed, Set: s, Opts: opts, Decisions: opts.Mutant.decisions(), checks: installed, behaviour: installedBehaviour,
		Media: newMediaWorld(seed), // the ledger's map and lists: below
	}
	w.Ledger, w.Hist = &w.ledger, &w.hist
	w.hist.DrainMs = -1
	if pooled { // the admissions' callbacks, bound to this very World
		w.Admit, w.TransferAdmit = bufs.admit, bufs.transferAdmit
	}
	w.WorkRNG, w.idRNG = w.rngs[0].seed(seed, subWorkload), w.rngs[1].seed(seed, subIDs)
	w.NetRNG, w.DiskRNG = w.rngs[2].seed(seed, subNetwork), w.rngs[3].seed(seed, subDisk)
	w.ProcRNG = w.rngs[4].seed(seed, subProcess)
	var disk *pooledDisk
	if bufs != nil {
		disk = &bufs.disk
	}
	w.Sd = newSharedDisk(w, disk)
	var enabled map[Site]bool
	if bufs != nil {
		enabled, bufs.enabled = bufs.enabled, nil // cleared by releaseBufs
	}
	w.Faults = w.faults.init(w.rngs[5].seed(seed, subFaults), s, enabled)
	w.Faults.cov = &w.cov
	// Sized for a run's usual peak (about two events and four operations
	// per handoff in flight), so a run does not grow them step by step.
	var b runBufs // empty: fresh buffers, never pooled
	if bufs != nil {
		w.Bufs, b = bufs, *bufs
	}
	w.ProofSeen.Cons = b.proofCons[:0] // cleared by releaseBufs
	w.Q.slab = reuse(b.slab, 16+2*s.Handoffs)
	w.Q.heap = reuse(b.heap, 16+2*s.Handoffs)
	w.Q.free = b.free[:0]
	w.Hist.ops = reuse(b.ops, 4*s.Handoffs)
	w.Clients = reuse(b.clientPtrs, s.Handoffs)
	w.Ledger.Entries, w.Sources = b.entries, b.sources // cleared by releaseBufs
	if w.Ledger.Entries == nil {
		w.Ledger.Entries = make(map[string]*EntryRecord, s.Handoffs)
	}
	if w.Sources == nil {
		w.Sources = map[string]sourceState{}
	}
	w.Ledger.All = reuse(b.all, s.Handoffs)
	w.Ledger.recs = reuse(b.recs, s.Handoffs)
	if bufs != nil {
		bufs.recs = w.Ledger.recs
	}
	w.Xreqs = reuse(b.xreqs, s.Handoffs)
	w.recvs = reuse(b.recvs, max(16, s.Handoffs))
	w.Ledger.Takes = reuse(b.takes, s.Handoffs)
	w.Ledger.Touched = b.touched[:0]
	w.Ledger.Unpublished = b.unpublished[:0]
	w.Upstream, w.RecvEnds, w.Writes = b.upstream[:0], b.recvEnds[:0], b.writes[:0]
	w.cov.fired = b.fired[:0]
	if bufs != nil {
		w.recvMaps, bufs.recvMaps = bufs.recvMaps, nil
		w.retiredRecvs = bufs.retired[:0] // cleared by releaseBufs
		w.consMem = bufs.consMem[:0]
	}
	if bufs != nil {
		bufs.recvs = w.recvs
	}
	if bufs != nil {
		if n := (s.Consumers + pooledRestarts) * s.BuffersPerConsumer; cap(b.consBufs) >= n {
			bufs.consBufs = b.consBufs[:n]
		} else {
			bufs.consBufs = make([]buffer, n)
		}
		w.consBufs = bufs.consBufs
		if b.incs == nil {
			bufs.incs = make([]incarnation, 0, pooledRestarts)
		}
		w.incs = bufs.incs[:0]
		w.conns = reuse(b.conns, 8)
		bufs.conns = w.conns
		if cap(b.consNodes) >= s.Consumers {
			bufs.consNodes = b.consNodes[:s.Consumers]
		} else {
			bufs.consNodes = make([]ConsumerNode, s.Consumers)
		}
		w.consNodes = bufs.consNodes
		w.Cons = reuse(b.consPtrs, s.Consumers)
		w.Hist.pending = b.pending // cleared by releaseBufs (nil: made below)
		// The media model's lists, as sim/nodes would make them (an
		// empty list reads as a nil one), and its first block.
		m := &w.Media
		m.arena = reuse(b.arena, max(s.Handoffs, 8))
		bufs.arena = m.arena
		m.Published = reuse(b.published, s.Handoffs)
		m.Answers = reuse(b.answers, s.Handoffs)
		m.ByHash = b.byHash[:0]
		m.Cache = b.cache
		if m.Cache == nil {
			m.Cache = make(map[CacheKey]uint64, s.Handoffs)
		}
	}
	if w.Hist.pending == nil {
		w.Hist.pending = map[opKey]int{}
	}
	w.Tracing = opts.Trace != nil || opts.Verbose != nil
	w.traceW = traceWriter{out: opts.Trace, verbose: opts.Verbose}
	w.trace = &w.traceW
	w.initNodes()
	return w
}

// Start builds the nodes and schedules the clients and the periodic work.
func (w *World) Start() {
	var pooled *producerNode
	if w.Bufs != nil {
		pooled, w.Bufs.prod = w.Bufs.prod, nil // zeroed by releaseBufs
	}
	w.Prod = newProducerNode(w, pooled)
	w.firstProd = w.Prod
	for i := 0; i < w.Set.Consumers; i++ {
		w.Cons = append(w.Cons, newConsumerNode(w, i))
	}
	var slab []Client // one allocation for all clients, or Run's pooled one (cleared by releaseBufs)
	if w.Bufs != nil && cap(w.Bufs.clients) >= w.Set.Handoffs {
		slab = w.Bufs.clients[:w.Set.Handoffs]
	} else {
		slab = make([]Client, w.Set.Handoffs)
		if w.Bufs != nil {
			w.Bufs.clients = slab
		}
	}
	for i := range slab {
		c := &slab[i]
		c.Idx, c.Plan = i, drawPlan(w)
		w.Clients = append(w.Clients, c)
		w.Schedule(c.Plan.startTick, ClientCall{Client: int32(i)}.Event(EvClientStart))
	}
	w.Schedule(w.Set.CollectPeriodMs, Event{Kind: EvCollect})
	if w.Faults.Enabled[SiteConsumerCrash] {
		for i := range w.Cons {
			w.Schedule(Between(w.ProcRNG, 50, 300), ConsumerStep{Consumer: int32(i)}.Event(EvChaos))
		}
	}
	if w.Faults.Buggify(SiteShutdown) {
		w.Schedule(Between(w.ProcRNG, 1, w.Set.SafetyTicks), shutdownCall{Injected: true}.event())
	}
	w.Schedule(w.Set.SafetyTicks, Event{Kind: evHeal})
	w.StartNodes()
}

// Schedule puts ev on the queue at tick.
func (w *World) Schedule(tick int64, ev Event) {
	ev.Tick = tick
	w.Q.push(ev)
}

// After puts ev on the queue delayMs from now.
func (w *World) After(delayMs int64, ev Event) { w.Schedule(w.Now+delayMs, ev) }

// msgClass says which network faults a message may suffer.
type msgClass int

const (
	// MsgRequest: may be delayed or dropped before it took effect.
	MsgRequest msgClass = iota
	// MsgReply: may be delayed, lost after its request took effect, or duplicated.
	MsgReply
	// MsgRelease: an Abort request; may also be duplicated (SU-3 must answer each).
	MsgRelease
)

// Send delivers ev over the simulated network: a delay drawn from the
// network stream, and (in the safety phase) the faults of its class.
func (w *World) Send(class msgClass, ev Event) {
	if w.Nodes.hookSend {
		var dropped bool
		if ev, dropped = w.sendHooked(ev); dropped {
			return
		}
	}
	switch class {
	case MsgRequest, MsgRelease:
		if w.Faults.buggifyAt(ixNetDrop) {
			if w.Tracing {
				w.Notef("dropped %s", ev.Kind)
			}
			return
		}
	case MsgReply:
		if ev.Kind == EvTransferReply {
			rep := TransferReplyOf(ev)
			w.Upstream = append(w.Upstream, upstreamAnswer{Recv: rep.Recv, Res: rep.Result})
			if w.Faults.buggifyAt(ixPlainInvalid) {
				ev.setTransferResult(ResPlainInvalid)
				if w.Tracing {
					w.Notef("reply replaced by a plain INVALID_ARGUMENT")
				}
			}
		}
		if w.Faults.buggifyAt(ixLostReply) {
			if ev.Kind == EvTransferReply {
				w.coverLostTransferReply(TransferReplyOf(ev).Recv)
			}
			if w.Tracing {
				w.Notef("reply %s lost", ev.Kind)
			}
			return
		}
	}
	d := Between(w.NetRNG, w.Set.NetDelayMinMs, w.Set.NetDelayMaxMs)
	if w.Faults.buggifyAt(ixNetDelay) {
		d += Between(w.NetRNG, 1, w.Set.LongDelayMaxMs)
	}
	w.After(d, ev)
	dup := false
	switch class {
	case MsgReply:
		dup = w.Faults.buggifyAt(ixDupReply)
	case MsgRelease:
		dup = w.Faults.buggifyAt(ixDupRelease)
	}
	if dup {
		w.After(d+Between(w.NetRNG, 0, w.Set.NetDelayMaxMs), ev)
		if class == MsgRelease {
			w.histDuplicate(ev)
		}
	}
}

// sendHooked runs sendHook on a copy of ev and returns it: the hooks take
// a pointer, and taking Send's own ev's address would move every message
// Send carries to the heap, hooked or not. The copy lives in the world's
// sendSlots (one per nesting level, should a hook send), so a hooked send
// allocates nothing either.
func (w *World) sendHooked(ev Event) (Event, bool) {
	if w.sendDepth >= len(w.sendSlots) {
		return sendHookedHeap(w, ev)
	}
	p := &w.sendSlots[w.sendDepth]
	*p = ev
	w.sendDepth++
	dropped := w.sendHook(p)
	w.sendDepth--
	ev, *p = *p, Event{}
	return ev, dropped
}

// sendHookedHeap is sendHooked past the world's slots.
//
//go:noinline
func sendHookedHeap(w *World, ev Event) (Event, bool) {
	dropped := w.sendHook(&ev)
	return ev, dropped
}

// Notef sets the current step's note (only when tracing).
func (w *World) Notef(format string, args ...any) {
	if w.Tracing {
		if w.note != "" {
			w.note += "; "
		}
		w.note += fmt.Sprintf(format, args...)
	}
}

// Failf records the first failure of the run.
func (w *World) Failf(v Verdict, rule, format string, args ...any) {
	if w.Fail == nil {
		w.Fail = &failure{verdict: v, Rule: rule, Msg: fmt.Sprintf("%s at tick %d step %d: %s", rule, w.Now, w.Steps, fmt.Sprintf(format, args...))}
	}
}

// Loop steps until the run ends: a failure, the end of the liveness phase,
// an empty queue (no progress) or the budget.
func (w *World) Loop() {
	deadline := w.Set.SafetyTicks + w.Set.LivenessBudgetTicks
	for w.Fail == nil {
		ev, ok := w.Q.Pop()
		if !ok {
			w.Failf(Liveness, "liveness", "no progress: the event queue is empty; %s", w.pending())
			return
		}
		if ev.Tick > deadline {
			w.Now = deadline
			w.Failf(Liveness, "liveness", "not converged within %d ticks of liveness budget; %s", w.Set.LivenessBudgetTicks, w.pending())
			return
		}
		w.Now = ev.Tick
		w.Steps++
		w.note = ""
		w.cov.step(ev.Kind)
		done := w.Dispatch(ev)
		if w.Tracing {
			w.trace.step(w.Steps, ev, w.note)
		}
		w.CheckStep()
		if done && w.Fail == nil {
			w.checkEnd()
			return
		}
	}
}

// Dispatch runs ev's handler, then ends the quarantines whose Q-6 proof
// came in the step (quarantine.go); it returns true when the run is
// complete.
func (w *World) Dispatch(ev Event) bool {
	done := w.handle(ev)
	if w.Xf.ProofWaits > 0 {
		w.endProvedQuarantines()
	}
	return done
}

// handle runs ev's handler; it returns true when the run is complete.
func (w *World) handle(ev Event) bool {
	if ev.Kind >= evNodeFirst {
		return w.dispatchNode(ev)
	}
	if w.Nodes.HookArrival && w.arrivalHook(ev) {
		return false
	}
	if h := w.behaviour.Handlers[ev.Kind]; h != nil {
		h(w, ev)
		return false
	}
	switch ev.Kind {
	case evHeal:
		w.heal()
	case evEndCheck:
		return w.endCheck()
	default:
		panic(fmt.Sprintf("sim: unknown event kind %d", ev.Kind))
	}
	return false
}

// heal ends the safety phase: no new faults; crashed consumers come back.
func (w *World) heal() {
	w.Faults.Healed = true
	w.phase = phaseLiveness
	for i, c := range w.Cons {
		if !c.Up {
			w.After(1, ConsumerStep{Consumer: int32(i), Inc: c.Inc}.Event(EvRestart))
		}
	}
	if w.Tracing {
		w.Notef("faults healed; liveness phase")
	}
	w.After(100, Event{Kind: evEndCheck})
}

// endCheck, in the liveness phase: once every client is done, shut every
// node down; once every node drained and no WRITE is pending, the run is complete.
func (w *World) endCheck() bool {
	if w.phase == phaseLiveness {
		for _, c := range w.Clients {
			if !c.Done {
				w.After(100, Event{Kind: evEndCheck})
				return false
			}
		}
		w.phase = phaseShutdown
		w.SettledStep = w.Steps
		if w.Tracing {
			w.Notef("every client done; shutting every node down")
		}
		if !w.Prod.Health.Draining() {
			w.After(0, Event{Kind: EvShutdown})
		}
		for _, c := range w.Cons {
			c.Health.StartDrain()
		}
		w.drainNodes()
		w.After(100, Event{Kind: evEndCheck})
		return false
	}
	if !w.Prod.Stopped {
		if !w.Nodes.ProdDown && !w.Prod.Health.Draining() {
			// E restarted (sim/nodes/producer_crash.go) after its Shutdown went to
			// the instance that crashed, or after the look above read the
			// dead instance's Health while it was down: the new instance
			// is shut down too. Found by the simulator (seed 920554).
			w.After(0, Event{Kind: EvShutdown})
		}
		w.After(100, Event{Kind: evEndCheck})
		return false
	}
	busy := false
	for _, c := range w.Cons {
		if !c.Up || c.Receives.Inflight() > 0 {
			busy = true
			continue
		}
		w.consumerDrained(c.Idx)
	}
	if busy {
		w.After(100, Event{Kind: evEndCheck})
		return false
	}
	for _, wr := range w.Writes {
		if wr.Pending() {
			w.After(100, Event{Kind: evEndCheck})
			return false
		}
	}
	if w.nodesBusy() || (w.Xf.Net != nil && w.Xf.Net.Pending() > 0) {
		w.After(100, Event{Kind: evEndCheck})
		return false
	}
	if msg := w.xferLeaks(); msg != "" {
		w.Failf(Correctness, "S-4", "drained world: %s", msg)
	}
	if w.Tracing {
		w.Notef("converged")
	}
	return true
}

// pending describes what is still unfinished, for a liveness failure.
func (w *World) pending() string {
	var open []int
	for _, c := range w.Clients {
		if !c.Done {
			open = append(open, c.Idx)
		}
	}
	s := fmt.Sprintf("clients not done %v; producer entries %d (removing %d, transfers %d), stopped %v, cleanups %d",
		open, w.Prod.Table.Entries(), w.Prod.Table.PendingRemovals(), w.Prod.Table.Transfers(), w.Prod.Stopped, w.Prod.Cleanups)
	for _, c := range w.Cons {
		s += fmt.Sprintf("; PD%d up %v inflight %d", c.Idx, c.Up, c.Receives.Inflight())
	}
	return s
}
