package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// withExtra returns req with extra set to fields.
func withExtra(t *testing.T, req *pb.GenerateRequest, fields map[string]any) *pb.GenerateRequest {
	t.Helper()
	extra, err := structpb.NewStruct(fields)
	if err != nil {
		t.Fatal(err)
	}
	req.Extra = extra
	return req
}

func publishReq(t *testing.T) *pb.GenerateRequest {
	return &pb.GenerateRequest{Media: []*pb.MediaItem{imageItem(t, "basn6a08.png")},
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}}
}

func baselineReq(t *testing.T) *pb.GenerateRequest {
	return &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "<image> What colour dominates?"},
		Media: []*pb.MediaItem{imageItem(t, "basn6a08.png")}, Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(4)}}
}

// reservedNothing reports the observables that must be back at 0 after a
// failed or cancelled encoder step (C-1, C-6).
func reservedNothing(t *testing.T, srv *Server, when string) {
	t.Helper()
	obs := srv.Engine.Observables()
	for _, k := range []string{"encoder.exports.entries", "encoder.exports.bytes", "encoder.storage.live_batches", "encoder.cleanup.pending"} {
		if obs[k] != 0 {
			t.Errorf("%s: %s = %g; want 0", when, k, obs[k])
		}
	}
}

// TestEncoderFailHook covers C-6 through baton.encoder_fail: one terminal
// INTERNAL naming C-6, nothing reserved left, READY, and the next request
// works; without --test-hooks the key is ignored.
func TestEncoderFailHook(t *testing.T) {
	fail := map[string]any{HookEncoderFail: true}
	tests := []struct {
		name  string
		cfg   Config
		req   func(t *testing.T) *pb.GenerateRequest
		hooks bool
	}{
		{"producer", Config{Role: RoleEncoder, CacheDir: t.TempDir(), TestHooks: true}, publishReq, true},
		{"aggregated", Config{Role: RoleAggregated, TestHooks: true}, baselineReq, true},
		{"producer without test hooks", Config{Role: RoleEncoder, CacheDir: t.TempDir()}, publishReq, false},
		{"aggregated without test hooks", Config{Role: RoleAggregated}, baselineReq, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, eng := startEngine(t, tt.cfg)
			ctx := context.Background()
			res, err := eng.Generate(ctx, withExtra(t, tt.req(t), fail))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.hooks {
				if res.Code() != codes.OK {
					t.Fatalf("Generate with %s and hooks off = %v; want OK (extra ignored)", HookEncoderFail, res.Status)
				}
				return
			}
			if res.Code() != codes.Internal || !strings.Contains(res.Status.Message(), "C-6") {
				t.Errorf("Generate with %s = %v; want INTERNAL naming C-6", HookEncoderFail, res.Status)
			}
			if len(res.Responses) != 0 {
				t.Errorf("Generate with %s sent %d events; want none (the status is the one terminal outcome)", HookEncoderFail, len(res.Responses))
			}
			reservedNothing(t, srv, "after a failed encoder step")
			h, err := eng.Health(ctx)
			if err != nil || h.GetState() != pb.HealthState_HEALTH_STATE_READY {
				t.Errorf("Health after a failed encoder step = %v, %v; want READY", h.GetState(), err)
			}
			if res, _ := eng.Generate(ctx, tt.req(t)); res.Code() != codes.OK {
				t.Errorf("next Generate = %v; want OK", res.Status)
			}
		})
	}
}

// TestEncoderDelayHookCancelled covers C-1: a publish cancelled while its
// encoder step is held gives back its reservation and publishes nothing.
func TestEncoderDelayHookCancelled(t *testing.T) {
	srv, eng := startEngine(t, Config{Role: RoleEncoder, CacheDir: t.TempDir(), TestHooks: true})
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		code codes.Code
		n    int
	}
	done := make(chan result, 1)
	go func() {
		res, err := eng.Generate(ctx, withExtra(t, publishReq(t), map[string]any{HookEncoderDelayMs: 30000}))
		if err != nil {
			done <- result{codes.Unknown, -1}
			return
		}
		done <- result{res.Code(), len(res.Responses)}
	}()
	for deadline := time.Now().Add(10 * time.Second); srv.Engine.Observables()["encoder.exports.entries"] != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the held publish never reserved its entry")
		}
		time.Sleep(5 * time.Millisecond) // polling engine state, not synchronizing on time
	}
	start := time.Now()
	cancel()
	r := <-done
	if r.n != 0 || r.code == codes.OK {
		t.Errorf("cancelled held publish = code %v, %d events; want a non-OK status and no event", r.code, r.n)
	}
	for deadline := time.Now().Add(10 * time.Second); srv.Engine.Observables()["encoder.exports.entries"] != 0; {
		if time.Now().After(deadline) {
			t.Fatal("C-1 the cancelled publish kept its reservation")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("the hold ended %v after the cancellation; want promptly", waited)
	}
	reservedNothing(t, srv, "after a cancelled held publish")
}

// TestMalformedHookValues: a hook key with the wrong type or range is
// INVALID_ARGUMENT with hooks on, and ignored with hooks off.
func TestMalformedHookValues(t *testing.T) {
	bad := []map[string]any{
		{HookEncoderDelayMs: "100"},
		{HookEncoderDelayMs: -1},
		{HookEncoderDelayMs: MaxEncoderDelayMs + 1},
		{HookEncoderFail: "yes"},
		{HookCleanupFail: 1},
		{HookTransferFailExtra: "true"},
		{HookContextDelayMs: "5"},
		{HookContextDelayMs: -3},
		{HookPreemptAfterTokens: 0},
		{HookPreemptAfterTokens: 2.5},
		{HookPreemptAfterTokens: MaxPreemptAfterTokens + 1},
		{HookPreemptAfterTokens: 3}, // R-2 preemption on E, which never decodes
		{HookPreemptAfterTokens: "3"},
		{HookOmitContentHash: "no"},
	}
	_, on := startEngine(t, Config{Role: RoleEncoder, CacheDir: t.TempDir(), TestHooks: true})
	_, off := startEngine(t, Config{Role: RoleEncoder, CacheDir: t.TempDir()})
	ctx := context.Background()
	for _, fields := range bad {
		res, err := on.Generate(ctx, withExtra(t, publishReq(t), fields))
		if err != nil {
			t.Fatal(err)
		}
		if res.Code() != codes.InvalidArgument {
			t.Errorf("Generate(extra=%v) with hooks on = %v; want INVALID_ARGUMENT", fields, res.Status)
		}
		if res, _ := off.Generate(ctx, withExtra(t, publishReq(t), fields)); res.Code() != codes.OK {
			t.Errorf("Generate(extra=%v) with hooks off = %v; want OK (extra ignored)", fields, res.Status)
		}
	}
}

// TestCleanupFailHook covers X-1: a release that fails makes Health
// NOT_READY with a reason and every later Generate UNAVAILABLE.
func TestCleanupFailHook(t *testing.T) {
	_, eng := startEngine(t, Config{Role: RoleEncoder, CacheDir: t.TempDir(), TestHooks: true})
	ctx := context.Background()
	res, err := eng.Generate(ctx, withExtra(t, publishReq(t), map[string]any{HookCleanupFail: true}))
	if err != nil || res.Code() != codes.OK || res.EncoderReady() == nil {
		t.Fatalf("publish with %s = %v, %v; want OK", HookCleanupFail, res, err)
	}
	abort := &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: res.EncoderReady().GetRef()}}
	_, err = eng.Abort(ctx, abort)
	if code := statusCode(err); code != codes.Unavailable {
		t.Errorf("Abort of an entry whose removal fails = %v; want UNAVAILABLE (X-1)", err)
	}
	// Its storage may still be there: a repeated release must not say the
	// reference is spent (found by the simulator, seed 192999).
	if resp, err := eng.Abort(ctx, abort); statusCode(err) != codes.Unavailable {
		t.Errorf("second Abort after the failed removal = %v, %v; want UNAVAILABLE (X-1), not ALREADY_FINISHED", resp.GetStatus(), err)
	}
	h, err := eng.Health(ctx)
	if err != nil || h.GetState() != pb.HealthState_HEALTH_STATE_NOT_READY || len(h.GetChecks()) == 0 || h.GetChecks()[0].GetMessage() == "" {
		t.Errorf("Health after a failed cleanup = %v, %v; want NOT_READY with a reason", h, err)
	}
	if res, _ := eng.Generate(ctx, publishReq(t)); res.Code() != codes.Unavailable || res.Status.Message() == "" {
		t.Errorf("Generate after a failed cleanup = %v; want UNAVAILABLE with a reason", res.Status)
	}
}

func statusCode(err error) codes.Code { return status.Code(err) }

// TestPreemptHook covers on the aggregated role: a request
// preempted after 3 tokens (pause and reset) answers exactly as without,
// admitted twice with one context computation per admission and its
// storage freed; a bad mode is INVALID_ARGUMENT.
func TestPreemptHook(t *testing.T) {
	srv, eng := startEngine(t, Config{Role: RoleAggregated, TestHooks: true, ExecutorInvariants: true})
	ctx := context.Background()
	req := func() *pb.GenerateRequest {
		r := baselineReq(t)
		r.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(12), IgnoreEos: proto.Bool(true)}
		return r
	}
	want, err := eng.Generate(ctx, req())
	if err != nil || want.Code() != codes.OK || len(want.TokenIDs()) != 12 {
		t.Fatalf("uninterrupted = %v %v", want, err)
	}
	for _, mode := range []string{"pause", "reset"} {
		before := srv.Engine.Observables()
		got, err := eng.Generate(ctx, withExtra(t, req(), map[string]any{HookPreemptAfterTokens: 3, HookPreemptMode: mode}))
		if err != nil {
			t.Fatal(err)
		}
		if got.Code() != codes.OK || !slices.Equal(got.TokenIDs(), want.TokenIDs()) || !proto.Equal(got.Usage(), want.Usage()) {
			t.Errorf("R-2 preempted (%s) = %v %v %v; want %v %v", mode, got.Status, got.TokenIDs(), got.Usage(), want.TokenIDs(), want.Usage())
		}
		after := srv.Engine.Observables()
		for key, delta := range map[string]float64{"executor.preemptions": 1, "executor.admissions": 2, "executor.contexts.computed": 2} {
			if d := after[key] - before[key]; d != delta {
				t.Errorf("%s: %s moved by %g; want %g", mode, key, d, delta)
			}
		}
		if after["encoder.storage.live_batches"] != 0 {
			t.Errorf("%s: %g live batches after the request; want 0 (C-3)", mode, after["encoder.storage.live_batches"])
		}
	}
	res, err := eng.Generate(ctx, withExtra(t, req(), map[string]any{HookPreemptAfterTokens: 3, HookPreemptMode: "sideways"}))
	if err != nil || res.Code() != codes.InvalidArgument {
		t.Errorf("preempt mode sideways = %v %v; want INVALID_ARGUMENT", res.Status, err)
	}
}
