package check

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"github.com/baton-dev/baton/reports"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// cannedEngine answers every call from fixed values.
type cannedEngine struct {
	gen    *target.GenerateResult
	genErr error
	abort  *pb.AbortResponse
	err    error
}

func (f *cannedEngine) Generate(context.Context, *pb.GenerateRequest) (*target.GenerateResult, error) {
	return f.gen, f.genErr
}
func (f *cannedEngine) GetServerInfo(context.Context) (*pb.ServerInfo, error) {
	return &pb.ServerInfo{InstanceId: "i-1", SchemaRevision: 1}, f.err
}
func (f *cannedEngine) GetModelInfo(context.Context, string) (*pb.ModelInfo, error) {
	return &pb.ModelInfo{}, f.err
}
func (f *cannedEngine) GetLoad(context.Context) (*pb.LoadInfo, error) { return &pb.LoadInfo{}, f.err }
func (f *cannedEngine) Health(context.Context) (*pb.HealthResponse, error) {
	return &pb.HealthResponse{State: pb.HealthState_HEALTH_STATE_READY}, f.err
}
func (f *cannedEngine) Abort(context.Context, *pb.AbortRequest) (*pb.AbortResponse, error) {
	return f.abort, f.err
}
func (f *cannedEngine) Shutdown(context.Context, *pb.ShutdownRequest) (*pb.ShutdownResponse, error) {
	return &pb.ShutdownResponse{}, f.err
}

// fakeClock advances 5 ms per reading.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(5 * time.Millisecond)
	return c.t
}

func TestRecorderTranscriptAndRedaction(t *testing.T) {
	opaque := []byte(`{"id":"secret-entry-id","tag":"hmac-tag"}`)
	ref := &pb.EncoderCacheRef{Backend: "shared_dir", ProducerInstanceId: "prod-1", OpaqueState: opaque}
	ready := &target.GenerateResult{
		Responses: []*pb.GenerateResponse{{Event: &pb.GenerateResponse_EncoderReady{EncoderReady: &pb.EncoderReady{Ref: ref, Items: []*pb.EncodedItem{{}}}}}},
		Status:    status.New(codes.OK, ""),
	}
	rejected := &target.GenerateResult{Status: status.New(codes.InvalidArgument, "spent reference")}
	prod := &cannedEngine{gen: ready, abort: &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ABORTED}}
	cons := &cannedEngine{gen: rejected}

	current := "SU-2 replay"
	labels := []string{"SU-2", "level:core", "topology:E+PD"}
	clock := &fakeClock{t: time.Unix(0, 0)}
	rec := NewRecorder(func() (string, []string) { return current, labels }, clock.now)
	tg := wrapTarget(target.NewStatic(target.Profile{Name: "x"}, map[target.Role]target.Engine{target.RoleProducer: prod, target.RoleConsumer: cons}), 0, rec, nil, nil)
	p, _ := tg.Engine(target.RoleProducer)
	c, _ := tg.Engine(target.RoleConsumer)
	ctx := context.Background()
	png := []byte("\x89PNG fake image bytes")
	pub := &pb.GenerateRequest{
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{TtlMs: proto.Uint32(500)}}},
		Media:   []*pb.MediaItem{{Modality: pb.Modality_MODALITY_IMAGE, MimeType: "image/png", Source: &pb.MediaItem_RawBytes{RawBytes: png}}},
	}
	if _, err := p.Generate(ctx, pub); err != nil {
		t.Fatal(err)
	}
	consume := &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "<image> what is it?"}, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}}
	if _, err := c.Generate(ctx, consume); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}}); err != nil {
		t.Fatal(err)
	}
	current = "" // outside any case: not recorded
	if _, err := p.Health(ctx); err != nil {
		t.Fatal(err)
	}

	calls, dropped := rec.Transcript("SU-2 replay")
	if len(calls) != 3 || dropped != 0 {
		t.Fatalf("transcript %d calls (%d dropped): %+v; want 3", len(calls), dropped, calls)
	}
	want := []struct{ role, method, reqHas, code, respHas string }{
		{"producer", "Generate", "publish ttl=500ms media=[image image/png raw 21 B sha256:", "OK", "EncoderReady(ref shared_dir producer=prod-1 opaque_state=41 B, 1 items)"},
		{"consumer", "Generate", `consume ref shared_dir producer=prod-1 opaque_state=41 B prompt="<image> what is it?"`, "INVALID_ARGUMENT", "status: spent reference"},
		{"producer", "Abort", "encoder_cache ref shared_dir", "OK", "ABORT_STATUS_ABORTED"},
	}
	for i, w := range want {
		got := calls[i]
		if got.Role != w.role || got.Method != w.method || !strings.Contains(got.Request, w.reqHas) || got.Code != w.code || !strings.Contains(got.Response, w.respHas) {
			t.Errorf("call %d = %+v; want %+v", i, got, w)
		}
		if got.LatencyMs != 5 {
			t.Errorf("call %d latency %v ms; want 5 (one fake clock step)", i, got.LatencyMs)
		}
		for _, secret := range []string{"secret-entry-id", "hmac-tag", "fake image bytes"} {
			if strings.Contains(got.Request+got.Response, secret) {
				t.Errorf("call %d leaks %q: %+v", i, secret, got)
			}
		}
	}
	if calls[0].StartMs != 0 || calls[1].StartMs <= calls[0].StartMs {
		t.Errorf("start offsets %v, %v; want 0 then later", calls[0].StartMs, calls[1].StartMs)
	}
	// Only the OK publish is a latency sample; the rejected consume is not.
	lat := rec.Latencies()
	if len(lat) != 1 || lat[0].Topology != "E+PD" || lat[0].Phase != reports.PhasePublish || len(lat[0].SamplesMs) != 1 {
		t.Errorf("latencies %+v; want one E+PD publish sample", lat)
	}
	if b := rec.Backends("SU-2 replay"); len(b) != 0 {
		t.Errorf("backends %v after a rejected consume; want none (nothing was handed off)", b)
	}
}

func TestRecorderBounds(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	rec := NewRecorder(func() (string, []string) { return "L-6 loop", []string{"L-6"} }, clock.now)
	e := rec.Engine(target.RolePrefill, &cannedEngine{gen: &target.GenerateResult{Status: status.New(codes.OK, "")}})
	huge := strings.Repeat("x", 10*reports.TranscriptMaxRunes)
	req := &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: huge}, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: &pb.EncoderCacheRef{ProducerInstanceId: huge}}}}
	n := reports.TranscriptMaxCalls + 7
	for range n {
		if _, err := e.Generate(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	calls, dropped := rec.Transcript("L-6 loop")
	if len(calls) != reports.TranscriptMaxCalls || dropped != 7 {
		t.Errorf("kept %d, dropped %d; want %d, 7", len(calls), dropped, reports.TranscriptMaxCalls)
	}
	for _, c := range calls {
		if len([]rune(c.Request)) > reports.TranscriptMaxRunes {
			t.Fatalf("request summary of %d runes; bound %d", len([]rune(c.Request)), reports.TranscriptMaxRunes)
		}
	}
	// A prefill consume without a topology label counts for E+P+D.
	lat := rec.Latencies()
	if len(lat) != 1 || lat[0].Topology != "E+P+D" || lat[0].Phase != reports.PhaseConsume || len(lat[0].SamplesMs) != n {
		t.Errorf("latencies %+v; want %d E+P+D consume samples", lat, n)
	}
}

// TestRecorderBackends: the backends a case handed off over are those of
// its consumes that answered OK, each once, sorted.
func TestRecorderBackends(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	rec := NewRecorder(func() (string, []string) { return "B-1 x", nil }, clock.now)
	ok := rec.Engine(target.RoleConsumer, &cannedEngine{gen: &target.GenerateResult{Status: status.New(codes.OK, "")}})
	bad := rec.Engine(target.RoleConsumer, &cannedEngine{gen: &target.GenerateResult{Status: status.New(codes.FailedPrecondition, "N-1")}})
	consume := func(backend string) *pb.GenerateRequest {
		return &pb.GenerateRequest{Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: &pb.EncoderCacheRef{Backend: backend}}}}
	}
	for _, b := range []string{"tcp", "shared_dir", "tcp"} {
		if _, err := ok.Generate(context.Background(), consume(b)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bad.Generate(context.Background(), consume("cuda_ipc")); err != nil {
		t.Fatal(err)
	}
	if got := rec.Backends("B-1 x"); !slices.Equal(got, []string{"shared_dir", "tcp"}) {
		t.Errorf("backends = %v; want [shared_dir tcp] (the rejected cuda_ipc consume handed nothing off)", got)
	}
}

func TestRecorderHarnessErrors(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	rec := NewRecorder(func() (string, []string) { return "S-1 x", nil }, clock.now)
	e := rec.Engine(target.RoleConsumer, &cannedEngine{genErr: errors.New("dial: refused"), err: status.Error(codes.Unavailable, "gone")})
	e.Generate(context.Background(), &pb.GenerateRequest{})
	e.Shutdown(context.Background(), &pb.ShutdownRequest{ExpectedInstanceId: "i-9"})
	calls, _ := rec.Transcript("S-1 x")
	if len(calls) != 2 || calls[0].Code != "harness error" || calls[0].Response != "dial: refused" || calls[0].Request != "(empty request)" {
		t.Fatalf("calls %+v", calls)
	}
	if calls[1].Code != "UNAVAILABLE" || calls[1].Response != "gone" || calls[1].Request != `expected_instance_id="i-9"` {
		t.Errorf("shutdown call %+v", calls[1])
	}
	if len(rec.Latencies()) != 0 {
		t.Error("failed calls became latency samples")
	}
}

// faultyTarget implements the optional capabilities (through embedded
// interfaces, so the test follows their method sets; none is called).
type faultyTarget struct {
	*target.Static
	target.FaultInjector
	target.Restarter
}

func TestWrapTargetKeepsCapabilities(t *testing.T) {
	base := target.NewStatic(target.Profile{CaseTimeout: time.Minute}, nil)
	w := wrapTarget(faultyTarget{Static: base}, 3*time.Second, nil, nil, nil)
	if _, ok := w.(target.FaultInjector); !ok {
		t.Error("the wrapped target lost FaultInjector")
	}
	if _, ok := w.(target.Restarter); !ok {
		t.Error("the wrapped target lost Restarter")
	}
	if w.Profile().CaseTimeout != 3*time.Second {
		t.Errorf("case timeout %v; want 3s", w.Profile().CaseTimeout)
	}
	plain := wrapTarget(base, 0, nil, nil, nil)
	if _, ok := plain.(target.FaultInjector); ok {
		t.Error("a plain target gained FaultInjector")
	}
	if plain.Profile().CaseTimeout != time.Minute {
		t.Errorf("case timeout %v; want the profile's 1m", plain.Profile().CaseTimeout)
	}
}
