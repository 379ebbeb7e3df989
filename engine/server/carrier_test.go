package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/faultproxy"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/handoff"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
)

const methodHealth = "/openengine.v1.Control/Health"

// carrierScenario is a consumer (PD) whose producer (E) sits behind a
// fault proxy: E stays up, and the proxy keeps the control connection of
// the consumer's producer client open for as long as the test runs, as an
// idle healthy connection to a live E does (the attack report's SIGSTOP E,
// consume, SIGCONT E).
type carrierScenario struct {
	proxy    *faultproxy.Proxy
	cons     *Server
	consumer *target.GRPCEngine
	ref      *pb.EncoderCacheRef
}

func newCarrierScenario(t *testing.T, hooks Hooks) *carrierScenario {
	t.Helper()
	proxy, err := faultproxy.New("", faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	prodSrv, producer := startEngine(t, Config{Role: RoleEncoder, Backend: BackendTCP, AdvertiseControl: proxy.Addr(), TransferTimeout: 500 * time.Millisecond})
	if err := proxy.SetUpstream(prodSrv.lis.Addr().String()); err != nil {
		t.Fatal(err)
	}
	cons, consumer := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}, TransferTimeout: 500 * time.Millisecond, Hooks: hooks})
	if err := cons.Engine.TrustPeers([]string{proxy.Addr()}, nil); err != nil {
		t.Fatal(err)
	}
	pub, err := producer.Generate(context.Background(), mediaPublish(imageItem(t, "video-001.png")))
	if err != nil || pub.Code() != codes.OK {
		t.Fatalf("publish: %v %v", pub.Status, err)
	}
	return &carrierScenario{proxy: proxy, cons: cons, consumer: consumer, ref: pub.EncoderReady().GetRef()}
}

// uncertain makes the next consume's TransferEncoderCache hang past the
// consumer's deadline (the proxy never forwards it: E, alive, answers
// nothing in time) and checks the consumer quarantined; the
// proxy applies rules to other methods, and before runs once they are set.
func (s *carrierScenario) uncertain(t *testing.T, rules map[string]faultproxy.Rule, before func()) {
	t.Helper()
	rules[target.MethodTransferEncoderCache] = faultproxy.Rule{Sequence: []faultproxy.Step{{Fault: faultproxy.FaultDropRequest}}}
	if err := s.proxy.SetPlan(faultproxy.Plan{Rules: rules}); err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before()
	}
	res, _ := s.consumer.Generate(context.Background(), consumeReq(s.ref))
	if res.Code() != codes.Unavailable || !strings.Contains(res.Status.Message(), "Q-1") {
		t.Fatalf("consume whose transfer hung past the deadline = %v; want UNAVAILABLE naming Q-1", res.Status)
	}
	if h, _ := s.consumer.Health(context.Background()); h.GetState() != pb.HealthState_HEALTH_STATE_NOT_READY {
		t.Errorf("Health after an uncertain transfer = %v; want NOT_READY (Q-4)", h.GetState())
	}
}

// TestQ6ConsumerClosesCarrierOfUncertainTransfer: after a transfer whose
// outcome is uncertain, with its producer alive and the control
// connection that carried the request open and healthy, the consumer's
// quarantine still ends (CONTRACT Q-6): the consumer revoked the
// registration, and it retires the producer client that carried the
// request, which leaves the cache at once and is closed once no other call
// uses it, so "every connection that carried the transfer has closed"
// becomes true without the producer's help. A call of another request
// in flight on that client is not cut (closing a gRPC client fails its
// calls with UNAVAILABLE, another uncertain outcome); the next handoff
// dials a fresh client and succeeds. Before this, the consumer stayed
// NOT_READY for as long as E lived (the attack report's SIGSTOP/SIGCONT E).
func TestQ6ConsumerClosesCarrierOfUncertainTransfer(t *testing.T) {
	s := newCarrierScenario(t, Hooks{})
	ctx := context.Background()
	p := &s.cons.Engine.producers
	// Another request's call on the same client, in flight across the
	// retirement: a Health through the proxy, held there for 2 s.
	other, err := p.get(s.proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	otherDone := make(chan error, 1)
	s.uncertain(t, map[string]faultproxy.Rule{methodHealth: {Sequence: []faultproxy.Step{{Fault: faultproxy.FaultDelay, Delay: 2 * time.Second}}}}, func() {
		go func() {
			_, err := other.client().Health(ctx, &pb.HealthRequest{})
			otherDone <- err
		}()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := s.proxy.WaitArrived(wctx, methodHealth, 1); err != nil {
			t.Fatalf("the other call never reached the proxy: %v", err)
		}
	})
	p.mu.Lock()
	cached := p.conns[s.proxy.Addr()]
	p.mu.Unlock()
	if cached == other {
		t.Errorf("the client that carried the uncertain transfer is still cached; want it retired (a new call dials afresh)")
	}
	if st := other.cc.GetState(); st == connectivity.Shutdown {
		t.Errorf("the retired client was closed while another call used it; want it open until that call ended")
	}
	if err := <-otherDone; err != nil {
		t.Errorf("another request's call in flight on the retired client = %v; want OK (never cut by the retirement)", err)
	}
	if h, _ := s.consumer.Health(ctx); h.GetState() != pb.HealthState_HEALTH_STATE_NOT_READY {
		t.Errorf("Health while another call holds the carrier open = %v; want NOT_READY (the carrier may still deliver)", h.GetState())
	}
	p.put(other)
	waitFor(t, "the consumer to return to READY once the registration is revoked and the retired carrier closed (Q-6)", func() bool {
		h, _ := s.consumer.Health(ctx)
		obs := s.cons.Engine.Observables()
		return h.GetState() == pb.HealthState_HEALTH_STATE_READY && obs["encoder.quarantine.buffers"] == 0 && obs["encoder.quarantine.bytes"] == 0
	})
	if st := other.cc.GetState(); st != connectivity.Shutdown {
		t.Errorf("the retired client after its last use: %v; want SHUTDOWN", st)
	}
	expectCalm(t, "consumer after Q-6", s.cons)
	if n := s.cons.Engine.Observables()["encoder.quarantine.entered"]; n != 1 {
		t.Errorf("encoder.quarantine.entered after one quarantine Q-6 ended = %g; want 1 (it still shows it happened)", n)
	}
	// E never got the request: the same reference is still consumable,
	// through a freshly dialled client.
	if got, _ := s.consumer.Generate(ctx, consumeReq(s.ref)); got.Code() != codes.OK || len(got.TokenIDs()) == 0 {
		t.Errorf("the next handoff after Q-6, E alive throughout = %v; want OK with tokens", got.Status)
	}
}

// TestQ6KeepCarrierOpenMutant runs the Q-6 mutant KeepCarrierOpen (the core switch)
// ("the consumer keeps the carrier open, so a quarantine lasts while the
// producer lives"), the engine before the consumer retired a carrier, and
// shows what TestQ6ConsumerClosesCarrierOfUncertainTransfer kills: with
// the registration's revocation done (nothing can land any more), the
// consumer stays NOT_READY while its producer lives, its carrier pinned
// through the cache's idle sweep and evictions (which never close a pinned
// client: the pin the cuda_ipc receive still relies on). Only the producer
// and the proxy going away end the quarantine.
func TestQ6KeepCarrierOpenMutant(t *testing.T) {
	s := newCarrierScenario(t, Hooks{Decisions: handoff.Mutants{KeepCarrierOpen: true}})
	ctx := context.Background()
	s.uncertain(t, map[string]faultproxy.Rule{}, nil)
	p := &s.cons.Engine.producers
	p.mu.Lock()
	carrier := p.conns[s.proxy.Addr()]
	later := time.Now().Add(time.Hour)
	p.now, p.max = func() time.Time { return later }, 2
	p.mu.Unlock()
	if carrier == nil {
		t.Fatal("no cached client for the producer the transfer went to; the mutant keeps it")
	}
	waitFor(t, "the revocation of the quarantined registration to be done", func() bool {
		return s.cons.Engine.agent.Counters().Revoked == 0
	})
	p.sweep() // an hour idle
	for i := range 4 {
		c, err := p.get(fmt.Sprintf("127.4.0.%d:1", i+1)) // evicts it
		if err != nil {
			t.Fatal(err)
		}
		p.put(c)
	}
	if st := carrier.cc.GetState(); st == connectivity.Shutdown {
		t.Fatalf("the cache closed a pinned carrier (state %v); want it open until its connections close by themselves", st)
	}
	if h, _ := s.consumer.Health(ctx); h.GetState() != pb.HealthState_HEALTH_STATE_NOT_READY {
		t.Errorf("Health of the mutant after the revocation is done, its producer alive = %v; want NOT_READY (the mutant's quarantine lasts while the producer lives)", h.GetState())
	}
	s.proxy.Close()
	waitFor(t, "the mutant's quarantine to end once the proxy closed the carriers", func() bool {
		h, _ := s.consumer.Health(ctx)
		return h.GetState() == pb.HealthState_HEALTH_STATE_READY
	})
	waitFor(t, "the evicted client to close once nothing pins it", func() bool { return carrier.cc.GetState() == connectivity.Shutdown })
}
