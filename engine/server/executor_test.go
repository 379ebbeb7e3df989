package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
)

// waitFor polls cond (engine state, not time) for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling engine state, not synchronizing on time
	}
}

// heldPublish starts a publish on eng whose encoder step is held holdMs
// and returns its result (an empty one when the call itself failed).
func heldPublish(t *testing.T, ctx context.Context, eng *target.GRPCEngine, holdMs int) <-chan *target.GenerateResult {
	req := withExtra(t, publishReq(t), map[string]any{HookEncoderDelayMs: holdMs})
	out := make(chan *target.GenerateResult, 1)
	go func() {
		res, err := eng.Generate(ctx, req)
		if err != nil {
			res = &target.GenerateResult{}
		}
		out <- res
	}()
	return out
}

// TestExecutorBatchesAndCancelsC2 runs the C-2 scenario in process, in both
// executor modes and with two tensor-parallel ranks, with the core's
// invariants checked after every decision: an occupying publish holds the
// encoder, three publishes share the next batch, the middle one is
// cancelled while pending; the others are published, nothing is left and
// the ranks agree.
func TestExecutorBatchesAndCancelsC2(t *testing.T) {
	for _, mode := range []string{ExecutorAsync, ExecutorSync} {
		t.Run(mode, func(t *testing.T) {
			srv, eng := startEngine(t, Config{Role: RoleEncoder, CacheDir: t.TempDir(), TestHooks: true,
				ExecutorMode: mode, TensorParallel: 2, ExecutorInvariants: true})
			obs := srv.Engine.Observables
			start := func(ctx context.Context, holdMs int) <-chan *target.GenerateResult {
				return heldPublish(t, ctx, eng, holdMs)
			}
			ctx := context.Background()
			occupier := start(ctx, 400)
			waitFor(t, "the occupying batch", func() bool { return obs()["executor.batches.formed"] == 1 })
			cancelCtx, cancel := context.WithCancel(ctx)
			runs := []<-chan *target.GenerateResult{start(ctx, 1000), start(cancelCtx, 1000), start(ctx, 1000)}
			waitFor(t, "three queued publishes", func() bool { return obs()["executor.admissions"] == 4 })
			waitFor(t, "the shared batch", func() bool { return obs()["executor.batches.formed"] == 2 })
			if got := obs()["executor.batches.requests"]; got != 4 {
				t.Fatalf("executor.batches.requests = %g; want 4 (1 + a batch of 3)", got)
			}
			cancel()
			results := []*target.GenerateResult{<-occupier, <-runs[0], <-runs[1], <-runs[2]}
			for i, res := range results {
				ready := res.EncoderReady()
				if (i == 2) != (ready == nil) {
					t.Errorf("publish %d: %s; want EncoderReady for all but the cancelled one", i, fmt.Sprint(res.Status, len(res.Responses)))
				}
				if ready != nil {
					if resp, err := eng.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ready.GetRef()}}); err != nil || resp.GetStatus() != pb.AbortStatus_ABORT_STATUS_ABORTED {
						t.Errorf("Abort(publish %d) = %v %v", i, resp, err)
					}
				}
			}
			if results[2].Code() == codes.OK {
				t.Errorf("the cancelled publish closed OK")
			}
			waitFor(t, "nothing left", func() bool {
				o := obs()
				return o["encoder.storage.live_batches"] == 0 && o["executor.batches.pending"] == 0 && o["encoder.exports.entries"] == 0
			})
			if d := obs()["executor.tensor_parallel.diverged"]; d != 0 {
				t.Errorf("the two ranks diverged")
			}
		})
	}
}

// TestSyncModeNeverHoldsARequestBehindOthers: in sync mode a request whose
// output is ready returns without waiting for the batches scheduled after
// its own (here a later publish held 20 s), and a cancelled one returns at
// once and leaves nothing behind (the trial's findings 1 and 2).
func TestSyncModeNeverHoldsARequestBehindOthers(t *testing.T) {
	srv, eng := startEngine(t, Config{Role: RoleEncoder, CacheDir: t.TempDir(), TestHooks: true, ExecutorMode: ExecutorSync, ExecutorInvariants: true})
	obs := srv.Engine.Observables
	ctx := context.Background()
	publish := func(ctx context.Context, holdMs int) <-chan *target.GenerateResult {
		return heldPublish(t, ctx, eng, holdMs)
	}
	within := func(what string, ch <-chan *target.GenerateResult) *target.GenerateResult {
		t.Helper()
		select {
		case res := <-ch:
			return res
		case <-time.After(10 * time.Second): // a bound far under the later request's 20 s hold
			t.Fatalf("%s did not return while a later batch was held", what)
			return nil
		}
	}
	a := publish(ctx, 300)
	waitFor(t, "a's batch", func() bool { return obs()["executor.batches.formed"] == 1 })
	bCtx, cancelB := context.WithCancel(ctx)
	b := publish(bCtx, 20_000)
	waitFor(t, "b queued", func() bool { return obs()["executor.admissions"] == 2 })
	if res := within("a publish whose output was ready", a); res.EncoderReady() == nil {
		t.Fatalf("a = %v; want EncoderReady", res.Status)
	}
	waitFor(t, "b's batch", func() bool { return obs()["executor.batches.formed"] == 2 })
	cancelB()
	if res := within("a publish cancelled during its held step", b); res.EncoderReady() != nil {
		t.Errorf("the cancelled publish got EncoderReady")
	}
	waitFor(t, "nothing left", func() bool {
		o := obs()
		return o["encoder.storage.live_batches"] == 0 && o["executor.batches.pending"] == 0 && o["encoder.exports.entries"] <= 1
	})
}

// TestContextHoldOnConsumer: baton.context_delay_ms holds a PD request with
// its received output adopted and unconsumed; cancelled there, the request
// ends at once and the storage is freed (C-3 on the consumer).
func TestContextHoldOnConsumer(t *testing.T) {
	dir := t.TempDir()
	_, prod := startEngine(t, Config{Role: RoleEncoder, CacheDir: dir})
	srv, cons := startEngine(t, Config{Role: RolePD, CacheDir: dir, TestHooks: true, ExecutorInvariants: true})
	ctx := context.Background()
	res, err := prod.Generate(ctx, publishReq(t))
	if err != nil || res.EncoderReady() == nil {
		t.Fatalf("publish: %v %v", res.Status, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan *target.GenerateResult, 1)
	go func() {
		req := &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "<image> What?"},
			Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: res.EncoderReady().GetRef()}}}
		r, err := cons.Generate(cctx, withExtra(t, req, map[string]any{HookContextDelayMs: 20_000}))
		if err != nil {
			r = &target.GenerateResult{}
		}
		done <- r
	}()
	waitFor(t, "the adopted output", func() bool { return srv.Engine.Observables()["encoder.storage.live_batches"] == 1 })
	cancel()
	select {
	case r := <-done:
		if len(r.TokenIDs()) > 0 {
			t.Errorf("a consume cancelled before its first context step emitted tokens")
		}
	case <-time.After(10 * time.Second): // far under the 20 s hold
		t.Fatal("the cancelled consume did not end during its context hold")
	}
	waitFor(t, "the storage freed", func() bool { return srv.Engine.Observables()["encoder.storage.live_batches"] == 0 })
}

// TestBadExecutorConfig: each bad executor setting is refused at start with
// ErrConfig (baton serve exits 3), naming the flag.
func TestBadExecutorConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		flag string
	}{
		{Config{Role: RoleAggregated, ExecutorMode: "eager"}, "--executor-mode"},
		{Config{Role: RoleAggregated, TensorParallel: 9}, "--tp"},
		{Config{Role: RoleAggregated, TensorParallel: -1}, "--tp"},
		{Config{Role: RoleAggregated, MaxBatchRequests: -1}, "--max-batch-requests"},
		{Config{Role: RoleAggregated, MaxBatchRequests: 1025}, "--max-batch-requests"},
		{Config{Role: RoleAggregated, ModelArchitecture: "transformer"}, "--model-architecture"},
		{Config{Role: RolePrefill, ModelArchitecture: "encoder-decoder"}, "--model-architecture"},
	} {
		_, err := New(tc.cfg, nil)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("New(%+v) = %v; want ErrConfig naming %s", tc.cfg, err, tc.flag)
		}
	}
}
