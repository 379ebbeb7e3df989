package xfer

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// countingNetwork is TCPNetwork that counts dials.
type countingNetwork struct {
	TCPNetwork
	dials atomic.Int64
}

func (n *countingNetwork) Dial(ctx context.Context, address string, deadline time.Time) (net.Conn, error) {
	n.dials.Add(1)
	return n.TCPNetwork.Dial(ctx, address, deadline)
}

// TestTCPConnectionReuse: clean writes reuse one connection; a write that
// failed never gives its connection back.
func TestTCPConnectionReuse(t *testing.T) {
	netw := &countingNetwork{}
	fail := FaultHook(func(w WriteInfo) Fault {
		if w.Seq == 4 {
			return Fault{Kind: FaultFailAfter, AfterBytes: 10}
		}
		return Fault{}
	})
	cons, _, dst, creg, events := tcpConsumer(t, TCPOptions{}, 50_000)
	prod, err := NewTCP(TCPOptions{Options: Options{Name: "producer", Faults: fail}, Network: netw})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	md, _ := cons.LocalMetadata()
	peer, _ := prod.LoadRemoteMetadata(md)
	src := randomBytes(testSeed(t), len(dst))
	preg := register(t, prod, src)
	for i := 1; i <= 5; i++ {
		err := write(t, prod, preg.Descriptors, peer, creg.Descriptors)
		if (i == 4) != (err != nil) {
			t.Fatalf("write %d = %v", i, err)
		}
		<-events
		want := map[int]int64{1: 1, 2: 1, 3: 1, 4: 1, 5: 2}[i]
		if got := netw.dials.Load(); got != want {
			t.Fatalf("after write %d: %d dials, want %d", i, got, want)
		}
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("last write did not land")
	}
}

// TestTCPStalePooledConnectionRetried: the target agent restarts on the same
// address, so the producer's pooled connection is dead. No body byte was
// sent on it, so the write is retried on a fresh connection and succeeds
// instead of turning into an uncertain outcome (CONTRACT Q-1 would
// otherwise quarantine a healthy consumer's buffers).
func TestTCPStalePooledConnectionRetried(t *testing.T) {
	netw := &countingNetwork{}
	cons1, addr, _, creg1, events1 := tcpConsumer(t, TCPOptions{}, 1000)
	prod, _ := NewTCP(TCPOptions{Options: Options{Name: "producer"}, Network: netw})
	defer prod.Close()
	md, _ := cons1.LocalMetadata()
	peer, _ := prod.LoadRemoteMetadata(md)
	src := randomBytes(testSeed(t), 1000)
	preg := register(t, prod, src)
	for range 2 {
		if err := write(t, prod, preg.Descriptors, peer, creg1.Descriptors); err != nil {
			t.Fatal(err)
		}
		<-events1
	}
	if got := netw.dials.Load(); got != 1 {
		t.Fatalf("%d dials for two clean writes, want 1 (the connection is pooled)", got)
	}
	cons1.Close() // closes the connection the producer keeps

	events2 := make(chan InboundEvent, 4)
	cons2, err := NewTCP(TCPOptions{Options: Options{Name: "consumer", OnInbound: func(ev InboundEvent) { events2 <- ev }}, ListenAddress: addr})
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	defer cons2.Close()
	dst2 := filled(1000, canary)
	creg2 := register(t, cons2, dst2)
	md2, _ := cons2.LocalMetadata()
	if !bytes.Equal(md, md2) {
		t.Fatal("restarted consumer advertises other metadata; the test needs the same")
	}
	if err := write(t, prod, preg.Descriptors, peer, creg2.Descriptors); err != nil {
		t.Fatalf("write after the target restarted = %v", err)
	}
	if ev := <-events2; ev.Outcome != InboundLanded || !bytes.Equal(dst2, src) {
		t.Fatalf("inbound event %+v; data landed: %v", ev, bytes.Equal(dst2, src))
	}
	if got := netw.dials.Load(); got != 2 {
		t.Fatalf("%d dials, want 2 (the stale connection is replaced once)", got)
	}
}
