package executor

import (
	"errors"
	"fmt"
	"sort"
)

// Errors of the executor core. The driver maps them to gRPC codes: every one
// is a driver bug or a request the driver must not have sent, so INTERNAL.
var (
	// ErrUnknownRequest: the request id was never submitted, or has ended.
	ErrUnknownRequest = errors.New("executor: unknown request")
	// ErrDuplicateRequest: Submit of an id that is still live.
	ErrDuplicateRequest = errors.New("executor: request already submitted")
	// ErrNotPublished: Consume of a request whose output is not PUBLISHED
	// (not yet ready, already consumed: R-1, or ended).
	ErrNotPublished = errors.New("executor: output not published")
	// ErrNotGenerating: Preempt of a request that is not in GENERATION.
	ErrNotGenerating = errors.New("executor: request not generating")
	// ErrCannotRecompute: Preempt of a request with no encoder inputs of its
	// own (a consumer's received output): nothing could recompute it.
	ErrCannotRecompute = errors.New("executor: R-2 no encoder inputs to recompute from")
	// ErrUnknownBatch: a completion for a batch that is not pending.
	ErrUnknownBatch = errors.New("executor: unknown batch")
	// ErrBadItems: Submit with fewer than one encoder input item.
	ErrBadItems = errors.New("executor: a request needs at least one encoder input")
)

// State is a request's place in the CONTEXT section 2 lifecycle.
type State uint8

// Request states. Finished, Cancelled and Failed are terminal.
const (
	StateEncoderInit State = iota + 1 // submitted, waiting for a batch
	StatePending                      // its batch's encoder step is running
	StatePublished                    // holds a view of the output; ready event fired
	StateContext                      // consumed by the first context step; view not yet dropped
	StateGeneration                   // view dropped, decoding
	StateFinished
	StateCancelled
	StateFailed
)

var stateNames = [...]string{"", "ENCODER_INIT", "PENDING", "PUBLISHED", "CONTEXT", "GENERATION", "FINISHED", "CANCELLED", "FAILED"}

// String returns the state's contract name (ENCODER_INIT, PENDING, PUBLISHED,
// CONTEXT, GENERATION, FINISHED, CANCELLED, FAILED), or State(n) for a value
// out of range.
func (s State) String() string {
	if int(s) < len(stateNames) && s != 0 {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", s)
}

// Terminal reports whether s is FINISHED, CANCELLED or FAILED.
func (s State) Terminal() bool { return s >= StateFinished }

// BatchID names one encoder step's batch and its packed storage; ids start
// at 1 and grow by one per batch (per SubmitPublished storage too).
type BatchID uint64

// PreemptMode is how a preempted request comes back.
type PreemptMode uint8

// Preemption modes.
const (
	// PreemptPause keeps the token ids generated so far: the recompute
	// re-encodes, recomputes the context, re-absorbs those ids and goes on.
	PreemptPause PreemptMode = iota + 1
	// PreemptReset drops everything: the recompute re-encodes and
	// regenerates from the first token (the driver emits only new tokens).
	PreemptReset
)

// String returns "pause" or "reset", or PreemptMode(n) for another value.
func (m PreemptMode) String() string {
	switch m {
	case PreemptPause:
		return "pause"
	case PreemptReset:
		return "reset"
	}
	return fmt.Sprintf("PreemptMode(%d)", m)
}

// Config configures an Executor. Zero fields take the defaults.
type Config struct {
	// MaxBatchRequests bounds the requests of one encoder batch (default 8).
	MaxBatchRequests int
	// MaxPendingBatches bounds the batches whose encoder step runs at once
	// (default 1: the encoder is one device).
	MaxPendingBatches int
	// Mutation replaces one decision (conformance/mutants); production code
	// leaves it zero.
	Mutation Mutation
}

// Mutation names the deliberately broken decisions the mutants use. Each
// field breaks exactly one rule; the zero value is the contract's executor.
type Mutation struct {
	// ScatterLiveOnly advances the item offset only past members still
	// pending, so a cancelled member's slice goes to its next sibling (C-2).
	ScatterLiveOnly bool
	// KeepViewOnEnd keeps the view of a request that ends before its first
	// context step, so the batch's storage is never freed (C-3).
	KeepViewOnEnd bool
	// ReleaseEveryCall drops a view reference from the storage on every
	// Release, not only the first: a decode loop that releases every step
	// frees the storage under its siblings' views (release idempotency).
	ReleaseEveryCall bool
	// ContextTwice has the driver compute a request's context twice per
	// admission (ContextComputations answers 2; breaks R-1).
	ContextTwice bool
	// RecomputeWithoutEncoder answers a Preempt with RecomputeFromView: the
	// request is not re-admitted, no encoder step runs, and the driver
	// recomputes its context from the view it last consumed, whose storage
	// may have been freed since (breaks R-2).
	RecomputeWithoutEncoder bool
}

// Counters are the executor's totals since New (all counts).
type Counters struct {
	Admissions        uint64 // Submit plus every re-admission after Preempt
	BatchesFormed     uint64 // RunEncoder actions
	BatchedRequests   uint64 // members of those batches
	ContextsComputed  uint64 // ContextComputed calls (cross-attention KV computations, R-1)
	Releases          uint64 // Release calls that dropped a view
	RedundantReleases uint64 // Release calls that found nothing to drop
	Preemptions       uint64 // Preempt calls that re-admitted a request
	StoragesFreed     uint64 // FreeStorage actions: packed storages freed (C-3, C-6)
	EncoderFailures   uint64 // batches that failed
}

// View is a request's slice of a batch's packed output: items
// [FirstItem, FirstItem+Items) of the batch's storage, in submission order
// of the batch's members.
type View struct {
	// Batch is the batch whose packed storage holds the view's items.
	Batch BatchID
	// FirstItem is the index of the view's first item in the storage.
	FirstItem int
	// Items is the view's item count (the request's encoder input items).
	Items int
}

type request struct {
	id        string
	items     int // encoder input items; 0 for a consumer's received output
	state     State
	admission int // 1 for the first admission, +1 per Preempt
	batch     BatchID
	view      *View
	consumed  int  // Consume calls this admission
	contexts  int  // ContextComputed calls this admission
	lastView  View // the view the last Consume returned (the R-2 mutant's)
	preempt   PreemptMode
}

type member struct {
	id        string
	admission int
	items     int
}

type storage struct {
	id      BatchID
	members []member
	pending bool // the encoder step has not completed
	views   int  // live views into the storage (set once completed)
	freed   bool
}

// Executor is the step scheduler's state. It is not safe for concurrent use:
// one goroutine (the driver's) owns it.
type Executor struct {
	cfg      Config
	requests map[string]*request
	queue    []string // ENCODER_INIT ids, in submission order
	storages map[BatchID]*storage
	next     BatchID
	pending  int
	counters Counters
}

// New returns an empty Executor for cfg.
func New(cfg Config) *Executor {
	if cfg.MaxBatchRequests <= 0 {
		cfg.MaxBatchRequests = 8
	}
	if cfg.MaxPendingBatches <= 0 {
		cfg.MaxPendingBatches = 1
	}
	return &Executor{cfg: cfg, requests: map[string]*request{}, storages: map[BatchID]*storage{}}
}

// Counters returns the totals since New.
func (x *Executor) Counters() Counters { return x.counters }

// LiveStorages is the number of packed storages holding an encoder output
// not yet freed: completed batches with a live view (the engine's
// encoder.storage.live_batches). Pending batches are not counted.
func (x *Executor) LiveStorages() int {
	n := 0
	for _, s := range x.storages {
		if !s.freed && !s.pending {
			n++
		}
	}
	return n
}

// PendingBatches is the number of batches whose encoder step runs.
func (x *Executor) PendingBatches() int { return x.pending }

// Waiting is the number of members of pending batch b still PENDING in it:
// 0 means nobody waits for its output any more (the driver may stop holding
// its step; the completion then frees it at once).
func (x *Executor) Waiting(b BatchID) int {
	s, ok := x.storages[b]
	if !ok || !s.pending {
		return 0
	}
	n := 0
	for _, m := range s.members {
		if r := x.requests[m.id]; r != nil && r.state == StatePending && r.batch == b && r.admission == m.admission {
			n++
		}
	}
	return n
}

// Queued is the number of requests in ENCODER_INIT.
func (x *Executor) Queued() int { return len(x.queue) }

// StateOf returns id's state and admission (1-based); ok is false for an id
// never submitted or already ended and forgotten.
func (x *Executor) StateOf(id string) (state State, admission int, ok bool) {
	r, ok := x.requests[id]
	if !ok {
		return 0, 0, false
	}
	return r.state, r.admission, true
}

// Live returns the ids of live requests, sorted.
func (x *Executor) Live() []string {
	ids := make([]string, 0, len(x.requests))
	for id := range x.requests {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
