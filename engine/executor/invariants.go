package executor

import "fmt"

// CheckInvariants checks the numbered invariants of the package doc and
// returns the first violation, naming the rule it protects.
func (x *Executor) CheckInvariants() error {
	refs := map[BatchID]int{}
	queued := map[string]bool{}
	for _, id := range x.queue {
		queued[id] = true
	}
	pending := 0
	for _, s := range x.storages {
		if s.pending {
			pending++
		}
	}
	if pending != x.pending {
		return fmt.Errorf("executor: %d storages pending, counted %d", pending, x.pending)
	}
	for _, id := range x.Live() {
		r := x.requests[id]
		if r.state.Terminal() {
			return fmt.Errorf("executor: invariant 3: terminal request %q still live", id)
		}
		if (r.state == StateEncoderInit) != queued[id] {
			return fmt.Errorf("executor: request %q is %s, queued=%v", id, r.state, queued[id])
		}
		if r.view != nil {
			if r.state != StatePublished && r.state != StateContext {
				return fmt.Errorf("executor: invariant 2 (C-3): request %q holds a view in %s", id, r.state)
			}
			if _, ok := x.storages[r.view.Batch]; !ok {
				return fmt.Errorf("executor: invariant 1 (C-3): request %q views storage %d, which was freed", id, r.view.Batch)
			}
			refs[r.view.Batch]++
		}
		if r.consumed > 1 || r.contexts > 1 {
			return fmt.Errorf("executor: invariant 4 (R-1): request %q consumed %d times and computed its context %d times in admission %d", id, r.consumed, r.contexts, r.admission)
		}
		if r.state == StatePending {
			s, ok := x.storages[r.batch]
			if !ok || !s.pending {
				return fmt.Errorf("executor: invariant 5: pending request %q has no pending batch %d", id, r.batch)
			}
		}
	}
	for b, s := range x.storages {
		if s.freed {
			return fmt.Errorf("executor: freed storage %d still listed", b)
		}
		if s.views != refs[b] {
			return fmt.Errorf("executor: invariant 1 (C-3): storage %d counts %d views, %d requests hold one", b, s.views, refs[b])
		}
		if !s.pending && s.views == 0 {
			return fmt.Errorf("executor: invariant 1 (C-3): storage %d has no views and was not freed", b)
		}
	}
	for id := range queued {
		if _, ok := x.requests[id]; !ok {
			return fmt.Errorf("executor: invariant 3: ended request %q still queued", id)
		}
	}
	return nil
}
