package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/faultproxy"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/xfer"
	"github.com/baton-dev/baton/gpu/nvml"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func ipcConsumeReq(ref *pb.EncoderCacheRef, extra *structpb.Struct) *pb.GenerateRequest {
	return &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "<image> Describe."}, Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(12)}, Extra: extra,
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}}
}

func ipcPublishReq(item *pb.MediaItem) *pb.GenerateRequest {
	return &pb.GenerateRequest{Media: []*pb.MediaItem{item}, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}}
}

func healthOf(t *testing.T, e interface {
	Health(context.Context) (*pb.HealthResponse, error)
}) pb.HealthState {
	t.Helper()
	h, err := e.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h.GetState()
}

// TestCUDAIPCHandoff covers the cuda_ipc backend end to end on a fake
// device: B-1 over a loan, the loan given back (nothing left allocated or
// mapped), Q-2 for a replay, SU-3 after consumption, and when
// the producer fails after the entry left its table.
func TestCUDAIPCHandoff(t *testing.T) {
	fake := xfer.NewFakeIPC()
	_, producer := startEngine(t, Config{Role: RoleEncoder, Backend: BackendCUDAIPC, IPCDevice: fake.Device(0), TestHooks: true})
	consumerSrv, consumer := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendCUDAIPC}, IPCDevice: fake.Device(1), TestHooks: true})
	_, baseline := startEngine(t, Config{Role: RoleAggregated})
	ctx := context.Background()
	item := imageItem(t, "video-001.png")
	publish := func() *pb.EncoderCacheRef {
		res, err := producer.Generate(ctx, ipcPublishReq(item))
		if err != nil || res.Code() != codes.OK {
			t.Fatalf("publish: %v %v", res.Status, err)
		}
		if b := res.EncoderReady().GetRef().GetBackend(); b != BackendCUDAIPC {
			t.Fatalf("reference backend %q, want cuda_ipc", b)
		}
		return res.EncoderReady().GetRef()
	}
	mi, err := consumer.GetModelInfo(ctx, "")
	if err != nil || len(mi.GetEncoder().GetBackends()) != 1 || mi.GetEncoder().GetBackends()[0] != BackendCUDAIPC {
		t.Fatalf("N-1 consumer advertises %v (%v), want [cuda_ipc]", mi.GetEncoder().GetBackends(), err)
	}
	ref := publish()
	if _, live, _ := fake.Counts(); live != 1 {
		t.Errorf("after publish %d device allocations live, want 1 (the entry)", live)
	}
	got, err := consumer.Generate(ctx, ipcConsumeReq(ref, nil))
	if err != nil || got.Code() != codes.OK {
		t.Fatalf("consume over cuda_ipc = %v, %v", got.Status, err)
	}
	want, _ := baseline.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "<image> Describe."}, Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(12)}, Media: []*pb.MediaItem{item}})
	if got.Text() != want.Text() || !proto.Equal(got.Usage(), want.Usage()) || len(got.TokenIDs()) == 0 {
		t.Errorf("B-1 over cuda_ipc: %q usage %v, baseline %q usage %v", got.Text(), got.Usage(), want.Text(), want.Usage())
	}
	consumerSrv.Engine.gpu.returns.Wait() // the loan goes back in the background
	if opened, live, _ := fake.Counts(); opened != 0 || live != 0 {
		t.Errorf("after a clean handoff %d mappings open and %d allocations live, want 0 and 0 (mapping closed, loan given back, receive buffer freed)", opened, live)
	}
	if code := mustGenerate(t, consumer, ipcConsumeReq(ref, nil)); code != codes.InvalidArgument {
		t.Errorf("Q-2 replay over cuda_ipc = %v, want INVALID_ARGUMENT", code)
	}
	if s := healthOf(t, consumer); s != pb.HealthState_HEALTH_STATE_READY {
		t.Errorf("Q-2 consumer after a definite rejection is %v, want READY", s)
	}
	ab, err := producer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}})
	if err != nil || ab.GetStatus() != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
		t.Errorf("SU-3 Abort of a consumed cuda_ipc reference = %v, %v; want ALREADY_FINISHED", ab.GetStatus(), err)
	}
	later := publish() // for Q-4 below: the producer refuses to publish once it quarantined
	fail, _ := structpb.NewStruct(map[string]any{"baton.transfer_fail": true})
	if code := mustGenerate(t, consumer, ipcConsumeReq(publish(), fail)); code != codes.Unavailable {
		t.Errorf("Q-1 consume whose loan failed after removal = %v, want UNAVAILABLE", code)
	}
	if s := healthOf(t, producer); s != pb.HealthState_HEALTH_STATE_NOT_READY {
		t.Errorf("Q-3/Q-4 producer after a failed loan is %v, want NOT_READY", s)
	}
	if s := healthOf(t, consumer); s != pb.HealthState_HEALTH_STATE_NOT_READY {
		t.Errorf("Q-1/Q-4 consumer after an uncertain transfer is %v, want NOT_READY", s)
	}
	load, _ := consumer.GetLoad(ctx)
	if q := load.GetAttributes().GetFields()["encoder.quarantine.buffers"].GetNumberValue(); q != 1 {
		t.Errorf("Q-1 consumer quarantine.buffers = %v, want 1", q)
	}
	if code := mustGenerate(t, consumer, ipcConsumeReq(later, nil)); code != codes.Unavailable {
		t.Errorf("Q-4 a new handoff on a quarantined consumer = %v, want UNAVAILABLE", code)
	}
}

// mustGenerate runs one Generate and returns its code.
func mustGenerate(t *testing.T, e *target.GRPCEngine, req *pb.GenerateRequest) codes.Code {
	t.Helper()
	res, err := e.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res.Code()
}

// TestCUDAIPCCopyFailure: a device-to-device copy that fails half-way,
// on a device that then synchronizes, fails the receive with UNAVAILABLE
// and no quarantine: nothing runs on the device any more, so the mapping
// is closed, the loan given back and the buffer freed. On a device
// that cannot synchronize the buffer and the mapping stay quarantined for
// the life of the process, the consumer is NOT_READY, and at
// its drain the GPU is not collected (S-3: only on a healthy consumer).
func TestCUDAIPCCopyFailure(t *testing.T) {
	for _, syncFails := range []bool{false, true} {
		name := "device synchronizes"
		if syncFails {
			name = "device cannot synchronize"
		}
		t.Run(name, func(t *testing.T) {
			fake := xfer.NewFakeIPC()
			_, producer := startEngine(t, Config{Role: RoleEncoder, Backend: BackendCUDAIPC, IPCDevice: fake.Device(0)})
			consumerSrv, consumer := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendCUDAIPC}, IPCDevice: fake.Device(1)})
			res, err := producer.Generate(context.Background(), ipcPublishReq(imageItem(t, "video-001.png")))
			if err != nil || res.Code() != codes.OK {
				t.Fatalf("publish: %v %v", res.Status, err)
			}
			fake.SetFaults(true, false, false)
			fake.SetFailSync(syncFails)
			if code := mustGenerate(t, consumer, ipcConsumeReq(res.EncoderReady().GetRef(), nil)); code != codes.Unavailable {
				t.Errorf("consume whose copy failed = %v, want UNAVAILABLE", code)
			}
			consumerSrv.Engine.gpu.returns.Wait()
			wantState, wantOpen := pb.HealthState_HEALTH_STATE_READY, 0
			if syncFails {
				wantState, wantOpen = pb.HealthState_HEALTH_STATE_NOT_READY, 1
			}
			if s := healthOf(t, consumer); s != wantState {
				t.Errorf("Q-4 consumer after a failed copy is %v, want %v", s, wantState)
			}
			if opened, live, _ := fake.Counts(); opened != wantOpen || (!syncFails && live != 0) {
				t.Errorf("after a failed copy %d mappings open and %d allocations live; want %d open (and nothing live when the device synchronized: the loan went back)", opened, live, wantOpen)
			}
			_, _, closesBefore := fake.Counts()
			fake.SetFailSync(false)
			if err := consumerSrv.Engine.Drain(time.Second); err != nil {
				t.Errorf("S-4 drain of an idle consumer: %v", err)
			}
			if syncFails {
				if opened, _, closes := fake.Counts(); opened != 1 || closes != closesBefore {
					t.Errorf("S-3 an unhealthy consumer's drain closed mappings or the device (open %d, device closes %d -> %d)", opened, closesBefore, closes)
				}
			}
		})
	}
}

// TestCollectGPU checks each S-3 condition of collectGPU directly.
func TestCollectGPU(t *testing.T) {
	newConsumer := func(t *testing.T, fake *xfer.FakeIPC) *Engine {
		t.Helper()
		e, err := New(Config{Role: RolePD, Preset: "tiny", AcceptBackends: []string{BackendCUDAIPC}, IPCDevice: fake.Device(1)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	earlier := errors.New("earlier drain failure")
	t.Run("never initialized: nothing collected", func(t *testing.T) {
		fake := xfer.NewFakeIPC()
		e := newConsumer(t, fake)
		if err := e.collectGPU(nil); err != nil {
			t.Errorf("collectGPU = %v, want nil", err)
		}
		if _, _, closes := fake.Counts(); closes != 0 || e.gpu.dev != nil {
			t.Errorf("S-3 a consumer that never received over cuda_ipc touched the device (closes %d, device opened %v)", closes, e.gpu.dev != nil)
		}
	})
	t.Run("healthy after a clean drain: collected", func(t *testing.T) {
		fake := xfer.NewFakeIPC()
		e := newConsumer(t, fake)
		if _, err := e.ipcDevice(); err != nil {
			t.Fatal(err)
		}
		if err := e.collectGPU(nil); err != nil {
			t.Errorf("collectGPU = %v, want nil", err)
		}
		if _, _, closes := fake.Counts(); closes != 1 {
			t.Errorf("S-3 healthy consumer: %d device closes, want 1", closes)
		}
	})
	t.Run("after a failed drain: skipped, the earlier failure kept", func(t *testing.T) {
		fake := xfer.NewFakeIPC()
		e := newConsumer(t, fake)
		_, _ = e.ipcDevice()
		fake.SetFaults(false, false, true)
		if err := e.collectGPU(earlier); !errors.Is(err, earlier) {
			t.Errorf("collectGPU(earlier) = %v, want the earlier failure", err)
		}
		if _, _, closes := fake.Counts(); closes != 0 {
			t.Errorf("S-3 collected after a failed drain (%d closes)", closes)
		}
	})
	t.Run("unhealthy: skipped", func(t *testing.T) {
		fake := xfer.NewFakeIPC()
		e := newConsumer(t, fake)
		_, _ = e.ipcDevice()
		e.health.Fail("encoder_cache", "Q-1 test")
		if err := e.collectGPU(nil); err != nil {
			t.Errorf("collectGPU on an unhealthy consumer = %v, want nil (skipped)", err)
		}
		if _, _, closes := fake.Counts(); closes != 0 {
			t.Errorf("S-3 collected on an unhealthy consumer (%d closes)", closes)
		}
	})
	t.Run("a failed collection is reported", func(t *testing.T) {
		fake := xfer.NewFakeIPC()
		e := newConsumer(t, fake)
		_, _ = e.ipcDevice()
		fake.SetFaults(false, false, true)
		if err := e.collectGPU(nil); err == nil || !strings.Contains(err.Error(), "S-3") {
			t.Errorf("collectGPU with a failing device = %v, want an S-3 error", err)
		}
	})
}

// TestCUDAIPCMalformedTransfer sends TransferEncoderCache requests a
// cuda_ipc producer must refuse before the claim (INVALID_ARGUMENT with the
// before-write trailer, Q-2), then shows the entry is still intact.
func TestCUDAIPCMalformedTransfer(t *testing.T) {
	fake := xfer.NewFakeIPC()
	srv, producer := startEngine(t, Config{Role: RoleEncoder, Backend: BackendCUDAIPC, IPCDevice: fake.Device(0)})
	_, consumer := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendCUDAIPC}, IPCDevice: fake.Device(1)})
	res, err := producer.Generate(context.Background(), ipcPublishReq(imageItem(t, "video-001.png")))
	if err != nil || res.Code() != codes.OK {
		t.Fatalf("publish: %v %v", res.Status, err)
	}
	ref := res.EncoderReady().GetRef()
	conn, err := grpc.NewClient(srv.lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	control := pb.NewControlClient(conn)
	good := func() *pb.TransferEncoderCacheRequest {
		rows := uint64(res.EncoderReady().GetItems()[0].GetEmbeddingRows())
		cols := uint64(srv.Engine.preset.OutDim)
		return &pb.TransferEncoderCacheRequest{Ref: ref, TransferId: "t", ConsumerAgent: xfer.IPCPeer{Name: "c", Device: 1}.Marshal(),
			Targets: []*pb.MemoryRegion{{Length: rows * cols * 4, DeviceId: 1, MemoryKind: "cuda"}}}
	}
	cases := map[string]func(r *pb.TransferEncoderCacheRequest){
		"host memory kind":    func(r *pb.TransferEncoderCacheRequest) { r.Targets[0].MemoryKind = "host" },
		"wrong length":        func(r *pb.TransferEncoderCacheRequest) { r.Targets[0].Length-- },
		"two targets for one": func(r *pb.TransferEncoderCacheRequest) { r.Targets = append(r.Targets, r.Targets[0]) },
		"no consumer agent":   func(r *pb.TransferEncoderCacheRequest) { r.ConsumerAgent = nil },
		"tcp agent metadata": func(r *pb.TransferEncoderCacheRequest) {
			r.ConsumerAgent = []byte(`{"v":1,"backend":"tcp","name":"c","device":1}`)
		},
		"garbage agent": func(r *pb.TransferEncoderCacheRequest) { r.ConsumerAgent = []byte("\x00\xff") },
		"tcp backend in the ref": func(r *pb.TransferEncoderCacheRequest) {
			r.Ref = proto.Clone(ref).(*pb.EncoderCacheRef)
			r.Ref.Backend = "tcp"
		},
		"opaque state truncated": func(r *pb.TransferEncoderCacheRequest) {
			r.Ref = proto.Clone(ref).(*pb.EncoderCacheRef)
			r.Ref.OpaqueState = r.Ref.OpaqueState[:10]
		},
		"another producer's name": func(r *pb.TransferEncoderCacheRequest) {
			r.Ref = proto.Clone(ref).(*pb.EncoderCacheRef)
			r.Ref.ProducerInstanceId = "00000000-0000-4000-8000-000000000000"
		},
	}
	for name, mutate := range cases {
		req := good()
		mutate(req)
		var trailer metadata.MD
		_, err := control.TransferEncoderCache(context.Background(), req, grpc.Trailer(&trailer))
		if code := status.Code(err); code != codes.InvalidArgument || !definiteRejection(err, trailer) {
			t.Errorf("%s: %v (trailer %v), want INVALID_ARGUMENT with %s: %s", name, err, trailer, TrailerTransferRejected, TrailerBeforeWrite)
		}
	}
	if code := mustGenerate(t, consumer, ipcConsumeReq(ref, nil)); code != codes.OK {
		t.Errorf("SU-4 the reference after %d rejected transfers = %v, want OK", len(cases), code)
	}
}

// TestCUDAIPCNeedsAGPU: without a GPU, --backend cuda_ipc and a consumer
// accepting cuda_ipc fail at start with an error saying so, and a CPU
// consumer does not advertise cuda_ipc.
func TestCUDAIPCNeedsAGPU(t *testing.T) {
	if inv, _ := nvml.Read(); inv.HasGPU() {
		t.Skip("this machine has a GPU: the no-GPU start errors cannot be seen here")
	}
	for _, cfg := range []Config{
		{Role: RoleEncoder, Backend: BackendCUDAIPC},
		{Role: RolePD, AcceptBackends: []string{BackendCUDAIPC}},
		{Role: RoleAggregated, Device: "cuda:0"},
	} {
		cfg.Preset = "tiny"
		_, err := New(cfg, nil)
		if err == nil || !strings.Contains(err.Error(), "GPU") && !strings.Contains(err.Error(), "driver") {
			t.Errorf("New(%s, backend %q, accept %v, device %q) = %v, want a start error naming the missing GPU", cfg.Role, cfg.Backend, cfg.AcceptBackends, cfg.Device, err)
		}
	}
	_, consumer := startEngine(t, Config{Role: RolePD})
	mi, err := consumer.GetModelInfo(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range mi.GetEncoder().GetBackends() {
		if b == BackendCUDAIPC {
			t.Errorf("N-1 a CPU consumer advertises cuda_ipc (%v)", mi.GetEncoder().GetBackends())
		}
	}
	h, _ := consumer.Health(context.Background())
	for _, c := range h.GetChecks() {
		if c.GetName() == "gpu" {
			t.Errorf("a CPU engine's Health has a gpu check: %v", c)
		}
	}
}

func TestParseDevice(t *testing.T) {
	for in, want := range map[string]string{"cpu": "cpu/0", "cuda:0": "cuda/0", "cuda:7": "cuda/7"} {
		kind, n, err := ParseDevice(in)
		if err != nil || kind+"/"+string(rune('0'+n)) != want {
			t.Errorf("ParseDevice(%q) = %s/%d, %v; want %s", in, kind, n, err, want)
		}
	}
	for _, bad := range []string{"", "gpu", "cuda", "cuda:", "cuda:-1", "cuda:01", "cuda:1024", "cuda:x", "CPU", "cuda:0 "} {
		if _, _, err := ParseDevice(bad); err == nil || !strings.Contains(err.Error(), "--device") {
			t.Errorf("ParseDevice(%q) = %v, want an error naming --device", bad, err)
		}
	}
	if _, err := New(Config{Role: RoleAggregated, Preset: "tiny", Device: "tpu:0"}, nil); err == nil {
		t.Error("New with --device tpu:0 started")
	}
}

// TestGPUHealthCheck: an engine that uses a GPU reports a "gpu" Health
// check from NVML (DEGRADED with the reason where NVML has no GPU, as in
// CI), and the check never changes the overall state.
func TestGPUHealthCheck(t *testing.T) {
	fake := xfer.NewFakeIPC()
	_, consumer := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendCUDAIPC}, IPCDevice: fake.Device(1)})
	inv, _ := nvml.Read()
	for range 2 { // the second answer comes from the cache
		h, err := consumer.Health(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if h.GetState() != pb.HealthState_HEALTH_STATE_READY {
			t.Errorf("Health = %v, want READY (the gpu check never changes the overall state)", h.GetState())
		}
		var gpu *pb.HealthCheck
		for _, c := range h.GetChecks() {
			if c.GetName() == "gpu" {
				gpu = c
			}
		}
		switch {
		case gpu == nil:
			t.Fatalf("Health of an engine using a GPU has no gpu check: %v", h.GetChecks())
		case inv.HasGPU() && gpu.GetState() != pb.HealthState_HEALTH_STATE_READY:
			t.Errorf("gpu check on a machine with a GPU = %v %q, want READY", gpu.GetState(), gpu.GetMessage())
		case !inv.HasGPU() && (gpu.GetState() != pb.HealthState_HEALTH_STATE_DEGRADED || !strings.Contains(gpu.GetMessage(), "NVML")):
			t.Errorf("gpu check without a GPU = %v %q, want DEGRADED naming NVML's reason", gpu.GetState(), gpu.GetMessage())
		}
	}
}

// TestCUDAIPCLoansAreNotFreedByTime: a loan its consumer never gives back
// is not freed by the collector however long it waits (the consumer may
// still map it, CONTRACT Q-6); when the reply carrying a loan is lost, the
// consumer gives the loan back with Abort (it never mapped it), so the
// producer frees the source, and its own receive buffer stays quarantined
// until the connections that carried the request have closed.
func TestCUDAIPCLoansAreNotFreedByTime(t *testing.T) {
	fake := xfer.NewFakeIPC()
	proxy, err := faultproxy.New("", faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	prodSrv, producer := startEngine(t, Config{Role: RoleEncoder, Backend: BackendCUDAIPC, IPCDevice: fake.Device(0), AdvertiseControl: proxy.Addr(), TransferTimeout: 500 * time.Millisecond})
	if err := proxy.SetUpstream(prodSrv.lis.Addr().String()); err != nil {
		t.Fatal(err)
	}
	consSrv, consumer := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendCUDAIPC}, IPCDevice: fake.Device(1), TransferTimeout: 500 * time.Millisecond})
	if err := consSrv.Engine.TrustPeers([]string{proxy.Addr()}, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	item := imageItem(t, "video-001.png")
	// A loan taken by a client that never gives it back.
	res, err := producer.Generate(ctx, ipcPublishReq(item))
	if err != nil || res.Code() != codes.OK {
		t.Fatalf("publish: %v %v", res.Status, err)
	}
	cc, err := grpc.NewClient(prodSrv.lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ref := res.EncoderReady().GetRef()
	req := &pb.TransferEncoderCacheRequest{Ref: ref, TransferId: "keeper", ConsumerAgent: xfer.IPCPeer{Name: "keeper", Device: 1}.Marshal(),
		Targets: []*pb.MemoryRegion{{Length: 196 * 512 * 4, DeviceId: 1, MemoryKind: "cuda"}}}
	if _, err := pb.NewControlClient(cc).TransferEncoderCache(ctx, req); err != nil {
		t.Fatalf("TransferEncoderCache: %v", err)
	}
	if err := prodSrv.Engine.store.Collect(time.Now().Add(24 * time.Hour).UnixMilli()); err != nil { // a day later
		t.Fatal(err)
	}
	if _, live, _ := fake.Counts(); live != 1 {
		t.Errorf("after a day's collection %d allocations live; want 1: the loan not given back is never freed by time (Q-6)", live)
	}
	// Anyone holding the reference may Abort it, but only the borrower
	// gives the loan back: a client racing the consume (or the reference's
	// publisher) frees nothing the consumer may still map (Q-6; found on the
	// H200 by the SU-3 race case under delayed transfer replies, where the
	// consumer then failed to open the handle).
	if ab, err := producer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}}); err != nil || ab.GetStatus() != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
		t.Fatalf("Abort of a lent entry by another peer = %v %v; want ALREADY_FINISHED (it was consumed)", ab.GetStatus(), err)
	}
	if _, live, _ := fake.Counts(); live != 1 {
		t.Errorf("after another peer's Abort %d allocations live; want 1: the lent source stays until its borrower gives it back", live)
	}
	if ab, err := pb.NewControlClient(cc).Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}}); err != nil || ab.GetStatus() != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
		t.Fatalf("giving the loan back = %v %v", ab.GetStatus(), err)
	}
	if _, live, _ := fake.Counts(); live != 0 {
		t.Errorf("after the borrower gave the loan back %d allocations live; want 0", live)
	}
	// A lost reply: the consumer gives the loan it never saw back.
	res, err = producer.Generate(ctx, ipcPublishReq(item))
	if err != nil || res.Code() != codes.OK {
		t.Fatalf("publish: %v %v", res.Status, err)
	}
	if err := proxy.SetPlan(faultproxy.Plan{Rules: map[string]faultproxy.Rule{target.MethodTransferEncoderCache: {Sequence: []faultproxy.Step{{Fault: faultproxy.FaultDropReply}}}}}); err != nil {
		t.Fatal(err)
	}
	if code := mustGenerate(t, consumer, ipcConsumeReq(res.EncoderReady().GetRef(), nil)); code != codes.Unavailable {
		t.Errorf("consume with its reply lost = %v; want UNAVAILABLE", code)
	}
	consSrv.Engine.gpu.returns.Wait()
	if _, live, _ := fake.Counts(); live != 1 {
		t.Errorf("after the lost reply %d allocations live; want 1 (the consumer's quarantined buffer; the loan went back)", live)
	}
	if s := healthOf(t, consumer); s != pb.HealthState_HEALTH_STATE_NOT_READY {
		t.Errorf("consumer after an uncertain cuda_ipc call = %v; want NOT_READY while the connection that carried it is open", s)
	}
	proxy.Close()
	waitFor(t, "the consumer's quarantine to end once the connection that carried the request closed (Q-6)", func() bool {
		_, live, _ := fake.Counts()
		return live == 0 && healthOf(t, consumer) == pb.HealthState_HEALTH_STATE_READY
	})
}
