package server

import (
	"context"
	"sync"
	"testing"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestTCPTransfer covers the tcp backend end to end: B-1 over a WRITE, Q-2 for
// a replay (definite rejection: consumer stays READY), Q-3 and Q-1 when the
// producer's WRITE fails after the entry left the table; the consumer's
// quarantine lasts while another call uses the producer client that carried
// the transfer and ends once that call ends (Q-6: the client, retired, closes).
func TestTCPTransfer(t *testing.T) {
	_, producer := startEngine(t, Config{Role: RoleEncoder, Backend: BackendTCP, TestHooks: true})
	consSrv, consumer := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}, TestHooks: true})
	_, baseline := startEngine(t, Config{Role: RoleAggregated})
	ctx := context.Background()
	item := imageItem(t, "video-001.png")
	stop := &pb.StoppingOptions{MaxTokens: proto.Uint32(12)}
	publish := func() *pb.EncoderCacheRef {
		res, err := producer.Generate(ctx, &pb.GenerateRequest{Media: []*pb.MediaItem{item},
			Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}})
		if err != nil || res.Code() != codes.OK {
			t.Fatalf("publish: %v %v", res.Status, err)
		}
		if b := res.EncoderReady().GetRef().GetBackend(); b != BackendTCP {
			t.Fatalf("reference backend %q, want tcp", b)
		}
		return res.EncoderReady().GetRef()
	}
	consume := func(ref *pb.EncoderCacheRef, extra *structpb.Struct) codes.Code {
		res, err := consumer.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "<image> Describe."}, Stopping: stop, Extra: extra,
			Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Code() == codes.OK {
			want, _ := baseline.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "<image> Describe."}, Stopping: stop, Media: []*pb.MediaItem{item}})
			if res.Text() != want.Text() || !proto.Equal(res.Usage(), want.Usage()) {
				t.Errorf("B-1 over tcp: %q, baseline %q", res.Text(), want.Text())
			}
		}
		return res.Code()
	}
	health := func(e interface {
		Health(context.Context) (*pb.HealthResponse, error)
	}) pb.HealthState {
		h, err := e.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return h.GetState()
	}
	ref := publish()
	if code := consume(ref, nil); code != codes.OK {
		t.Fatalf("consume over tcp = %v", code)
	}
	if code := consume(ref, nil); code != codes.InvalidArgument {
		t.Errorf("Q-2 replay over tcp = %v, want INVALID_ARGUMENT", code)
	}
	if s := health(consumer); s != pb.HealthState_HEALTH_STATE_READY {
		t.Errorf("Q-2 consumer after a definite rejection is %v, want READY", s)
	}
	// Another request's call on the producer's client, in use across the
	// uncertain transfer below: its connections stay open until it ends.
	putBack := holdProducerClient(t, consSrv.Engine)
	fail, _ := structpb.NewStruct(map[string]any{"baton.transfer_fail": true})
	if code := consume(publish(), fail); code != codes.Unavailable {
		t.Errorf("Q-1 consume whose WRITE failed after removal = %v, want UNAVAILABLE", code)
	}
	if s := health(producer); s != pb.HealthState_HEALTH_STATE_NOT_READY {
		t.Errorf("Q-3/Q-4 producer after a failed WRITE is %v, want NOT_READY", s)
	}
	if s := health(consumer); s != pb.HealthState_HEALTH_STATE_NOT_READY {
		t.Errorf("Q-1/Q-4 consumer after an uncertain transfer is %v, want NOT_READY", s)
	}
	load, _ := consumer.GetLoad(ctx)
	if q := load.GetAttributes().GetFields()["encoder.quarantine.buffers"].GetNumberValue(); q != 1 {
		t.Errorf("Q-1 consumer quarantine.buffers = %v, want 1", q)
	}
	text, _ := consumer.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "hello"}, Stopping: stop})
	if text.Code() != codes.OK {
		t.Errorf("Q-4 text-only request on a quarantined consumer = %v, want OK", text.Status)
	}
	putBack()
	waitFor(t, "the consumer's quarantine to end once the retired client's last call ended (Q-6)", func() bool {
		return health(consumer) == pb.HealthState_HEALTH_STATE_READY
	})
}

// TestConcurrentTCPHandoffsLeakNothing runs 64 E+PD handoffs over tcp at
// once: every consume answers, all alike, and afterwards the producer holds
// no entry and the consumer no receive, quarantine or batch storage.
func TestConcurrentTCPHandoffsLeakNothing(t *testing.T) {
	const handoffs = 64
	prodSrv, producer := startEngine(t, Config{Role: RoleEncoder, Backend: BackendTCP})
	consSrv, consumer := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}, ExecutorInvariants: true})
	ctx := context.Background()
	item := imageItem(t, "video-001.png")
	refs := make([]*pb.EncoderCacheRef, handoffs)
	for i := range refs {
		res, err := producer.Generate(ctx, &pb.GenerateRequest{Media: []*pb.MediaItem{item},
			Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}})
		if err != nil || res.EncoderReady() == nil {
			t.Fatalf("publish %d: %v %v", i, res.Status, err)
		}
		refs[i] = res.EncoderReady().GetRef()
	}
	texts := make([]string, handoffs)
	codesOf := make([]codes.Code, handoffs)
	var wg sync.WaitGroup
	for i := range refs {
		wg.Go(func() {
			res, err := consumer.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "<image> Describe."},
				Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(8)}, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: refs[i]}}})
			if err != nil {
				codesOf[i] = codes.Unknown
				return
			}
			codesOf[i], texts[i] = res.Code(), res.Text()
		})
	}
	wg.Wait()
	for i := range refs {
		if codesOf[i] != codes.OK || texts[i] != texts[0] {
			t.Errorf("handoff %d = %v %q; want OK %q", i, codesOf[i], texts[i], texts[0])
		}
	}
	for who, obs := range map[string]map[string]float64{"producer": prodSrv.Engine.Observables(), "consumer": consSrv.Engine.Observables()} {
		for _, k := range []string{"encoder.exports.entries", "encoder.exports.bytes", "encoder.receives.inflight", "encoder.quarantine.buffers", "encoder.storage.live_batches"} {
			if obs[k] != 0 {
				t.Errorf("%s after %d concurrent handoffs: %s = %g; want 0", who, handoffs, k, obs[k])
			}
		}
	}
}

// holdProducerClient takes the consumer's one cached producer client in
// use, as another request's call would, so a retired client stays open
// it closes with its last use) until the returned func puts it back.
func holdProducerClient(t *testing.T, e *Engine) (putBack func()) {
	t.Helper()
	p := &e.producers
	p.mu.Lock()
	var addr string
	for a := range p.conns {
		addr = a
	}
	p.mu.Unlock()
	other, err := p.get(addr)
	if addr == "" || err != nil {
		t.Fatalf("no cached client for the producer (%v)", err)
	}
	return func() { p.put(other) }
}
