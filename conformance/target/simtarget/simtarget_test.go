package simtarget_test

import (
	"context"
	"testing"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/conformance/target/simtarget"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestHandoffThroughTarget: publish, consume, replay, release and a
// forged reference through the adapter give the contract's answers, and
// the history of those calls is linearizable.
func TestHandoffThroughTarget(t *testing.T) {
	ctx := context.Background()
	tg, err := simtarget.New(simtarget.Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	prod, _ := tg.Engine(target.RoleProducer)
	cons, _ := tg.Engine(target.RoleConsumer)
	pub, _ := prod.Generate(ctx, &pb.GenerateRequest{
		Media:   []*pb.MediaItem{{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: []byte("pixels")}}},
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}},
	})
	ready := pub.EncoderReady()
	if pub.Code() != codes.OK || ready == nil {
		t.Fatalf("publish = %v", pub.Status)
	}
	consume := func(ref *pb.EncoderCacheRef) *target.GenerateResult {
		res, _ := cons.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "<image> hi"},
			Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(4)}, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}})
		return res
	}
	forged := proto.Clone(ready.GetRef()).(*pb.EncoderCacheRef)
	forged.ProducerInstanceId = "00000000-0000-4000-8000-000000000000"
	if res := consume(forged); res.Code() != codes.InvalidArgument {
		t.Errorf("consume of a forged reference = %v; want INVALID_ARGUMENT (SU-5)", res.Status)
	}
	if res := consume(ready.GetRef()); res.Code() != codes.OK || len(res.TokenIDs()) != 4 {
		t.Errorf("consume = %v, %d tokens; want OK with 4", res.Status, len(res.TokenIDs()))
	}
	if res := consume(ready.GetRef()); res.Code() != codes.InvalidArgument {
		t.Errorf("replay = %v; want INVALID_ARGUMENT (SU-2)", res.Status)
	}
	resp, err := prod.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ready.GetRef()}})
	if err != nil || resp.GetStatus() != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
		t.Errorf("release of a consumed reference = %v, %v; want ALREADY_FINISHED (SU-3)", resp.GetStatus(), err)
	}
	if msg := tg.CheckHistory(); msg != "" {
		t.Errorf("history: %s", msg)
	}
}
