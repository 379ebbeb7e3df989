package server

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/baton-dev/baton/engine/handoff"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Regression tests for an attack run's findings.
func TestAttackRegressions(t *testing.T) {
	dir := t.TempDir()
	_, producer := startEngine(t, Config{Role: RoleEncoder, CacheDir: dir})
	_, consumer := startEngine(t, Config{Role: RolePD, CacheDir: dir})
	ctx := context.Background()
	item := imageItem(t, "video-001.png")
	publish := func(items []*pb.MediaItem, ttlMs uint32) (*pb.EncoderCacheRef, codes.Code) {
		res, err := producer.Generate(ctx, &pb.GenerateRequest{Media: items,
			Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{TtlMs: proto.Uint32(ttlMs)}}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.EncoderReady().GetRef(), res.Code()
	}
	t.Run("L-6 more items than one reference may carry", func(t *testing.T) {
		items := make([]*pb.MediaItem, MaxItemsPerRequest+1)
		for i := range items {
			items[i] = item
		}
		if _, code := publish(items, 0); code != codes.InvalidArgument {
			t.Errorf("publish of %d items = %v, want INVALID_ARGUMENT", len(items), code)
		}
	})
	t.Run("SU-2 a consume rejected for its options does not spend the reference", func(t *testing.T) {
		ref, code := publish([]*pb.MediaItem{item}, 0)
		if code != codes.OK {
			t.Fatal(code)
		}
		bad, _ := consumer.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "x"},
			Stopping: &pb.StoppingOptions{Conditions: []*pb.StopCondition{{Condition: &pb.StopCondition_StopText{StopText: ""}}}},
			Encoder:  &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}})
		if bad.Code() != codes.InvalidArgument {
			t.Fatalf("empty stop text = %v, want INVALID_ARGUMENT", bad.Status)
		}
		good, _ := consumer.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "x"},
			Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(4)},
			Encoder:  &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}})
		if good.Code() != codes.OK || len(good.TokenIDs()) == 0 {
			t.Errorf("retry after a rejected consume = %v with %d tokens; want OK with tokens", good.Status, len(good.TokenIDs()))
		}
	})
	t.Run("SU-3 Abort of an expired, uncollected entry is ALREADY_FINISHED", func(t *testing.T) {
		ref, code := publish([]*pb.MediaItem{item}, 1)
		if code != codes.OK {
			t.Fatal(code)
		}
		parsed, err := handoff.ParseReference(ref.GetBackend(), ref.GetProducerInstanceId(), endpointOf(ref.GetProducerEndpoint()), ref.GetOpaqueState(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for time.Now().UnixMilli() <= parsed.ExpiresUnixMs {
			runtime.Gosched() // until the 1 ms TTL has passed on the wall clock
		}
		ab, err := producer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}})
		if err != nil || ab.GetStatus() != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
			t.Errorf("Abort of an expired entry = %v, %v; want ALREADY_FINISHED", ab.GetStatus(), err)
		}
	})
}

// TestSpentBeforeQuota: a spent reference is INVALID_ARGUMENT (SU-2) even
// when the consumer's in-flight quota would refuse it (L-5 comes after SU-2).
func TestSpentBeforeQuota(t *testing.T) {
	dir := t.TempDir()
	_, producer := startEngine(t, Config{Role: RoleEncoder, CacheDir: dir})
	_, consumer := startEngine(t, Config{Role: RolePD, CacheDir: dir, ConsumerQuotaBytes: 1024})
	ctx := context.Background()
	res, err := producer.Generate(ctx, &pb.GenerateRequest{Media: []*pb.MediaItem{imageItem(t, "video-001.png")},
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}})
	if err != nil || res.Code() != codes.OK {
		t.Fatal(res.Status, err)
	}
	ref := res.EncoderReady().GetRef()
	consume := func() codes.Code {
		r, _ := consumer.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "x"},
			Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}})
		return r.Code()
	}
	if c := consume(); c != codes.ResourceExhausted {
		t.Fatalf("L-5 a published reference over the in-flight quota = %v, want RESOURCE_EXHAUSTED", c)
	}
	if ab, err := producer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}}); err != nil || ab.GetStatus() != pb.AbortStatus_ABORT_STATUS_ABORTED {
		t.Fatalf("release: %v %v", ab.GetStatus(), err)
	}
	if c := consume(); c != codes.InvalidArgument {
		t.Errorf("a spent reference over the in-flight quota = %v, want INVALID_ARGUMENT (SU-2 before L-5)", c)
	}
}
