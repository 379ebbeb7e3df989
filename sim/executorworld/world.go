// Package executorworld is the simulator of the in-engine encoder ->
// decoder handoff around the real executor core (engine/executor): the
// second world of `baton sim` (`baton sim executor`), beside package sim's
// handoff world, drawing from the same seeded streams (sim/internal/seeded).
package executorworld

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/baton-dev/baton/engine/executor"
	"github.com/baton-dev/baton/sim/internal/seeded"
)

// The executor world simulates the in-engine encoder -> decoder handoff
// (CONTRACT section 2, "Inside one engine") around the real executor core
// (engine/executor): the core decides (Submit, Schedule, EncoderDone,
// EncoderFailed and the actions they return) and the world carries its
// actions out (carry), as any driver of the core does: requests arrive,
// batches form, encoder steps complete asynchronously in an order the
// seed chooses (or fail), the first context step consumes each output and
// computes the request's context from its view, decode steps release again
// and again, requests are preempted and recomputed, and clients
// cancel at every step boundary.
//
// Numerics are a cheap deterministic stand-in: item i of request r encodes
// to encoderOutputWidth words drawn from (r's input seed, i); a freed
// storage is overwritten with poison, so a view read after its free, or a
// slice shifted to a sibling, changes the request's tokens.
//
// Checkers: the core's invariants after every step, on every rank when
// Ranks > 1 (tensor parallelism: every rank must take the same decisions);
// at the end nothing left (no live request, storage, pending batch); and
// the C-2 property: every request that finished in the run with
// cancellations produced exactly the tokens it produces in the same seed's
// run without them.

// Settings are one executor run's parameters, drawn per seed.
type Settings struct {
	Requests          int     // requests submitted in all
	MaxBatchRequests  int     // executor.Config.MaxBatchRequests
	MaxPendingBatches int     // executor.Config.MaxPendingBatches
	Ranks             int     // tensor-parallel ranks (1 or 2)
	CancelRate        float64 // per step: a live request is cancelled (cancellation runs only)
	PreemptRate       float64 // per step: a generating request is preempted
	FailRate          float64 // per completion: the encoder step fails (C-6)
	Tokens            int     // decode steps of a request
}

// encoderOutputWidth is the words one item encodes to.
const encoderOutputWidth = 4

// poison overwrites a freed storage.
const poison uint64 = 0xdeadbeefdeadbeef

// DrawSettings draws the settings of seed.
func DrawSettings(seed uint64) Settings {
	r := seeded.New(seed, seeded.Settings)
	return Settings{
		Requests:          int(seeded.Between(r, 2, 24)),
		MaxBatchRequests:  int(seeded.Between(r, 1, 6)),
		MaxPendingBatches: int(seeded.Between(r, 1, 3)),
		Ranks:             int(seeded.Between(r, 1, 2)),
		CancelRate:        float64(seeded.Between(r, 0, 30)) / 100,
		PreemptRate:       float64(seeded.Between(r, 0, 10)) / 100,
		FailRate:          float64(seeded.Between(r, 0, 15)) / 100,
		Tokens:            int(seeded.Between(r, 1, 8)),
	}
}

func (s Settings) String() string {
	return fmt.Sprintf("requests=%d max_batch=%d max_pending=%d ranks=%d cancel_rate=%.2f preempt_rate=%.2f fail_rate=%.2f tokens=%d",
		s.Requests, s.MaxBatchRequests, s.MaxPendingBatches, s.Ranks, s.CancelRate, s.PreemptRate, s.FailRate, s.Tokens)
}

// Result is one seed's outcome: Err is nil when every checker passed.
type Result struct {
	Seed     uint64
	Settings Settings
	Steps    int // scheduler steps of the run with cancellations
	Err      error
}

// ReplayCommand is the command that re-runs this seed.
func (r Result) ReplayCommand(mutation string) string {
	cmd := fmt.Sprintf("baton sim executor --seed %d", r.Seed)
	if mutation != "" {
		cmd += " --mutation " + mutation
	}
	return cmd
}

// Mutation is one deliberately broken decision of the executor
// world: a decision of the executor core (Core, engine/executor's
// Mutation), which the world's driver carries out as the reference
// engine's does (the context computed twice, ContextComputations, R-1; a
// recompute without the encoder, RecomputeFromView, R-2). The zero value
// is the correct world.
type Mutation struct {
	// Core breaks a decision of the executor core.
	Core executor.Mutation
}

// Mutations are the executor world's deliberately broken
// decisions, by the name `baton sim executor --mutation` takes.
func Mutations() map[string]Mutation {
	return map[string]Mutation{
		"c2-scatter-shifts-siblings": {Core: executor.Mutation{ScatterLiveOnly: true}},
		"c3-view-kept-after-end":     {Core: executor.Mutation{KeepViewOnEnd: true}},
		"c3-release-every-step":      {Core: executor.Mutation{ReleaseEveryCall: true}},
		"r1-context-computed-twice":  {Core: executor.Mutation{ContextTwice: true}},
		"r2-recompute-skips-encoder": {Core: executor.Mutation{RecomputeWithoutEncoder: true}},
	}
}

// RunSeed runs seed twice (with and without cancellations) with
// mutation m and checks both.
func RunSeed(seed uint64, m Mutation) Result {
	s := DrawSettings(seed)
	res := Result{Seed: seed, Settings: s}
	with := runExecutorWorld(seed, s, m, true)
	res.Steps = with.steps
	if with.err != nil {
		res.Err = with.err
		return res
	}
	without := runExecutorWorld(seed, s, m, false)
	if without.err != nil {
		res.Err = fmt.Errorf("the run without cancellations: %w", without.err)
		return res
	}
	for _, id := range sortedKeys(with.tokens) {
		want, ok := without.tokens[id]
		if !ok {
			continue // failed (C-6) in the other run: its batch differed
		}
		if !slices.Equal(with.tokens[id], want) {
			res.Err = fmt.Errorf("C-2 request %s finished with tokens %x; the same seed without cancellations gives %x (a cancellation changed a sibling's output)", id, with.tokens[id], want)
			return res
		}
	}
	return res
}

// Explore runs seeds [from, to] and returns the failing results, in
// seed order, and the number run.
func Explore(from, to uint64, m Mutation) (failures []Result, ran int) {
	for seed := from; seed <= to; seed++ {
		ran++
		if r := RunSeed(seed, m); r.Err != nil {
			failures = append(failures, r)
		}
		if seed == to {
			break
		}
	}
	return failures, ran
}

// simRequest is one client request of the executor world.
type simRequest struct {
	id        string
	items     int
	input     uint64 // seeds its encoder output
	arrivesAt int    // step of its Submit
	context   uint64 // computed by its first context step
	hasCtx    bool
	decided   []uint64
	emitted   int
	state     string // "waiting", "queued", "published", "generating", "done"
}

type simRun struct {
	tokens map[string][]uint64 // finished requests' tokens
	steps  int
	err    error
}

// executorWorld is one run.
type executorWorld struct {
	s        Settings
	cancel   bool
	mut      Mutation // the world driver's broken decision, if any
	ranks    *executor.Ranks
	work     *rand.Rand // workload: arrivals, inputs
	order    *rand.Rand // interleaving: which enabled action runs
	faults   *rand.Rand // cancellations, preemptions, failures
	reqs     []*simRequest
	byID     map[string]*simRequest
	pending  []executor.BatchID
	members  map[executor.BatchID][]executor.Member
	storages map[executor.BatchID][]uint64
	freed    map[executor.BatchID][]uint64 // freed storages, poisoned: what a read after the free sees
	views    map[string]executor.View      // a request's view after Ready
	tokens   map[string][]uint64
	step     int
}

func runExecutorWorld(seed uint64, s Settings, m Mutation, cancellations bool) (out simRun) {
	w := &executorWorld{
		s: s, cancel: cancellations, mut: m,
		ranks: executor.NewRanks(s.Ranks, executor.Config{MaxBatchRequests: s.MaxBatchRequests, MaxPendingBatches: s.MaxPendingBatches, Mutation: m.Core}),
		work:  seeded.New(seed, seeded.Workload), order: seeded.New(seed, seeded.Network), faults: seeded.New(seed, seeded.Faults),
		byID: map[string]*simRequest{}, members: map[executor.BatchID][]executor.Member{}, storages: map[executor.BatchID][]uint64{},
		freed: map[executor.BatchID][]uint64{}, views: map[string]executor.View{}, tokens: map[string][]uint64{},
	}
	defer func() {
		if p := recover(); p != nil {
			out = simRun{steps: w.step, err: fmt.Errorf("crash at step %d: %v", w.step, p)}
		}
	}()
	for i := range s.Requests {
		r := &simRequest{id: fmt.Sprintf("r%02d", i), items: int(seeded.Between(w.work, 1, 3)), input: w.work.Uint64(), arrivesAt: int(seeded.Between(w.work, 0, int64(4*s.Requests))), state: "waiting"}
		w.reqs = append(w.reqs, r)
		w.byID[r.id] = r
	}
	// Safety phase: everything may happen; liveness phase: no new
	// cancellations, preemptions or failures, and the world must drain.
	const safetySteps, stepBudget = 400, 4000
	for w.step = 0; w.step < stepBudget; w.step++ {
		safety := w.step < safetySteps
		if !w.act(safety) && !safety {
			break // nothing enabled: drained
		}
		if err := w.ranks.CheckInvariants(); err != nil {
			return simRun{steps: w.step, err: err}
		}
	}
	if err := w.endCheck(); err != nil {
		return simRun{steps: w.step, err: err}
	}
	return simRun{tokens: w.tokens, steps: w.step}
}

// act runs one enabled action chosen by the seed; false when none was enabled.
func (w *executorWorld) act(safety bool) bool {
	type action struct {
		name string
		do   func() error
	}
	var enabled []action
	for _, r := range w.reqs {
		r := r
		switch r.state {
		case "waiting":
			if w.step >= r.arrivesAt || !safety {
				enabled = append(enabled, action{"submit " + r.id, func() error { return w.submit(r) }})
			}
		case "published":
			enabled = append(enabled, action{"context " + r.id, func() error { return w.context(r) }})
		case "generating":
			enabled = append(enabled, action{"decode " + r.id, func() error { return w.decode(r, safety) }})
		}
		if safety && w.cancel && r.state != "waiting" && r.state != "done" && seeded.Chance(w.faults, w.s.CancelRate/float64(len(w.reqs))) {
			enabled = append(enabled, action{"cancel " + r.id, func() error { return w.end(r, false) }})
		}
	}
	if w.ranks.Queued() > 0 {
		enabled = append(enabled, action{"schedule", func() error { w.schedule(); return nil }})
	}
	for i := range w.pending {
		i := i
		enabled = append(enabled, action{fmt.Sprintf("complete batch %d", w.pending[i]), func() error { return w.complete(i, safety) }})
	}
	if len(enabled) == 0 {
		return false
	}
	a := enabled[w.order.IntN(len(enabled))]
	if err := a.do(); err != nil {
		panic(fmt.Sprintf("%s: %v", a.name, err))
	}
	return true
}

func (w *executorWorld) submit(r *simRequest) error {
	if err := w.ranks.Submit(r.id, r.items); err != nil {
		return err
	}
	r.state = "queued"
	return nil
}

func (w *executorWorld) schedule() {
	w.carry(w.ranks.Schedule())
}

// carry applies the core's actions to the world.
func (w *executorWorld) carry(actions []executor.Action) {
	for _, a := range actions {
		switch a := a.(type) {
		case executor.RunEncoder:
			w.pending = append(w.pending, a.Batch)
			w.members[a.Batch] = a.Members
		case executor.Ready:
			r := w.byID[a.Request]
			r.state = "published"
			w.views[r.id] = a.View
		case executor.Fail:
			w.byID[a.Request].state = "done" // C-6: one terminal error, no tokens
			delete(w.views, a.Request)
		case executor.FreeStorage:
			st := w.storages[a.Batch]
			for i := range st {
				st[i] = poison
			}
			w.freed[a.Batch] = st
			delete(w.storages, a.Batch)
		}
	}
}

// complete finishes pending batch i: the encoder's output for every
// original member (cancelled ones included), or a failure.
func (w *executorWorld) complete(i int, safety bool) error {
	b := w.pending[i]
	w.pending = append(w.pending[:i], w.pending[i+1:]...)
	if safety && seeded.Chance(w.faults, w.s.FailRate) {
		acts, err := w.ranks.EncoderFailed(b, errors.New("simulated encoder failure"))
		w.carry(acts)
		return err
	}
	var out []uint64
	for _, m := range w.members[b] {
		r := w.byID[m.Request]
		for item := range m.Items {
			for word := range encoderOutputWidth {
				out = append(out, seeded.Mix64(r.input^uint64(item)<<32^uint64(word)))
			}
		}
	}
	delete(w.members, b)
	w.storages[b] = out
	acts, err := w.ranks.EncoderDone(b)
	w.carry(acts)
	return err
}

// context is the first context step: consume the view, compute the
// request's context from the storage, release.
func (w *executorWorld) context(r *simRequest) error {
	v, err := w.ranks.Consume(r.id)
	if err != nil {
		return err
	}
	st, ok := w.storages[v.Batch]
	if !ok {
		return fmt.Errorf("C-3 the storage of batch %d is gone under %s's live view", v.Batch, r.id)
	}
	// As many computations as the core says: once; twice under its
	// ContextTwice mutant.
	var ctx uint64
	for i := 0; i < w.ranks.ContextComputations(); i++ {
		ctx = contextOf(st, v)
		if err := w.ranks.ContextComputed(r.id); err != nil {
			return err
		}
	}
	w.carry(w.ranks.Release(r.id))
	delete(w.views, r.id)
	return w.contextDone(r, ctx)
}

// contextDone ends a context step that computed ctx: a recompute must give
// the context the request had (R-2: token-identical output).
func (w *executorWorld) contextDone(r *simRequest, ctx uint64) error {
	if r.hasCtx && ctx != r.context {
		return fmt.Errorf("R-2 %s recomputed context %x, before %x", r.id, ctx, r.context)
	}
	r.context, r.hasCtx, r.state = ctx, true, "generating"
	return nil
}

// contextOf is the stand-in context computation over view v of storage st.
func contextOf(st []uint64, v executor.View) uint64 {
	words := st[v.FirstItem*encoderOutputWidth : (v.FirstItem+v.Items)*encoderOutputWidth]
	ctx := uint64(v.Items)
	for _, x := range words {
		ctx = seeded.Mix64(ctx ^ x)
	}
	return ctx
}

// recomputeFromView carries out the core's R-2 mutant's answer to a
// Preempt (executor.RecomputeFromView, Mutation.RecomputeWithoutEncoder):
// no re-admission, no encoder step; the context is recomputed from view v,
// the one the request last consumed, reading its storage whether or not it
// was freed since, and recorded with the core again.
func (w *executorWorld) recomputeFromView(r *simRequest, v executor.View) error {
	st, ok := w.storages[v.Batch]
	if !ok {
		st = w.freed[v.Batch] // freed and poisoned: what the engine reads from a freed pack
	}
	ctx := contextOf(st, v)
	if err := w.contextDone(r, ctx); err != nil {
		return err
	}
	return w.ranks.ContextComputed(r.id)
}

// decode is one decode step: a token from the context and the tokens so
// far, a redundant release (idempotent), a preemption sometimes, the end
// after Settings.Tokens.
func (w *executorWorld) decode(r *simRequest, safety bool) error {
	w.carry(w.ranks.Release(r.id))
	if safety && seeded.Chance(w.faults, w.s.PreemptRate) {
		acts, err := w.ranks.Preempt(r.id, executor.PreemptMode(1+w.faults.IntN(2)))
		if err != nil {
			return err
		}
		if len(acts) == 1 {
			if rv, ok := acts[0].(executor.RecomputeFromView); ok {
				return w.recomputeFromView(r, rv.View) // the core's R-2 mutant
			}
		}
		w.carry(acts)
		r.state = "queued"
		return nil
	}
	tok := seeded.Mix64(r.context ^ uint64(len(r.decided))<<40)
	r.decided = append(r.decided, tok)
	if len(r.decided) >= w.s.Tokens {
		w.tokens[r.id] = r.decided
		return w.end(r, true)
	}
	return nil
}

func (w *executorWorld) end(r *simRequest, finished bool) error {
	if finished {
		w.carry(w.ranks.Finish(r.id))
	} else {
		w.carry(w.ranks.Cancel(r.id))
	}
	r.state = "done"
	delete(w.views, r.id)
	return nil
}

// endCheck: after the liveness phase every request ended and nothing is left.
func (w *executorWorld) endCheck() error {
	var open []string
	for _, r := range w.reqs {
		if r.state != "done" {
			open = append(open, r.id+":"+r.state)
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("liveness: requests still open after the liveness phase: %s", strings.Join(open, " "))
	}
	if c := w.ranks.Counters(); c.ContextsComputed > c.Admissions {
		return fmt.Errorf("R-1 the core counted %d context computations for %d admissions (at most one per admission)", c.ContextsComputed, c.Admissions)
	}
	if n, p, q := w.ranks.LiveStorages(), w.ranks.PendingBatches(), w.ranks.Queued(); n+p+q != 0 {
		return fmt.Errorf("C-3/S-4 after every request ended: %d live storages, %d pending batches, %d queued", n, p, q)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
