package executor

import (
	"errors"
	"fmt"
	"reflect"
)

// ErrRanksDiverged: two tensor-parallel ranks made different handoff
// decisions for the same schedule.
var ErrRanksDiverged = errors.New("executor: tensor-parallel ranks diverged")

// Ranks is simulated tensor parallelism (--tp N): N replicas of the
// executor, one per rank, fed the same events in the same order. Every call
// goes to every rank and their answers (actions, views, errors) are
// compared; the first difference is kept in Diverged and rank 0's answer is
// returned. Real tensor-parallel engines take every scheduling decision on
// each rank and must agree, or the ranks' collectives deadlock or mix
// requests.
type Ranks struct {
	ranks    []*Executor
	diverged error
}

// NewRanks returns n (>= 1) replicas of New(cfg).
func NewRanks(n int, cfg Config) *Ranks {
	rs := &Ranks{}
	for range max(n, 1) {
		rs.ranks = append(rs.ranks, New(cfg))
	}
	return rs
}

// Size is the number of ranks.
func (rs *Ranks) Size() int { return len(rs.ranks) }

// Rank returns rank i's executor (read-only use: counters, invariants).
func (rs *Ranks) Rank(i int) *Executor { return rs.ranks[i] }

// Diverged returns the first divergence seen (wrapping ErrRanksDiverged), or nil.
func (rs *Ranks) Diverged() error { return rs.diverged }

// CheckInvariants checks every rank's invariants and that no rank diverged.
func (rs *Ranks) CheckInvariants() error {
	if rs.diverged != nil {
		return rs.diverged
	}
	for i, x := range rs.ranks {
		if err := x.CheckInvariants(); err != nil {
			return fmt.Errorf("rank %d: %w", i, err)
		}
	}
	return nil
}

type answer struct {
	actions []Action
	view    View
	err     error
}

// on runs f on every rank and compares the answers with rank 0's.
func (rs *Ranks) on(call string, f func(*Executor) answer) answer {
	first := f(rs.ranks[0])
	for i, x := range rs.ranks[1:] {
		got := f(x)
		same := reflect.DeepEqual(first.actions, got.actions) && first.view == got.view && fmt.Sprint(first.err) == fmt.Sprint(got.err)
		if !same && rs.diverged == nil {
			rs.diverged = fmt.Errorf("%w: %s: rank 0 = %v %v %v, rank %d = %v %v %v", ErrRanksDiverged, call,
				first.actions, first.view, first.err, i+1, got.actions, got.view, got.err)
		}
	}
	return first
}

// Submit: see Executor.Submit.
func (rs *Ranks) Submit(id string, items int) error {
	return rs.on("Submit", func(x *Executor) answer { return answer{err: x.Submit(id, items)} }).err
}

// SubmitPublished: see Executor.SubmitPublished.
func (rs *Ranks) SubmitPublished(id string, items int) (View, error) {
	a := rs.on("SubmitPublished", func(x *Executor) answer { v, err := x.SubmitPublished(id, items); return answer{view: v, err: err} })
	return a.view, a.err
}

// Schedule: see Executor.Schedule.
func (rs *Ranks) Schedule() []Action {
	return rs.on("Schedule", func(x *Executor) answer { return answer{actions: x.Schedule()} }).actions
}

// EncoderDone: see Executor.EncoderDone.
func (rs *Ranks) EncoderDone(b BatchID) ([]Action, error) {
	a := rs.on("EncoderDone", func(x *Executor) answer { acts, err := x.EncoderDone(b); return answer{actions: acts, err: err} })
	return a.actions, a.err
}

// EncoderFailed: see Executor.EncoderFailed.
func (rs *Ranks) EncoderFailed(b BatchID, cause error) ([]Action, error) {
	a := rs.on("EncoderFailed", func(x *Executor) answer {
		acts, err := x.EncoderFailed(b, cause)
		return answer{actions: acts, err: err}
	})
	return a.actions, a.err
}

// Consume: see Executor.Consume.
func (rs *Ranks) Consume(id string) (View, error) {
	a := rs.on("Consume", func(x *Executor) answer { v, err := x.Consume(id); return answer{view: v, err: err} })
	return a.view, a.err
}

// ContextComputed: see Executor.ContextComputed.
func (rs *Ranks) ContextComputed(id string) error {
	return rs.on("ContextComputed", func(x *Executor) answer { return answer{err: x.ContextComputed(id)} }).err
}

// ContextComputations: see Executor.ContextComputations (every rank runs
// one configuration).
func (rs *Ranks) ContextComputations() int { return rs.ranks[0].ContextComputations() }

// Release: see Executor.Release.
func (rs *Ranks) Release(id string) []Action {
	return rs.on("Release", func(x *Executor) answer { return answer{actions: x.Release(id)} }).actions
}

// Preempt: see Executor.Preempt.
func (rs *Ranks) Preempt(id string, mode PreemptMode) ([]Action, error) {
	a := rs.on("Preempt", func(x *Executor) answer { acts, err := x.Preempt(id, mode); return answer{actions: acts, err: err} })
	return a.actions, a.err
}

// Finish: see Executor.Finish.
func (rs *Ranks) Finish(id string) []Action {
	return rs.on("Finish", func(x *Executor) answer { return answer{actions: x.Finish(id)} }).actions
}

// Cancel: see Executor.Cancel.
func (rs *Ranks) Cancel(id string) []Action {
	return rs.on("Cancel", func(x *Executor) answer { return answer{actions: x.Cancel(id)} }).actions
}

// Counters returns rank 0's counters.
func (rs *Ranks) Counters() Counters { return rs.ranks[0].Counters() }

// LiveStorages returns rank 0's live storages.
func (rs *Ranks) LiveStorages() int { return rs.ranks[0].LiveStorages() }

// Queued returns rank 0's queue length.
func (rs *Ranks) Queued() int { return rs.ranks[0].Queued() }

// PendingBatches returns rank 0's pending batches.
func (rs *Ranks) PendingBatches() int { return rs.ranks[0].PendingBatches() }

// Waiting returns rank 0's Waiting(b).
func (rs *Ranks) Waiting(b BatchID) int { return rs.ranks[0].Waiting(b) }
