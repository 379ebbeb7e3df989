package server

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/faultproxy"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/xfer"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// countingListener accepts connections on loopback and counts them; it
// never answers (hang) or closes them at once.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
	hang     bool
}

func listenCounting(t *testing.T, hang bool) *countingListener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &countingListener{Listener: l, hang: hang}
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				for _, h := range held {
					h.Close()
				}
				return
			}
			c.accepted.Add(1)
			if hang {
				held = append(held, conn) // accepts and never answers
			} else {
				conn.Close()
			}
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return c
}

func (c *countingListener) hostPort() (string, uint32) {
	a := c.Addr().(*net.TCPAddr)
	return a.IP.String(), uint32(a.Port)
}

// forgedTCPRef is the forged reference of the attack report: a well-formed
// tcp reference whose tag nobody can check but its producer, naming
// host:port as the producer's control endpoint.
func forgedTCPRef(host string, port uint32) *pb.EncoderCacheRef {
	opaque := `{"v":1,"id":"` + strings.Repeat("ab", 16) + `","exp":4102444800000,"items":[{"hash":"` + strings.Repeat("cd", 32) + `","rows":196,"cols":512}],"tag":"` + strings.Repeat("ef", 32) + `"}`
	return &pb.EncoderCacheRef{Backend: BackendTCP, ProducerInstanceId: "3f2a7c1e-0b4d-4e8f-9a6b-5c7d8e9f0a1b",
		ProducerEndpoint: &pb.KvEndpoint{Host: host, Port: port, Protocol: "grpc"}, OpaqueState: []byte(opaque)}
}

func consumeReq(ref *pb.EncoderCacheRef) *pb.GenerateRequest {
	return &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "<image> Describe."}, Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(6)},
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}}
}

func mediaPublish(items ...*pb.MediaItem) *pb.GenerateRequest {
	return &pb.GenerateRequest{Media: items, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}}
}

// expectCalm fails unless s is READY with nothing quarantined or in flight.
func expectCalm(t *testing.T, who string, s *Server) {
	t.Helper()
	obs := s.Engine.Observables()
	h, _ := (&control{e: s.Engine}).Health(context.Background(), &pb.HealthRequest{})
	if h.GetState() != pb.HealthState_HEALTH_STATE_READY || obs["encoder.quarantine.buffers"] != 0 || obs["encoder.receives.inflight"] != 0 {
		t.Errorf("%s: Health %v, quarantine.buffers %g, receives.inflight %g; want READY, 0, 0 (SE-4: no request takes an engine out of READY)",
			who, h.GetState(), obs["encoder.quarantine.buffers"], obs["encoder.receives.inflight"])
	}
}

// TestSE3UntrustedProducerEndpointRefusedBeforeConnect: the attack report's
// forged tcp reference naming any loopback port is FAILED_PRECONDITION
// before the consumer connects anywhere, and the consumer stays READY.
func TestSE3UntrustedProducerEndpointRefusedBeforeConnect(t *testing.T) {
	srv, consumer := startEngineAlone(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}}, nil)
	lis := listenCounting(t, false)
	host, port := lis.hostPort()
	for _, ref := range []*pb.EncoderCacheRef{forgedTCPRef(host, port), forgedTCPRef("127.0.0.1", 1), forgedTCPRef("localhost", port)} {
		res, err := consumer.Generate(context.Background(), consumeReq(ref))
		if err != nil {
			t.Fatal(err)
		}
		if res.Code() != codes.FailedPrecondition || !strings.Contains(res.Status.Message(), "SE-3") || len(res.TokenIDs()) > 0 {
			t.Errorf("consume of a reference naming %s:%d = %v; want FAILED_PRECONDITION naming SE-3", ref.GetProducerEndpoint().GetHost(), ref.GetProducerEndpoint().GetPort(), res.Status)
		}
	}
	if n := lis.accepted.Load(); n != 0 {
		t.Errorf("the consumer connected %d times to an endpoint it does not trust; want 0 (SE-3: before any connection)", n)
	}
	expectCalm(t, "consumer", srv)
}

// TestQ2RefusedConnectionIsDefinite: a trusted producer endpoint that
// refuses connections (a stale reference after its producer died) is a
// definite outcome: UNAVAILABLE, the buffers released, the consumer READY,
// and its next valid handoff succeeds.
func TestQ2RefusedConnectionIsDefinite(t *testing.T) {
	prodSrv, producer := startEngine(t, Config{Role: RoleEncoder, Backend: BackendTCP})
	consSrv, consumer := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}})
	ctx := context.Background()
	item := imageItem(t, "video-001.png")
	// A port nothing listens on, trusted.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().(*net.TCPAddr)
	l.Close()
	if err := consSrv.Engine.TrustPeers([]string{dead.String()}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := consumer.Generate(ctx, consumeReq(forgedTCPRef("127.0.0.1", uint32(dead.Port))))
	if err != nil {
		t.Fatal(err)
	}
	if res.Code() != codes.Unavailable || !strings.Contains(res.Status.Message(), "Q-2") {
		t.Errorf("consume naming a refusing trusted endpoint = %v; want UNAVAILABLE (Q-2: nothing was sent)", res.Status)
	}
	expectCalm(t, "consumer after a refused connection", consSrv)
	pub, err := producer.Generate(ctx, mediaPublish(item))
	if err != nil || pub.Code() != codes.OK {
		t.Fatalf("publish: %v %v", pub.Status, err)
	}
	if got, _ := consumer.Generate(ctx, consumeReq(pub.EncoderReady().GetRef())); got.Code() != codes.OK || len(got.TokenIDs()) == 0 {
		t.Errorf("the next valid handoff = %v; want OK with tokens", got.Status)
	}
	// A stale reference: its producer has shut down since.
	stale, err := producer.Generate(ctx, mediaPublish(item))
	if err != nil || stale.Code() != codes.OK {
		t.Fatalf("publish: %v %v", stale.Status, err)
	}
	stopServer(t, prodSrv, producer)
	res, _ = consumer.Generate(ctx, consumeReq(stale.EncoderReady().GetRef()))
	if res.Code() != codes.Unavailable {
		t.Errorf("consume of a stale reference whose producer is gone = %v; want UNAVAILABLE", res.Status)
	}
	expectCalm(t, "consumer after a stale reference", consSrv)
}

// stopServer shuts srv down through Shutdown and waits until its port
// refuses connections.
func stopServer(t *testing.T, srv *Server, e *target.GRPCEngine) {
	t.Helper()
	if _, err := e.Shutdown(context.Background(), &pb.ShutdownRequest{ExpectedInstanceId: srv.Engine.InstanceID()}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", srv.lis.Addr().String(), time.Second)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(20 * time.Millisecond) // polling another goroutine's shutdown
	}
	t.Fatal("the server still listens 20 s after Shutdown")
}

// clientTransfer calls TransferEncoderCache on addr as a client would, with
// consumer_agent describing an agent at agentAddr.
func clientTransfer(t *testing.T, addr string, ref *pb.EncoderCacheRef, agentAddr string) (codes.Code, string, metadata.MD) {
	t.Helper()
	a, err := xfer.NewTCP(xfer.TCPOptions{Options: xfer.Options{Name: "attacker"}, AdvertiseAddress: agentAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	md, err := a.LocalMetadata()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	var trailer metadata.MD
	req := &pb.TransferEncoderCacheRequest{Ref: ref, TransferId: "attack", ConsumerAgent: md,
		Targets: []*pb.MemoryRegion{{Address: 1 << 36, Length: 196 * 512 * 4, MemoryKind: "host", RemoteKey: []byte("0123456789abcdef")}}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = pb.NewControlClient(cc).TransferEncoderCache(ctx, req, grpc.Trailer(&trailer))
	st := status.Convert(err)
	return st.Code(), st.Message(), trailer
}

// TestSE3UntrustedConsumerAgent: a client that names an untrusted consumer
// agent in TransferEncoderCache gets FAILED_PRECONDITION with the
// before-write trailer before the producer connects anywhere; the entry
// stays published. A trusted agent that accepts and never answers makes
// the call fail after the claim (Q-3, UNAVAILABLE), and the producer's
// quarantine ends once its WRITE has ended: READY again, nothing held.
func TestSE3UntrustedConsumerAgent(t *testing.T) {
	prodSrv, producer := startEngineAlone(t, Config{Role: RoleEncoder, Backend: BackendTCP, TransferTimeout: 400 * time.Millisecond}, nil)
	ctx := context.Background()
	hung := listenCounting(t, true)
	pub, err := producer.Generate(ctx, &pb.GenerateRequest{Media: []*pb.MediaItem{imageItem(t, "basn6a08.png")},
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}})
	if err != nil || pub.Code() != codes.OK {
		t.Fatalf("publish: %v %v", pub.Status, err)
	}
	ref := pub.EncoderReady().GetRef()
	code, msg, trailer := clientTransfer(t, prodSrv.lis.Addr().String(), ref, hung.Addr().String())
	if code != codes.FailedPrecondition || !strings.Contains(msg, "SE-3") || !slicesContain(trailer.Get(TrailerTransferRejected), TrailerBeforeWrite) {
		t.Errorf("TransferEncoderCache to an untrusted agent = %v %q, trailer %v; want FAILED_PRECONDITION naming SE-3 with the before-write trailer", code, msg, trailer)
	}
	if n := hung.accepted.Load(); n != 0 {
		t.Errorf("the producer connected %d times to an untrusted agent; want 0", n)
	}
	expectCalm(t, "producer after an untrusted agent", prodSrv)
	if obs := prodSrv.Engine.Observables(); obs["encoder.exports.entries"] != 1 {
		t.Errorf("encoder.exports.entries = %g after a refused transfer; want 1 (nothing claimed)", obs["encoder.exports.entries"])
	}
	// Trusted but hung: the WRITE waits for an acceptance that never comes.
	if err := prodSrv.Engine.TrustPeers(nil, []string{hung.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	code, msg, _ = clientTransfer(t, prodSrv.lis.Addr().String(), ref, hung.Addr().String())
	if code != codes.Unavailable || !strings.Contains(msg, "Q-3") {
		t.Errorf("TransferEncoderCache to a hung agent = %v %q; want UNAVAILABLE naming Q-3", code, msg)
	}
	waitFor(t, "the producer's quarantine to end after its WRITE ended (Q-6)", func() bool {
		obs := prodSrv.Engine.Observables()
		h, _ := (&control{e: prodSrv.Engine}).Health(ctx, &pb.HealthRequest{})
		return h.GetState() == pb.HealthState_HEALTH_STATE_READY && obs["encoder.quarantine.buffers"] == 0
	})
	if again, _ := producer.Generate(ctx, mediaPublish(imageItem(t, "basn6a08.png"))); again.Code() != codes.OK {
		t.Errorf("publish after the hung agent = %v; want OK", again.Status)
	}
}

// TestQ6ConsumerQuarantineEndsWhenConnectionsClose: a lost reply quarantines
// the consumer for as long as a connection that carried the transfer
// is open; once the producer and the proxy in front of it are gone, the
// quarantine ends: READY, counters 0, grpc.health.v1 SERVING, and the
// next handoff succeeds.
func TestQ6ConsumerQuarantineEndsWhenConnectionsClose(t *testing.T) {
	proxy, err := faultproxy.New("", faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	cfg := Config{Role: RoleEncoder, Backend: BackendTCP, AdvertiseControl: proxy.Addr(), TransferTimeout: 500 * time.Millisecond}
	prodSrv, producer := startEngine(t, cfg)
	if err := proxy.SetUpstream(prodSrv.lis.Addr().String()); err != nil {
		t.Fatal(err)
	}
	consSrv, consumer := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}, TransferTimeout: 500 * time.Millisecond})
	if err := consSrv.Engine.TrustPeers([]string{proxy.Addr()}, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	item := imageItem(t, "video-001.png")
	pub, err := producer.Generate(ctx, mediaPublish(item, item))
	if err != nil || pub.Code() != codes.OK {
		t.Fatalf("publish: %v %v", pub.Status, err)
	}
	if err := proxy.SetPlan(faultproxy.Plan{Rules: map[string]faultproxy.Rule{target.MethodTransferEncoderCache: {Sequence: []faultproxy.Step{{Fault: faultproxy.FaultDropReply}}}}}); err != nil {
		t.Fatal(err)
	}
	res, _ := consumer.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "<image> <image> Describe."}, Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(6)},
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: pub.EncoderReady().GetRef()}}})
	if res.Code() != codes.Unavailable || !strings.Contains(res.Status.Message(), "Q-1") {
		t.Fatalf("consume with its reply lost = %v; want UNAVAILABLE naming Q-1", res.Status)
	}
	obs := consSrv.Engine.Observables()
	if obs["encoder.quarantine.buffers"] != 2 {
		t.Errorf("encoder.quarantine.buffers = %g after an uncertain 2-item receive; want 2 (buffers, not receives)", obs["encoder.quarantine.buffers"])
	}
	if st := grpcHealth(t, consSrv); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("grpc.health.v1 of a quarantined consumer = %v; want NOT_SERVING (SE-5)", st)
	}
	h, _ := consumer.Health(ctx)
	if h.GetState() != pb.HealthState_HEALTH_STATE_NOT_READY {
		t.Errorf("Health while the connections that carried the transfer are open = %v; want NOT_READY (Q-4)", h.GetState())
	}
	proxy.Close()
	stopServer(t, prodSrv, producer)
	waitFor(t, "the consumer's quarantine to end once every connection that carried the transfer closed (Q-6)", func() bool {
		h, _ := consumer.Health(ctx)
		return h.GetState() == pb.HealthState_HEALTH_STATE_READY
	})
	expectCalm(t, "consumer after Q-6", consSrv)
	if st := grpcHealth(t, consSrv); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("grpc.health.v1 after the quarantine ended = %v; want SERVING (SE-5)", st)
	}
	_, producer2 := startEngine(t, Config{Role: RoleEncoder, Backend: BackendTCP})
	pub2, err := producer2.Generate(ctx, mediaPublish(item))
	if err != nil || pub2.Code() != codes.OK {
		t.Fatalf("publish: %v %v", pub2.Status, err)
	}
	if got, _ := consumer.Generate(ctx, consumeReq(pub2.EncoderReady().GetRef())); got.Code() != codes.OK || len(got.TokenIDs()) == 0 {
		t.Errorf("the next handoff after Q-6 = %v; want OK with tokens", got.Status)
	}
}

// TestSE5GRPCHealthMirrorsHealth: grpc.health.v1 follows Health through
// NOT_READY and DRAINING.
func TestSE5GRPCHealthMirrorsHealth(t *testing.T) {
	srv, _ := startEngine(t, Config{Role: RolePD})
	if st := grpcHealth(t, srv); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("grpc.health.v1 of a READY engine = %v; want SERVING", st)
	}
	srv.Engine.failCleanup("test", errTest)
	if st := grpcHealth(t, srv); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("grpc.health.v1 of a NOT_READY engine = %v; want NOT_SERVING", st)
	}
	srv2, _ := startEngine(t, Config{Role: RolePD})
	srv2.Engine.mu.Lock()
	srv2.Engine.health.StartDrain()
	srv2.Engine.mu.Unlock()
	srv2.Engine.healthChanged()
	if st := grpcHealth(t, srv2); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("grpc.health.v1 of a DRAINING engine = %v; want NOT_SERVING", st)
	}
}

var errTest = errTestType("injected by the test")

type errTestType string

func (e errTestType) Error() string { return string(e) }

// grpcHealth asks srv's grpc.health.v1 service for service "".
func grpcHealth(t *testing.T, srv *Server) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	cc, err := grpc.NewClient(srv.lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("grpc.health.v1 Check: %v", err)
	}
	return resp.GetStatus()
}

func slicesContain(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}
