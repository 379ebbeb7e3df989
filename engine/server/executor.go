package server

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/engine/encoder"
	"github.com/baton-dev/baton/engine/executor"
	"github.com/baton-dev/baton/engine/lm"
)

// Executor modes (Config.ExecutorMode, --executor-mode).
const (
	// ExecutorAsync runs each batch's encoder step on a goroutine of its
	// own; its completion comes back as an event (the default).
	ExecutorAsync = "async"
	// ExecutorSync runs the encoder step inside the scheduling step, on the
	// goroutine that scheduled it.
	ExecutorSync = "sync"
)

// execDriver carries out the executor core's decisions (engine/executor)
// for the roles that hold encoder outputs: E (the output it publishes),
// aggregated (the output it decodes from), PD and P (the output they
// received). It owns the packed storages: one []float32 per batch, each
// request a view into it. A freed storage is poisoned with NaN before it is
// dropped, as reused device memory would be, so a view used after its free
// (C-3, or a non-idempotent release) gives a visibly wrong answer.
type execDriver struct {
	e    *Engine
	sync bool

	mu       sync.Mutex // guards the fields below; never held across encoding or any I/O
	core     *executor.Ranks
	packs    map[executor.BatchID]*pack
	requests map[string]*execRequest
	seq      uint64
	diverged bool

	steps       sync.WaitGroup // encoder steps in flight; the drain waits for them (S-2)
	encodeNanos atomic.Int64   // time spent inside the encoder, ns (the bookkeeping benchmark)
}

// pack is one batch's packed storage.
type pack struct {
	backing []float32           // every item of the batch, [rows, cols] row-major each, in member order
	items   []encoder.Embedding // one per item, views into backing
	abandon chan struct{}       // closed once no member waits: a held step ends at once
	closed  bool
}

// batchJob is one RunEncoder with what the driver gathered for it while
// the core's decision was fresh (the members' inputs and test hooks).
type batchJob struct {
	run     executor.RunEncoder
	images  []image.Image
	hold    time.Duration
	fail    bool
	abandon chan struct{}
	done    <-chan struct{} // sync mode: the scheduling request's cancellation also ends the hold
}

// execRequest is one request's handle on the executor.
type execRequest struct {
	d            *execDriver
	key          string
	images       []image.Image // encoder inputs, kept for a recompute; nil for a received output
	hold         time.Duration // baton.encoder_delay_ms
	fail         bool          // baton.encoder_fail
	contextHold  time.Duration // baton.context_delay_ms: between PUBLISHED and the first context step
	events       chan execEvent
	batch        executor.BatchID    // the batch it is pending in
	view         []encoder.Embedding // its view after Consume, until release
	lastView     []encoder.Embedding // the view it last released: the core's R-2 mutant recomputes from it (executor.RecomputeFromView)
	ended        bool
	admission    int
	preemptCount int

	// keepAfterReady: the core decided that a cancellation once the output
	// is ready does not end the wait (handoff.StopsOnCancel; the C-3 mutant).
	keepAfterReady bool
}

type execEvent struct {
	view executor.View
	err  error
}

func newExecDriver(e *Engine) *execDriver {
	return &execDriver{
		e:        e,
		sync:     e.cfg.ExecutorMode == ExecutorSync,
		core:     executor.NewRanks(e.cfg.TensorParallel, executor.Config{MaxBatchRequests: e.cfg.MaxBatchRequests, Mutation: e.cfg.Hooks.ExecutorMutation}),
		packs:    map[executor.BatchID]*pack{},
		requests: map[string]*execRequest{},
	}
}

// newRequest makes a request handle with a unique executor key.
func (d *execDriver) newRequest(requestID string, hooks requestHooks, images []image.Image) *execRequest {
	d.seq++
	return &execRequest{
		d: d, key: requestID + "#" + strconv.FormatUint(d.seq, 10), images: images,
		hold: hooks.encoderDelay, fail: hooks.encoderFail, contextHold: hooks.contextDelay,
		events: make(chan execEvent, 1), admission: 1, keepAfterReady: hooks.keepAfterReady,
	}
}

// encode submits images for one request and waits for its output: the
// batch's encoder step, the ready event, then the first context step's
// consumption. It returns the request's view, one embedding per image
// in order, valid until the request's release. Errors: errEncoderFailed
// (C-6), ctx.Err() when the request is cancelled (C-1, C-2, C-3: whatever
// it held is dropped). The caller must call end when the request ends.
func (d *execDriver) encode(ctx context.Context, requestID string, hooks requestHooks, images []image.Image) (*execRequest, []encoder.Embedding, error) {
	d.mu.Lock()
	r := d.newRequest(requestID, hooks, images)
	if err := d.core.Submit(r.key, len(images)); err != nil {
		d.mu.Unlock()
		return nil, nil, fmt.Errorf("server: executor: %w", err)
	}
	d.requests[r.key] = r
	jobs := d.applyLocked(d.core.Schedule())
	d.mu.Unlock()
	d.start(jobs, ctx.Done())
	view, err := r.await(ctx)
	if err != nil {
		r.end()
		return nil, nil, err
	}
	return r, view, nil
}

// adopt gives a consumer's received output (PD, P) to the executor as a
// storage of its own, already PUBLISHED, holds baton.context_delay_ms with
// it unconsumed (a cancellation there drops it: C-3), and consumes it: the
// first context step. The images' data become the storage; release drops it
// (poisoned). Errors: ctx.Err() when cancelled during the hold.
func (d *execDriver) adopt(ctx context.Context, requestID string, hooks requestHooks, received []lm.Image) (*execRequest, error) {
	d.mu.Lock()
	r := d.newRequest(requestID, hooks, nil)
	v, err := d.core.SubmitPublished(r.key, len(received))
	if err != nil {
		d.mu.Unlock()
		return nil, fmt.Errorf("server: executor: %w", err)
	}
	pk := &pack{}
	for _, img := range received {
		pk.items = append(pk.items, encoder.Embedding{Rows: img.Rows, Cols: img.Cols, Data: img.Data})
	}
	d.packs[v.Batch] = pk
	d.requests[r.key] = r
	d.mu.Unlock()
	if r.contextHold > 0 {
		timer := time.NewTimer(r.contextHold)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			r.end()
			return nil, ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.core.Consume(r.key); err != nil {
		return nil, fmt.Errorf("server: executor: %w", err)
	}
	r.view = pk.items
	d.checkLocked()
	return r, nil
}

// await waits for r's ready event (or failure), holds baton.context_delay_ms
// with the output PUBLISHED and unconsumed, then consumes it.
func (r *execRequest) await(ctx context.Context) ([]encoder.Embedding, error) {
	var ev execEvent
	select {
	case ev = <-r.events:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.keepAfterReady {
		ctx = context.WithoutCancel(ctx) // the C-3 mutant: a ready output is kept whatever the client does
	}
	if err := ctx.Err(); err != nil {
		return nil, err // cancelled as the output arrived: never consumed, the caller's end drops it (C-3)
	}
	if ev.err != nil {
		return nil, ev.err
	}
	if r.contextHold > 0 {
		timer := time.NewTimer(r.contextHold)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err() // C-3: the caller's end drops the unconsumed view
		}
	}
	d := r.d
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.core.Consume(r.key)
	if err != nil {
		return nil, fmt.Errorf("server: executor: %w", err)
	}
	pk, ok := d.packs[v.Batch]
	if !ok || len(pk.items) < v.FirstItem+v.Items {
		return nil, fmt.Errorf("server: executor: the storage of batch %d is gone under a live view (C-3)", v.Batch)
	}
	r.view = pk.items[v.FirstItem : v.FirstItem+v.Items]
	d.checkLocked()
	return r.view, nil
}

// contextComputations is how many times the request's context is computed
// from its output in one admission, as the executor core decides
// (executor.Ranks.ContextComputations: once, R-1); 1 for a request
// without an executor handle.
func (r *execRequest) contextComputations() int {
	if r == nil {
		return 1
	}
	return r.d.core.ContextComputations()
}

// contextComputed records one computation of the request's context (the
// cross-attention KV, or the prefill over the image embeddings) from its
// output: once per admission.
func (r *execRequest) contextComputed() {
	if r == nil {
		return
	}
	d := r.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.core.ContextComputed(r.key); err != nil {
		d.e.log.Error("R-1 context computed for a request the executor does not know", "err", err)
	}
	d.checkLocked()
}

// release drops the request's view of its output. Idempotent: the decode
// loop calls it after every token and only the first call drops anything.
func (r *execRequest) release() {
	if r == nil {
		return
	}
	d := r.d
	d.mu.Lock()
	if r.view != nil {
		r.lastView = r.view
	}
	r.view = nil
	jobs := d.applyLocked(d.core.Release(r.key))
	d.checkLocked()
	d.mu.Unlock()
	d.start(jobs)
}

// preempt sends the request back for a new admission and waits for
// its recomputed output: the encoder runs again on the kept inputs. It
// returns the new view, valid until the next release.
func (r *execRequest) preempt(ctx context.Context, mode executor.PreemptMode) ([]encoder.Embedding, error) {
	d := r.d
	d.mu.Lock()
	acts, err := d.core.Preempt(r.key, mode)
	if err != nil {
		d.mu.Unlock()
		return nil, fmt.Errorf("server: executor: %w", err)
	}
	if len(acts) == 1 {
		if _, ok := acts[0].(executor.RecomputeFromView); ok {
			// The core's R-2 mutant (executor.Mutation.RecomputeWithoutEncoder):
			// no re-admission, no encoder step; the recompute reads the view
			// it last released, whose storage was freed after its first
			// context step.
			view := r.lastView
			d.mu.Unlock()
			return view, nil
		}
	}
	r.admission++
	r.preemptCount++
	jobs := d.applyLocked(acts)
	jobs = append(jobs, d.applyLocked(d.core.Schedule())...)
	d.checkLocked()
	d.mu.Unlock()
	d.start(jobs, ctx.Done())
	d.e.log.InfoContext(ctx, "R-2 request preempted; recomputing", "request", r.key, "mode", mode.String(), "admission", r.admission)
	return r.await(ctx)
}

// end ends the request: finished if it got as far as generating, cancelled
// otherwise; whatever view it holds is dropped (C-3). Idempotent.
func (r *execRequest) end() {
	if r == nil {
		return
	}
	d := r.d
	d.mu.Lock()
	if r.ended {
		d.mu.Unlock()
		return
	}
	r.ended = true
	r.view = nil
	delete(d.requests, r.key)
	jobs := d.applyLocked(d.core.Cancel(r.key))
	d.abandonIdleLocked()
	d.checkLocked()
	d.mu.Unlock()
	d.start(jobs)
}

// applyLocked carries out the actions that need no I/O (ready events,
// failures, frees) and returns the encoder steps to start.
func (d *execDriver) applyLocked(actions []executor.Action) []*batchJob {
	var jobs []*batchJob
	for _, a := range actions {
		switch a := a.(type) {
		case executor.RunEncoder:
			jobs = append(jobs, d.gatherLocked(a))
		case executor.Ready:
			if r := d.requests[a.Request]; r != nil {
				r.events <- execEvent{view: a.View}
			}
		case executor.Fail:
			if r := d.requests[a.Request]; r != nil {
				r.events <- execEvent{err: fmt.Errorf("%w: C-6 %v", errEncoderFailed, a.Cause)}
			}
		case executor.FreeStorage:
			if pk := d.packs[a.Batch]; pk != nil {
				poison(pk.backing)
				if pk.backing == nil { // a consumer's received output: no packed backing
					for _, it := range pk.items {
						poison(it.Data)
					}
				}
				delete(d.packs, a.Batch)
			}
		}
	}
	return jobs
}

// poison overwrites freed storage with NaN.
func poison(data []float32) {
	nan := float32(math.NaN())
	for i := range data {
		data[i] = nan
	}
}

// gatherLocked collects a batch's inputs while every member is known.
func (d *execDriver) gatherLocked(run executor.RunEncoder) *batchJob {
	job := &batchJob{run: run, abandon: make(chan struct{})}
	for _, m := range run.Members {
		r := d.requests[m.Request]
		if r == nil {
			continue // cannot happen: members are live when the batch forms
		}
		r.batch = run.Batch
		job.images = append(job.images, r.images...)
		job.hold = max(job.hold, r.hold)
		job.fail = job.fail || r.fail
	}
	d.packs[run.Batch] = &pack{abandon: job.abandon}
	return job
}

// abandonIdleLocked ends the hold of every pending batch nobody waits for.
func (d *execDriver) abandonIdleLocked() {
	for b, pk := range d.packs {
		if pk.abandon != nil && !pk.closed && d.core.Waiting(b) == 0 && pk.backing == nil && pk.items == nil {
			pk.closed = true
			close(pk.abandon)
		}
	}
}

// start runs the encoder steps: in sync mode inline, on the goroutine of
// the request whose call scheduled them (done is its cancellation); in
// async mode each on a goroutine of its own.
func (d *execDriver) start(jobs []*batchJob, done ...<-chan struct{}) {
	for _, job := range jobs {
		d.steps.Add(1)
		if len(done) > 0 {
			job.done = done[0]
		}
		if d.sync {
			d.runStep(job)
		} else {
			go d.runStep(job)
		}
	}
}

// runStep is one encoder step: the batch's hold (baton.encoder_delay_ms,
// ended early once no member waits), the encoder over every member's inputs
// (cancelled members included, so offsets stay put: C-2), packing into one
// storage, then the completion, which may schedule the next batch. In sync
// mode a step never keeps the goroutine of a request that stopped waiting:
// if the scheduling request is cancelled during the hold, the rest of the
// step moves to a goroutine of its own; and the batches the completion
// schedules run on a goroutine of their own, not on the request's, whose
// output is ready (one request never waits behind other requests' steps).
func (d *execDriver) runStep(job *batchJob) {
	if job.hold > 0 {
		until := time.Now().Add(job.hold)
		timer := time.NewTimer(job.hold)
		select {
		case <-timer.C:
		case <-job.abandon:
			timer.Stop()
		case <-job.done:
			timer.Stop()
			// The scheduling request gave up: the others hold on elsewhere.
			job.hold, job.done = time.Until(until), nil
			go d.runStep(job)
			return
		}
	}
	defer d.steps.Done()
	var actions []executor.Action
	var err error
	var embeddings []encoder.Embedding
	switch {
	case job.fail:
		err = fmt.Errorf("injected by test hook %s", HookEncoderFail)
	default:
		start := time.Now()
		embeddings, err = d.e.encoder.Encode(job.images)
		d.encodeNanos.Add(time.Since(start).Nanoseconds())
	}
	d.mu.Lock()
	if err != nil {
		actions, err = d.core.EncoderFailed(job.run.Batch, err)
	} else {
		d.packLocked(job.run.Batch, embeddings)
		actions, err = d.core.EncoderDone(job.run.Batch)
	}
	if err != nil {
		d.e.log.Error("executor completion refused", "batch", job.run.Batch, "err", err)
	}
	jobs := d.applyLocked(actions)
	jobs = append(jobs, d.applyLocked(d.core.Schedule())...)
	d.checkLocked()
	d.mu.Unlock()
	if d.sync && len(jobs) > 0 {
		// The next batches run on a goroutine of their own, not on a
		// ready request's; counted now, so a drain waits for them.
		d.steps.Add(len(jobs))
		go func() {
			for _, job := range jobs {
				d.runStep(job)
			}
		}()
		return
	}
	d.start(jobs)
}

// packLocked copies a batch's embeddings into one packed storage; a batch
// of one item is its own packed storage (no copy: the common single-image
// request pays nothing for the packing).
func (d *execDriver) packLocked(b executor.BatchID, embeddings []encoder.Embedding) {
	pk := d.packs[b]
	if pk == nil {
		pk = &pack{}
		d.packs[b] = pk
	}
	if len(embeddings) == 1 {
		em := embeddings[0]
		pk.backing = em.Data[:len(em.Data):len(em.Data)]
		pk.items = []encoder.Embedding{{Rows: em.Rows, Cols: em.Cols, Data: pk.backing}}
		return
	}
	n := 0
	for _, em := range embeddings {
		n += len(em.Data)
	}
	pk.backing = make([]float32, n)
	pk.items = make([]encoder.Embedding, len(embeddings))
	off := 0
	for i, em := range embeddings {
		copy(pk.backing[off:], em.Data)
		pk.items[i] = encoder.Embedding{Rows: em.Rows, Cols: em.Cols, Data: pk.backing[off : off+len(em.Data) : off+len(em.Data)]}
		off += len(em.Data)
	}
}

// checkLocked turns a tensor-parallel divergence into a sticky failure
// (Health NOT_READY, like X-1), and checks the core's invariants when the
// engine runs with Config.ExecutorInvariants or was built with -tags
// invariants (invariants.go).
func (d *execDriver) checkLocked() {
	if err := d.core.Diverged(); err != nil && !d.diverged {
		d.diverged = true
		go d.e.failCleanup("executor", err)
	}
	if invariantsOn || d.e.cfg.ExecutorInvariants {
		if err := d.core.CheckInvariants(); err != nil && !errors.Is(err, executor.ErrRanksDiverged) {
			panic(fmt.Sprintf("executor invariant broken: %v", err))
		}
	}
}

// observables returns the executor's GetLoad attributes.
func (d *execDriver) observables() map[string]float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.core.Counters()
	diverged := 0.0
	if d.diverged {
		diverged = 1
	}
	return map[string]float64{
		"encoder.storage.live_batches":      float64(d.core.LiveStorages()),
		"executor.batches.pending":          float64(d.core.PendingBatches()),
		"executor.batches.formed":           float64(c.BatchesFormed),
		"executor.batches.requests":         float64(c.BatchedRequests),
		"executor.admissions":               float64(c.Admissions),
		"executor.contexts.computed":        float64(c.ContextsComputed),
		"executor.releases":                 float64(c.Releases),
		"executor.releases.redundant":       float64(c.RedundantReleases),
		"executor.preemptions":              float64(c.Preemptions),
		"executor.storages.freed":           float64(c.StoragesFreed),
		"executor.tensor_parallel":          float64(d.core.Size()),
		"executor.tensor_parallel.diverged": diverged,
	}
}

// drain waits for the encoder steps in flight (their members are gone by
// now, so held steps end at once) and reports storage left behind (S-4).
func (d *execDriver) drain() error {
	d.mu.Lock()
	d.abandonIdleLocked()
	d.mu.Unlock()
	d.steps.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := d.core.LiveStorages() + d.core.PendingBatches(); n != 0 {
		return fmt.Errorf("server: S-4 %d executor storages left after drain", n)
	}
	return nil
}
