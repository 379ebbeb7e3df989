package executor

import "fmt"

// Submit admits request id with items encoder inputs (>= 1) in
// ENCODER_INIT; Schedule puts it in a batch. Errors: ErrBadItems,
// ErrDuplicateRequest (id still live).
func (x *Executor) Submit(id string, items int) error {
	if items < 1 {
		return fmt.Errorf("%w: %d items", ErrBadItems, items)
	}
	if _, ok := x.requests[id]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateRequest, id)
	}
	x.requests[id] = &request{id: id, items: items, state: StateEncoderInit, admission: 1}
	x.queue = append(x.queue, id)
	x.counters.Admissions++
	return nil
}

// SubmitPublished admits request id whose output arrived from elsewhere (a
// consumer's received handoff of items items): it gets a storage of its own
// and is PUBLISHED at once with the returned view. It cannot be preempted
// (ErrCannotRecompute: nothing here could encode it again). Errors:
// ErrBadItems, ErrDuplicateRequest.
func (x *Executor) SubmitPublished(id string, items int) (View, error) {
	if items < 1 {
		return View{}, fmt.Errorf("%w: %d items", ErrBadItems, items)
	}
	if _, ok := x.requests[id]; ok {
		return View{}, fmt.Errorf("%w: %q", ErrDuplicateRequest, id)
	}
	x.next++
	s := &storage{id: x.next, members: []member{{id: id, admission: 1, items: items}}, views: 1}
	x.storages[s.id] = s
	v := View{Batch: s.id, FirstItem: 0, Items: items}
	x.requests[id] = &request{id: id, state: StatePublished, admission: 1, batch: s.id, view: &v}
	x.counters.Admissions++
	return v, nil
}

// Consume is the first context step taking id's PUBLISHED output, once per
// admission: the request moves to CONTEXT and keeps its view until
// Release, so the driver reads the data first. Errors: ErrUnknownRequest,
// ErrNotPublished (not ready, already consumed, or ended).
func (x *Executor) Consume(id string) (View, error) {
	r, ok := x.requests[id]
	if !ok {
		return View{}, fmt.Errorf("%w: %q", ErrUnknownRequest, id)
	}
	if r.state != StatePublished || r.view == nil {
		return View{}, fmt.Errorf("%w: %q is %s", ErrNotPublished, id, r.state)
	}
	r.state = StateContext
	r.consumed++
	r.lastView = *r.view
	return *r.view, nil
}

// ContextComputations is how many times the driver computes a request's
// context (the cross-attention KV, or the prefill over the image
// embeddings) from the output it consumed, in one admission, calling
// ContextComputed after each: 1. Under Mutation.ContextTwice, 2.
func (x *Executor) ContextComputations() int {
	if x.cfg.Mutation.ContextTwice {
		return 2 // the R-1 mutant
	}
	return 1
}

// ContextComputed records that the driver computed id's cross-attention KV
// (or, for a decoder-only model, its prefill over the image embeddings) from
// the consumed output. The contract's driver calls it exactly once per
// admission; CheckInvariants reports a second call. Errors:
// ErrUnknownRequest.
func (x *Executor) ContextComputed(id string) error {
	r, ok := x.requests[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownRequest, id)
	}
	r.contexts++
	x.counters.ContextsComputed++
	return nil
}

// Release drops id's view of its output, if it holds one, and moves a
// CONTEXT request to GENERATION. It is idempotent: a decode loop that
// releases after every step drops the view once, and every later call is
// counted in RedundantReleases. An unknown id is a redundant release too.
// The returned FreeStorage comes when the view was the storage's last.
func (x *Executor) Release(id string) []Action {
	r, ok := x.requests[id]
	if !ok {
		x.counters.RedundantReleases++
		return nil
	}
	if r.view == nil {
		x.counters.RedundantReleases++
		if x.cfg.Mutation.ReleaseEveryCall && r.batch != 0 {
			return x.unref(r.batch)
		}
		return nil
	}
	if r.state == StatePublished || r.state == StateContext {
		r.state = StateGeneration
	}
	x.counters.Releases++
	return x.dropView(r)
}

// Preempt sends id, in CONTEXT or GENERATION, back to ENCODER_INIT as a new
// admission: its view is dropped if still held, Schedule batches it
// again, and the driver recomputes in mode, through the encoder. Under
// Mutation.RecomputeWithoutEncoder it answers RecomputeFromView alone and
// changes nothing. Errors: ErrUnknownRequest, ErrNotGenerating,
// ErrCannotRecompute.
func (x *Executor) Preempt(id string, mode PreemptMode) ([]Action, error) {
	r, ok := x.requests[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownRequest, id)
	}
	if r.state != StateGeneration && r.state != StateContext {
		return nil, fmt.Errorf("%w: %q is %s", ErrNotGenerating, id, r.state)
	}
	if r.items == 0 {
		return nil, fmt.Errorf("%w: %q", ErrCannotRecompute, id)
	}
	if x.cfg.Mutation.RecomputeWithoutEncoder {
		return []Action{RecomputeFromView{Request: id, View: r.lastView}}, nil // the R-2 mutant
	}
	actions := x.dropView(r)
	r.state, r.batch, r.consumed, r.contexts, r.preempt = StateEncoderInit, 0, 0, 0, mode
	r.admission++
	x.queue = append(x.queue, id)
	x.counters.Admissions++
	x.counters.Preemptions++
	return actions, nil
}

// Finish ends id normally (FINISHED). Cancel ends it by cancellation
// (CANCELLED); before Submit it does nothing and allocates nothing (C-1).
// Either drops a view still held, so a request that ends before its first
// context step frees its share of the storage (C-3); a PENDING request
// leaves its batch running and the completion ignores it (C-2). Both are
// idempotent.
func (x *Executor) Finish(id string) []Action { return x.end(id, StateFinished) }

// Cancel: see Finish.
func (x *Executor) Cancel(id string) []Action { return x.end(id, StateCancelled) }

func (x *Executor) end(id string, final State) []Action {
	r, ok := x.requests[id]
	if !ok {
		return nil
	}
	var actions []Action
	if r.state == StateEncoderInit {
		x.unqueue(id)
	}
	if !(x.cfg.Mutation.KeepViewOnEnd && r.state == StatePublished) {
		actions = x.dropView(r)
	}
	r.state = final
	delete(x.requests, id)
	return actions
}

func (x *Executor) unqueue(id string) {
	for i, q := range x.queue {
		if q == id {
			x.queue = append(x.queue[:i], x.queue[i+1:]...)
			return
		}
	}
}

// dropView drops r's view, freeing the storage after its last view.
func (x *Executor) dropView(r *request) []Action {
	if r.view == nil {
		return nil
	}
	b := r.view.Batch
	r.view = nil
	return x.unref(b)
}

func (x *Executor) unref(b BatchID) []Action {
	s, ok := x.storages[b]
	if !ok || s.freed {
		return nil
	}
	s.views--
	if s.views > 0 || s.pending {
		return nil
	}
	return x.free(s)
}

func (x *Executor) free(s *storage) []Action {
	s.freed = true
	delete(x.storages, s.id)
	x.counters.StoragesFreed++
	return []Action{FreeStorage{Batch: s.id}}
}
