package faultproxy

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestRefuseUnbindsThePort: while the proxy refuses, connecting to its
// address fails with ECONNREFUSED and the connections it had are closed;
// after Listen the same address serves calls again.
func TestRefuseUnbindsThePort(t *testing.T) {
	_, up := startUpstream(t)
	p := startProxy(t, up, Options{})
	cc := dial(t, p.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := callUnary(ctx, cc, methodUnary, "a"); err != nil || got != "echo:a" {
		t.Fatalf("call through the proxy = %q, %v", got, err)
	}
	open, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	waitTracked(t, p, 2)
	p.Refuse()
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial while refusing = %v; want ECONNREFUSED", err)
	}
	if err := readUntilClosed(open); err != nil {
		t.Errorf("a connection open before Refuse: %v; want it closed", err)
	}
	if err := p.Listen(); err != nil {
		t.Fatalf("Listen after Refuse: %v", err)
	}
	if err := p.Listen(); err != nil {
		t.Errorf("a second Listen: %v; want a no-op", err)
	}
	cc2 := dial(t, p.Addr())
	if got, err := callUnary(ctx, cc2, methodUnary, "b"); err != nil || got != "echo:b" {
		t.Errorf("call after Listen = %q, %v; want echo:b", got, err)
	}
}

// TestSetUpstreamClosesCallerConnections: replacing the upstream closes the
// callers' connections, as the replaced instance's own would have closed.
func TestSetUpstreamClosesCallerConnections(t *testing.T) {
	_, up1 := startUpstream(t)
	_, up2 := startUpstream(t)
	p := startProxy(t, up1, Options{})
	open, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	waitTracked(t, p, 1)
	if err := p.SetUpstream(up2); err != nil {
		t.Fatal(err)
	}
	if err := readUntilClosed(open); err != nil {
		t.Errorf("a caller connection after the upstream's replacement: %v; want it closed", err)
	}
	cc := dial(t, p.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := callUnary(ctx, cc, methodUnary, "c"); err != nil || got != "echo:c" {
		t.Errorf("call through the new upstream = %q, %v", got, err)
	}
}

// readUntilClosed reads c (the server's preface and frames) until it is
// closed; an error if it is still open after 5 s.
func readUntilClosed(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return errors.New("still open after 5 s")
			}
			return nil
		}
	}
}

// waitTracked waits until the proxy tracks n caller connections.
func waitTracked(t *testing.T, p *Proxy, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.listener.mu.Lock()
		got := len(p.listener.conns)
		p.listener.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy tracks %d connections, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond) // polling the accept loop
	}
}
