package executor

import "fmt"

// Schedule forms encoder batches while fewer than Config.MaxPendingBatches
// run: up to Config.MaxBatchRequests requests in ENCODER_INIT, in submission
// order, per batch. Each member goes PENDING. It returns one RunEncoder per
// batch formed (none when nothing waits or the encoder is busy).
func (x *Executor) Schedule() []Action {
	var actions []Action
	for x.pending < x.cfg.MaxPendingBatches && len(x.queue) > 0 {
		n := min(len(x.queue), x.cfg.MaxBatchRequests)
		x.next++
		s := &storage{id: x.next, pending: true}
		run := RunEncoder{Batch: s.id}
		for _, id := range x.queue[:n] {
			r := x.requests[id]
			r.state, r.batch = StatePending, s.id
			s.members = append(s.members, member{id: id, admission: r.admission, items: r.items})
			run.Members = append(run.Members, Member{Request: id, Items: r.items})
		}
		x.queue = append(x.queue[:0], x.queue[n:]...)
		x.storages[s.id] = s
		x.pending++
		x.counters.BatchesFormed++
		x.counters.BatchedRequests += uint64(n)
		actions = append(actions, run)
	}
	return actions
}

// EncoderDone publishes batch's output: every member still PENDING in this
// batch (same admission) gets a view and a Ready, in member order; the item
// offset advances past EVERY original member, so a member that ended while
// pending leaves a hole and never shifts a sibling's slice (C-2). With no
// live member left the storage is freed at once (FreeStorage). Errors:
// ErrUnknownBatch (not pending: a duplicate or stray completion, ignored).
func (x *Executor) EncoderDone(batch BatchID) ([]Action, error) {
	s, err := x.completing(batch)
	if err != nil {
		return nil, err
	}
	var actions []Action
	offset := 0
	for _, m := range s.members {
		r := x.requests[m.id]
		live := r != nil && r.state == StatePending && r.batch == s.id && r.admission == m.admission
		if live {
			v := View{Batch: s.id, FirstItem: offset, Items: m.items}
			r.view, r.state = &v, StatePublished
			s.views++
			actions = append(actions, Ready{Request: m.id, View: v})
		}
		if live || !x.cfg.Mutation.ScatterLiveOnly {
			offset += m.items
		}
	}
	if s.views == 0 {
		actions = append(actions, x.free(s)...)
	}
	return actions, nil
}

// EncoderFailed ends every member of batch still PENDING with one Fail
// carrying cause (C-6) and frees the storage. Errors: ErrUnknownBatch.
func (x *Executor) EncoderFailed(batch BatchID, cause error) ([]Action, error) {
	s, err := x.completing(batch)
	if err != nil {
		return nil, err
	}
	var actions []Action
	for _, m := range s.members {
		r := x.requests[m.id]
		if r != nil && r.state == StatePending && r.batch == s.id && r.admission == m.admission {
			r.state = StateFailed
			delete(x.requests, m.id)
			actions = append(actions, Fail{Request: m.id, Cause: cause})
		}
	}
	x.counters.EncoderFailures++
	return append(actions, x.free(s)...), nil
}

func (x *Executor) completing(batch BatchID) (*storage, error) {
	s, ok := x.storages[batch]
	if !ok || !s.pending {
		return nil, fmt.Errorf("%w: %d", ErrUnknownBatch, batch)
	}
	s.pending = false
	x.pending--
	return s, nil
}
