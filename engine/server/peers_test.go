package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
)

// TestCallWindowCountsConnectionsThePeerSpokeOn: a call may have been
// carried only by a connection the producer wrote at least one byte on
// (gRPC sends nothing before it has read the server's preface): one it
// never spoke on, open or closed, is no carrier (attack A5: a port that
// accepts and never speaks gRPC); one it spoke on and that was open during
// the call is one, waited for by a quarantine. Whether anything was
// sent is sendWatch's to say (TestA5HostTrustSelfReferenceLeavesConsumerReady).
func TestCallWindowCountsConnectionsThePeerSpokeOn(t *testing.T) {
	type conn struct {
		before, speaks, closes bool
	}
	for _, c := range []struct {
		name      string
		conns     []conn
		carriers  int
		stillOpen int
	}{
		{"none", nil, 0, 0},
		{"dialled during the call, silent, closed", []conn{{closes: true}}, 0, 0},
		{"dialled during the call, silent, open", []conn{{}}, 0, 0},
		{"dialled during the call, spoke, closed", []conn{{speaks: true, closes: true}}, 0, 0},
		{"dialled during the call, spoke, open", []conn{{speaks: true}}, 1, 1},
		{"open before, silent", []conn{{before: true}}, 0, 0},
		{"open before, spoke, closed during the call", []conn{{before: true, speaks: true, closes: true}}, 1, 0},
		{"open before, spoke", []conn{{before: true, speaks: true}}, 1, 1},
		{"one silent, one that spoke", []conn{{before: true}, {speaks: true}}, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			pc := &producerConn{live: map[*trackedConn]struct{}{}}
			var tracked []*trackedConn
			var peers []net.Conn
			dial := func() {
				client, server := net.Pipe()
				t.Cleanup(func() { client.Close(); server.Close() })
				tracked, peers = append(tracked, pc.track(client)), append(peers, server)
			}
			for _, x := range c.conns {
				if x.before {
					dial()
				}
			}
			w := pc.begin()
			for _, x := range c.conns {
				if !x.before {
					dial()
				}
			}
			for i, x := range c.conns {
				if x.speaks {
					go peers[i].Write([]byte{0})
					if _, err := io.ReadFull(tracked[i], make([]byte, 1)); err != nil {
						t.Fatal(err)
					}
				}
				if x.closes {
					tracked[i].Close()
				}
			}
			carriers := w.carriers()
			open := 0
			for _, ch := range carriers {
				select {
				case <-ch:
				default:
					open++
				}
			}
			if len(carriers) != c.carriers || open != c.stillOpen {
				t.Errorf("carriers() = %d carriers (%d open); want %d carriers (%d open)", len(carriers), open, c.carriers, c.stillOpen)
			}
		})
	}
}

// TestA6RefusedProducersLeaveNoConnections: with a prefix trust entry,
// 1,000 forged references naming distinct producer addresses that refuse
// connections each end in the Q-2 refusal, and leave neither a cached
// client per address nor its goroutines behind (attack A6: 2,000 forged
// references grew PD from 11 to 8,015 goroutines, each client redialling
// forever).
func TestA6RefusedProducersLeaveNoConnections(t *testing.T) {
	srv, consumer := startEngineAlone(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}, TrustedProducers: []string{"127.0.0.0/8"}}, nil)
	ctx := context.Background()
	warm, err := consumer.Generate(ctx, consumeReq(forgedTCPRef("127.1.0.1", 1)))
	if err != nil || warm.Code() != codes.Unavailable {
		t.Fatalf("a reference naming a refused address = %v %v; want UNAVAILABLE (Q-2)", warm.Status, err)
	}
	before := runtime.NumGoroutine()
	const refs, workers = 1000, 8
	var wg sync.WaitGroup
	var bad atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for i := w; i < refs; i += workers {
				host := fmt.Sprintf("127.2.%d.%d", i/250, i%250+1)
				res, err := consumer.Generate(ctx, consumeReq(forgedTCPRef(host, 1)))
				if err != nil || res.Code() != codes.Unavailable {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Errorf("%d of %d references naming refused addresses did not end UNAVAILABLE (Q-2)", n, refs)
	}
	if n := srv.Engine.producers.size(); n > peerCacheMax {
		t.Errorf("the consumer caches %d producer clients after %d refused addresses; want at most %d", n, refs, peerCacheMax)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+32 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling: closed clients' goroutines end asynchronously
	}
	if after := runtime.NumGoroutine(); after > before+32 {
		t.Errorf("goroutines %d before, %d after %d refused addresses; want them bounded (within 32)", before, after, refs)
	}
	expectCalm(t, "consumer", srv)
}

// TestA6FailedConnectionIsClosed: a producer client whose connection was
// refused or never established is closed at once, not left to redial the
// address forever (attack A6b), and the next consume dials afresh.
func TestA6FailedConnectionIsClosed(t *testing.T) {
	closing := listenCounting(t, false)
	host, port := closing.hostPort()
	srv, consumer := startEngineAlone(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}, TrustedProducers: []string{closing.Addr().String()}}, nil)
	for i := range 2 {
		res, err := consumer.Generate(context.Background(), consumeReq(forgedTCPRef(host, port)))
		if err != nil || res.Code() != codes.Unavailable {
			t.Fatalf("consume %d naming a port that accepts and closes = %v %v; want UNAVAILABLE", i, res.Status, err)
		}
		if n := srv.Engine.producers.size(); n != 0 {
			t.Errorf("after consume %d the consumer still caches %d producer clients; want 0 (a failed connection is closed)", i, n)
		}
		if n := srv.Engine.producers.open(); n != 0 {
			t.Errorf("after consume %d %d producer clients are still open; want 0", i, n)
		}
	}
	if n := closing.accepted.Load(); n < 2 {
		t.Errorf("the endpoint saw %d connections for 2 consumes; want a fresh dial each", n)
	}
}

// serveControl serves a bare Control service on loopback (an endpoint a
// producer client can connect to) and returns its address.
func serveControl(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	pb.RegisterControlServer(gs, &pb.UnimplementedControlServer{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// TestProducerClientsBounded: the cache of producer clients is an LRU of
// at most max entries; an evicted client is closed once no call uses it;
// an idle one (unused for idle) is closed by the sweep; a client pinned
// by an uncertain transfer (its carriers, the proof that ends a
// quarantine, CONTRACT Q-6) is closed by neither until the proof arrives.
func TestProducerClientsBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	p := &producerClients{max: 4, idle: time.Minute, now: func() time.Time { return now }}
	defer p.close()
	shut := func(c *producerConn) bool { return c.cc.GetState() == connectivity.Shutdown }
	addrs := make([]string, 10)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("127.3.0.%d:1", i+1)
	}
	// LRU: 10 addresses through a cache of 4.
	var inUse, pinned *producerConn
	proof := make(chan struct{})
	for i, a := range addrs {
		c, err := p.get(a)
		if err != nil {
			t.Fatal(err)
		}
		switch i {
		case 0:
			inUse = c // held through the evictions
		case 1:
			pinned = c
			p.pin(c, []<-chan struct{}{proof})
			p.put(c)
		default:
			p.put(c)
		}
	}
	if n := p.size(); n != 4 {
		t.Errorf("cached %d clients after 10 addresses; want 4", n)
	}
	if shut(inUse) || shut(pinned) {
		t.Errorf("an evicted client still in use (%v) or pinned (%v) was closed; want both open", shut(inUse), shut(pinned))
	}
	if n := p.open(); n != 6 {
		t.Errorf("%d clients open; want 6 (4 cached, 1 in use, 1 pinned)", n)
	}
	p.put(inUse)
	close(proof)
	if !shut(inUse) {
		t.Errorf("an evicted client is open after its last use; want closed")
	}
	waitFor(t, "the pinned client to close once its proof arrived", func() bool { return shut(pinned) })
	// Idle: a client unused for a minute is closed by the sweep, unless pinned.
	live := serveControl(t)
	c, err := p.get(live)
	if err != nil {
		t.Fatal(err)
	}
	p.put(c)
	held, err := p.get(addrs[9])
	if err != nil {
		t.Fatal(err)
	}
	p.pin(held, []<-chan struct{}{make(chan struct{})}) // a proof that never comes
	p.put(held)
	now = now.Add(2 * time.Minute)
	p.sweep()
	if !shut(c) || shut(held) {
		t.Errorf("after the idle sweep: idle client closed %v, pinned client closed %v; want true, false", shut(c), shut(held))
	}
	if n := p.size(); n != 1 {
		t.Errorf("cached %d clients after the sweep; want 1 (the pinned one)", n)
	}
}
