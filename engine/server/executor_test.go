package server

import (
	"context"
	"fmt"
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
				out := make(chan *target.GenerateResult, 1)
				go func() {
					res, err := eng.Generate(ctx, withExtra(t, publishReq(t), map[string]any{HookEncoderDelayMs: holdMs}))
					if err != nil {
						res = &target.GenerateResult{}
					}
					out <- res
				}()
				return out
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
