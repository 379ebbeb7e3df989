package executor

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// readyViews collects the Ready actions by request.
func readyViews(t *testing.T, actions []Action) map[string]View {
	t.Helper()
	out := map[string]View{}
	for _, a := range actions {
		if r, ok := a.(Ready); ok {
			out[r.Request] = r.View
		}
	}
	return out
}

func frees(actions []Action) int {
	n := 0
	for _, a := range actions {
		if _, ok := a.(FreeStorage); ok {
			n++
		}
	}
	return n
}

func mustInvariants(t *testing.T, x *Executor) {
	t.Helper()
	if err := x.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// batchOf submits ids (items each) and forms one batch.
func batchOf(t *testing.T, x *Executor, items int, ids ...string) RunEncoder {
	t.Helper()
	for _, id := range ids {
		if err := x.Submit(id, items); err != nil {
			t.Fatal(err)
		}
	}
	acts := x.Schedule()
	if len(acts) != 1 {
		t.Fatalf("Schedule() = %v; want one RunEncoder", acts)
	}
	return acts[0].(RunEncoder)
}

func TestC2LateCompletionKeepsSiblingOffsets(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mutation Mutation
		wantC    int
	}{
		{"contract", Mutation{}, 4},
		{"mutant scatter-live-only", Mutation{ScatterLiveOnly: true}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := New(Config{Mutation: tc.mutation})
			run := batchOf(t, x, 2, "a", "b", "c")
			if !reflect.DeepEqual(run.Members, []Member{{"a", 2}, {"b", 2}, {"c", 2}}) {
				t.Fatalf("RunEncoder.Members = %v", run.Members)
			}
			x.Cancel("b") // while pending
			acts, err := x.EncoderDone(run.Batch)
			if err != nil {
				t.Fatal(err)
			}
			views := readyViews(t, acts)
			if _, ok := views["b"]; ok {
				t.Errorf("C-2 EncoderDone revived cancelled request b: %v", acts)
			}
			if views["a"].FirstItem != 0 || views["c"].FirstItem != tc.wantC {
				t.Errorf("C-2 views = %v; want a at item 0, c at item %d", views, tc.wantC)
			}
			mustInvariants(t, x)
		})
	}
}

func TestC3StorageFreedWithLastView(t *testing.T) {
	x := New(Config{})
	run := batchOf(t, x, 1, "a", "b")
	if _, err := x.EncoderDone(run.Batch); err != nil {
		t.Fatal(err)
	}
	if x.LiveStorages() != 1 {
		t.Fatalf("LiveStorages = %d; want 1", x.LiveStorages())
	}
	if acts := x.Cancel("a"); frees(acts) != 0 {
		t.Errorf("C-3 Cancel(a) freed the storage b still views: %v", acts)
	}
	if _, err := x.Consume("b"); err != nil {
		t.Fatal(err)
	}
	if acts := x.Release("b"); frees(acts) != 1 {
		t.Errorf("C-3 Release(b), the last view = %v; want FreeStorage", acts)
	}
	if x.LiveStorages() != 0 {
		t.Errorf("LiveStorages = %d; want 0", x.LiveStorages())
	}
	mustInvariants(t, x)
}

func TestC3KeepViewMutantBreaksInvariant(t *testing.T) {
	x := New(Config{Mutation: Mutation{KeepViewOnEnd: true}})
	run := batchOf(t, x, 1, "a")
	if _, err := x.EncoderDone(run.Batch); err != nil {
		t.Fatal(err)
	}
	x.Cancel("a")
	if x.LiveStorages() != 1 {
		t.Fatalf("mutant LiveStorages = %d; want the storage kept", x.LiveStorages())
	}
	if err := x.CheckInvariants(); err == nil {
		t.Fatal("CheckInvariants passed an unreferenced storage")
	}
}

func TestReleaseIsIdempotentAndCounted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutation  Mutation
		wantFreed bool // the storage freed while b still views it
	}{
		{"contract", Mutation{}, false},
		{"mutant release-every-call", Mutation{ReleaseEveryCall: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := New(Config{Mutation: tc.mutation})
			run := batchOf(t, x, 1, "a", "b")
			if _, err := x.EncoderDone(run.Batch); err != nil {
				t.Fatal(err)
			}
			if _, err := x.Consume("a"); err != nil {
				t.Fatal(err)
			}
			freed := 0
			for range 5 { // a decode loop releasing after every step
				freed += frees(x.Release("a"))
			}
			if got := freed > 0; got != tc.wantFreed {
				t.Errorf("five Release(a) with b still viewing freed the storage: %v; want %v", got, tc.wantFreed)
			}
			c := x.Counters()
			if c.Releases != 1 || c.RedundantReleases != 4 {
				t.Errorf("Counters = %+v; want Releases 1, RedundantReleases 4", c)
			}
			if err := x.CheckInvariants(); (err != nil) != tc.wantFreed {
				t.Errorf("CheckInvariants() = %v; want error %v", err, tc.wantFreed)
			}
		})
	}
}

func TestC6EncoderFailureEndsPendingMembers(t *testing.T) {
	x := New(Config{})
	run := batchOf(t, x, 1, "a", "b", "c")
	x.Cancel("b")
	cause := errors.New("boom")
	acts, err := x.EncoderFailed(run.Batch, cause)
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, a := range acts {
		if f, ok := a.(Fail); ok {
			failed = append(failed, f.Request)
		}
	}
	if !reflect.DeepEqual(failed, []string{"a", "c"}) || frees(acts) != 1 {
		t.Errorf("C-6 EncoderFailed = %v; want Fail a, Fail c, FreeStorage", acts)
	}
	if _, _, ok := x.StateOf("a"); ok || len(x.Live()) != 0 || x.LiveStorages() != 0 {
		t.Errorf("after the failure: live %v, storages %d; want none", x.Live(), x.LiveStorages())
	}
	if _, err := x.EncoderDone(run.Batch); !errors.Is(err, ErrUnknownBatch) {
		t.Errorf("a second completion = %v; want ErrUnknownBatch", err)
	}
	mustInvariants(t, x)
}

func TestC1CancelBeforeSubmitAllocatesNothing(t *testing.T) {
	x := New(Config{})
	if acts := x.Cancel("never"); acts != nil {
		t.Errorf("Cancel before Submit = %v", acts)
	}
	if acts := x.Schedule(); acts != nil || x.LiveStorages() != 0 || x.Counters() != (Counters{}) {
		t.Errorf("after Cancel before Submit: %v, %d storages, %+v", acts, x.LiveStorages(), x.Counters())
	}
	if err := x.Submit("q", 1); err != nil {
		t.Fatal(err)
	}
	x.Cancel("q") // in ENCODER_INIT
	if acts := x.Schedule(); acts != nil {
		t.Errorf("Schedule after cancelling the only queued request = %v", acts)
	}
	mustInvariants(t, x)
}

func TestR2PreemptReadmitsAndRecomputes(t *testing.T) {
	x := New(Config{})
	run := batchOf(t, x, 1, "a")
	if _, err := x.Preempt("a", PreemptReset); !errors.Is(err, ErrNotGenerating) {
		t.Errorf("Preempt while pending = %v; want ErrNotGenerating", err)
	}
	x.EncoderDone(run.Batch)
	x.Consume("a")
	x.ContextComputed("a")
	x.Release("a")
	if _, err := x.Preempt("a", PreemptPause); err != nil {
		t.Fatal(err)
	}
	if st, adm, _ := x.StateOf("a"); st != StateEncoderInit || adm != 2 {
		t.Fatalf("after Preempt: %s admission %d; want ENCODER_INIT admission 2", st, adm)
	}
	run2 := x.Schedule()[0].(RunEncoder)
	acts, _ := x.EncoderDone(run2.Batch)
	if len(readyViews(t, acts)) != 1 {
		t.Fatalf("re-admission completion = %v", acts)
	}
	if _, err := x.Consume("a"); err != nil {
		t.Fatalf("R-2 the re-admission cannot consume its new output: %v", err)
	}
	x.ContextComputed("a")
	mustInvariants(t, x)
	x.ContextComputed("a") // a second cross-KV computation in one admission
	if err := x.CheckInvariants(); err == nil {
		t.Error("R-1 CheckInvariants passed two context computations in one admission")
	}
	if c := x.Counters(); c.Admissions != 2 || c.Preemptions != 1 || c.ContextsComputed != 3 {
		t.Errorf("Counters = %+v", c)
	}
}

func TestConsumerOutputCannotBePreempted(t *testing.T) {
	x := New(Config{})
	v, err := x.SubmitPublished("p", 2)
	if err != nil || v.Items != 2 {
		t.Fatalf("SubmitPublished = %v, %v", v, err)
	}
	x.Consume("p")
	x.Release("p")
	if _, err := x.Preempt("p", PreemptReset); !errors.Is(err, ErrCannotRecompute) {
		t.Errorf("Preempt of a received output = %v; want ErrCannotRecompute", err)
	}
	if x.LiveStorages() != 0 {
		t.Errorf("the received output's storage outlived its view")
	}
	mustInvariants(t, x)
}

func TestLateCompletionNeverRevivesAResubmittedID(t *testing.T) {
	x := New(Config{MaxPendingBatches: 2})
	run := batchOf(t, x, 1, "a")
	x.Cancel("a")
	if err := x.Submit("a", 1); err != nil { // same id, new request
		t.Fatal(err)
	}
	acts, _ := x.EncoderDone(run.Batch)
	if len(readyViews(t, acts)) != 0 || frees(acts) != 1 {
		t.Errorf("C-2 the old batch's completion = %v; want no Ready, FreeStorage", acts)
	}
	if st, _, _ := x.StateOf("a"); st != StateEncoderInit {
		t.Errorf("the resubmitted a is %s; want ENCODER_INIT", st)
	}
	mustInvariants(t, x)
}

func TestMalformedCalls(t *testing.T) {
	x := New(Config{})
	if err := x.Submit("a", 0); !errors.Is(err, ErrBadItems) {
		t.Errorf("Submit(items 0) = %v", err)
	}
	if _, err := x.SubmitPublished("a", -1); !errors.Is(err, ErrBadItems) {
		t.Errorf("SubmitPublished(items -1) = %v", err)
	}
	x.Submit("a", 1)
	if err := x.Submit("a", 1); !errors.Is(err, ErrDuplicateRequest) {
		t.Errorf("second Submit = %v", err)
	}
	if _, err := x.Consume("a"); !errors.Is(err, ErrNotPublished) {
		t.Errorf("Consume before ready = %v", err)
	}
	if _, err := x.Consume("zz"); !errors.Is(err, ErrUnknownRequest) {
		t.Errorf("Consume(unknown) = %v", err)
	}
	if err := x.ContextComputed("zz"); !errors.Is(err, ErrUnknownRequest) {
		t.Errorf("ContextComputed(unknown) = %v", err)
	}
	if _, err := x.EncoderFailed(99, nil); !errors.Is(err, ErrUnknownBatch) {
		t.Errorf("EncoderFailed(99) = %v", err)
	}
	if _, err := x.Preempt("zz", PreemptPause); !errors.Is(err, ErrUnknownRequest) {
		t.Errorf("Preempt(unknown) = %v", err)
	}
	mustInvariants(t, x)
}

func TestMaxBatchAndPendingBounds(t *testing.T) {
	x := New(Config{MaxBatchRequests: 2, MaxPendingBatches: 1})
	for i := range 5 {
		x.Submit(fmt.Sprint(i), 1)
	}
	acts := x.Schedule()
	if len(acts) != 1 || len(acts[0].(RunEncoder).Members) != 2 || x.Queued() != 3 {
		t.Fatalf("Schedule = %v, queued %d; want one batch of 2, 3 queued", acts, x.Queued())
	}
	if more := x.Schedule(); more != nil {
		t.Errorf("Schedule while the encoder is busy = %v", more)
	}
	x.EncoderDone(acts[0].(RunEncoder).Batch)
	if more := x.Schedule(); len(more) != 1 {
		t.Errorf("Schedule after the completion = %v", more)
	}
}

func TestRanksDetectDivergence(t *testing.T) {
	rs := NewRanks(2, Config{})
	rs.ranks[1].cfg.Mutation.ScatterLiveOnly = true // rank 1 breaks C-2
	for _, id := range []string{"a", "b", "c"} {
		rs.Submit(id, 1)
	}
	run := rs.Schedule()[0].(RunEncoder)
	rs.Cancel("b")
	rs.EncoderDone(run.Batch)
	if err := rs.CheckInvariants(); !errors.Is(err, ErrRanksDiverged) {
		t.Errorf("CheckInvariants() = %v; want ErrRanksDiverged", err)
	}
	ok := NewRanks(2, Config{})
	ok.Submit("a", 1)
	ok.EncoderDone(ok.Schedule()[0].(RunEncoder).Batch)
	if err := ok.CheckInvariants(); err != nil {
		t.Errorf("agreeing ranks: %v", err)
	}
}

// TestRandomWalkKeepsInvariants drives random event sequences and checks the
// invariants after every step; the mutations that break an invariant must be
// caught within the walk.
func TestRandomWalkKeepsInvariants(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d (rerun: BATON_EXECUTOR_SEED)", seed)
	walk := func(m Mutation, seed uint64) error {
		x := New(Config{MaxBatchRequests: 3, MaxPendingBatches: 2, Mutation: m})
		rng := rand.New(rand.NewPCG(seed, 7))
		var pending []BatchID
		for step := range 400 {
			id := fmt.Sprint(rng.IntN(6))
			switch rng.IntN(9) {
			case 0:
				x.Submit(id, 1+rng.IntN(3))
			case 1:
				for _, a := range x.Schedule() {
					pending = append(pending, a.(RunEncoder).Batch)
				}
			case 2:
				if len(pending) > 0 {
					i := rng.IntN(len(pending))
					if rng.IntN(5) == 0 {
						x.EncoderFailed(pending[i], errors.New("x"))
					} else {
						x.EncoderDone(pending[i])
					}
					pending = append(pending[:i], pending[i+1:]...)
				}
			case 3:
				if _, err := x.Consume(id); err == nil {
					x.ContextComputed(id)
				}
			case 4:
				x.Release(id)
			case 5:
				x.Cancel(id)
			case 6:
				x.Finish(id)
			case 7:
				x.Preempt(id, PreemptMode(1+rng.IntN(2)))
			case 8:
				x.SubmitPublished(id, 1)
			}
			if err := x.CheckInvariants(); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
		}
		return nil
	}
	for i := range uint64(200) {
		if err := walk(Mutation{}, seed+i); err != nil {
			t.Fatalf("seed %d: %v", seed+i, err)
		}
	}
	for _, m := range []Mutation{{KeepViewOnEnd: true}, {ReleaseEveryCall: true}} {
		caught := false
		for i := range uint64(200) {
			if walk(m, seed+i) != nil {
				caught = true
				break
			}
		}
		if !caught {
			t.Errorf("mutation %+v survived 200 walks", m)
		}
	}
}

// TestR1ContextTwiceMutation: the core decides how many times a driver
// computes a request's context per admission: once, or twice under the
// ContextTwice mutation, which the R-1 invariant then reports.
func TestR1ContextTwiceMutation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mutation Mutation
		want     int
	}{
		{"contract", Mutation{}, 1},
		{"mutant context-twice", Mutation{ContextTwice: true}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := New(Config{Mutation: tc.mutation})
			if got := x.ContextComputations(); got != tc.want {
				t.Fatalf("ContextComputations() = %d; want %d", got, tc.want)
			}
			run := batchOf(t, x, 1, "a")
			if _, err := x.EncoderDone(run.Batch); err != nil {
				t.Fatal(err)
			}
			if _, err := x.Consume("a"); err != nil {
				t.Fatal(err)
			}
			for range x.ContextComputations() {
				if err := x.ContextComputed("a"); err != nil {
					t.Fatal(err)
				}
			}
			if err := x.CheckInvariants(); (err != nil) != (tc.want > 1) {
				t.Errorf("CheckInvariants() = %v; want an R-1 error %v", err, tc.want > 1)
			}
		})
	}
}

// TestR2RecomputeWithoutEncoderMutation: the contract's Preempt re-admits
// the request through the encoder; the RecomputeWithoutEncoder mutation
// answers RecomputeFromView with the view it last consumed, whose storage
// its release freed, and changes nothing.
func TestR2RecomputeWithoutEncoderMutation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mutation Mutation
	}{
		{"contract", Mutation{}},
		{"mutant recompute-without-encoder", Mutation{RecomputeWithoutEncoder: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := New(Config{Mutation: tc.mutation})
			run := batchOf(t, x, 1, "a")
			if _, err := x.EncoderDone(run.Batch); err != nil {
				t.Fatal(err)
			}
			v, err := x.Consume("a")
			if err != nil {
				t.Fatal(err)
			}
			if err := x.ContextComputed("a"); err != nil {
				t.Fatal(err)
			}
			if frees(x.Release("a")) != 1 {
				t.Fatal("Release(a), the last view, freed nothing")
			}
			acts, err := x.Preempt("a", PreemptMode(1))
			if err != nil {
				t.Fatal(err)
			}
			state, admission, _ := x.StateOf("a")
			if !tc.mutation.RecomputeWithoutEncoder {
				if len(acts) != 0 || state != StateEncoderInit || admission != 2 {
					t.Errorf("Preempt = %v, state %s, admission %d; want no action, ENCODER_INIT, admission 2", acts, state, admission)
				}
				return
			}
			want := []Action{RecomputeFromView{Request: "a", View: v}}
			if !reflect.DeepEqual(acts, want) || state != StateGeneration || admission != 1 {
				t.Errorf("mutant Preempt = %v, state %s, admission %d; want %v, GENERATION, admission 1", acts, state, admission, want)
			}
		})
	}
}
