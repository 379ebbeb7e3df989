package xfer

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// tcpTarget is a tcp agent with one registered canary region and its
// inbound events.
type tcpTarget struct {
	agent  Agent
	md     []byte
	addr   string
	dst    []byte
	reg    *Registration
	events chan InboundEvent
}

func newTCPTarget(t *testing.T, name string, size int) *tcpTarget {
	t.Helper()
	x := &tcpTarget{events: make(chan InboundEvent, 16), dst: filled(size, canary)}
	a, err := NewTCP(TCPOptions{Options: Options{Name: name, OnInbound: func(ev InboundEvent) { x.events <- ev }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	x.agent = a
	x.reg = register(t, a, x.dst)
	if x.md, err = a.LocalMetadata(); err != nil {
		t.Fatal(err)
	}
	m, err := ParseMetadata(x.md)
	if err != nil {
		t.Fatal(err)
	}
	x.addr = m.Address
	return x
}

// postAndRelease posts req, waits for its end, releases it and returns the
// post's outcome.
func postAndRelease(t *testing.T, a Agent, req *Request) error {
	t.Helper()
	if _, err := a.Post(req); err == nil {
		wait(t, a, req)
	}
	_, err := a.Status(req)
	if rerr := a.Release(req); rerr != nil {
		t.Fatalf("Release after the transfer ended = %v", rerr)
	}
	return err
}

// TestCreateWriteToIsPerRequest (the attack run's A4): a request created
// with CreateWriteTo writes to the agent its own metadata describes, even
// when, before it is posted, other metadata pairing the same name with
// another agent's address is loaded into the table and used by another
// request. The table's name lookup (CreateWrite) is what such a load
// redirects; the per-request peer is not.
func TestCreateWriteToIsPerRequest(t *testing.T) {
	prod, err := NewTCP(TCPOptions{Options: Options{Name: "producer"}})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	pd1, pd2 := newTCPTarget(t, "pd1", 4096), newTCPTarget(t, "pd2", 4096)
	src := randomBytes(testSeed(t), 4096)
	sreg := register(t, prod, src)
	forged := encodeMetadata(BackendTCP, "pd1", pd2.addr)

	genuine, err := prod.CreateWriteTo(sreg.Descriptors, pd1.md, pd1.reg.Descriptors)
	if err != nil {
		t.Fatal(err)
	}
	// Between the genuine request's creation and its post: the same name
	// at pd2's address, loaded into the table and used per request.
	if peer, err := prod.LoadRemoteMetadata(forged); err != nil || peer != "pd1" {
		t.Fatalf("LoadRemoteMetadata(forged) = %q, %v", peer, err)
	}
	other, err := prod.CreateWriteTo(sreg.Descriptors, forged, pd1.reg.Descriptors)
	if err != nil {
		t.Fatal(err)
	}
	if err := postAndRelease(t, prod, genuine); err != nil {
		t.Fatalf("the genuine WRITE = %v; want it to land in pd1", err)
	}
	if !bytes.Equal(pd1.dst, src) || !allCanary(pd2.dst) {
		t.Fatal("the genuine WRITE did not land in pd1 alone")
	}
	if ev := <-pd1.events; ev.Outcome != InboundLanded {
		t.Errorf("pd1 saw %+v; want the genuine WRITE landed", ev)
	}
	if err := postAndRelease(t, prod, other); !isUncertain(err) {
		t.Errorf("a WRITE addressed to pd1 at pd2's address = %v; want refused by pd2 (ErrBackend)", err)
	}
	if ev := <-pd2.events; ev.Outcome != InboundRefused || ev.From != "producer" {
		t.Errorf("pd2 saw %+v; want a refused WRITE (addressed to another agent)", ev)
	}
	// The table's name lookup is what the load changed.
	viaName, err := prod.CreateWrite(sreg.Descriptors, "pd1", pd1.reg.Descriptors)
	if err != nil {
		t.Fatal(err)
	}
	if err := postAndRelease(t, prod, viaName); !isUncertain(err) {
		t.Errorf("CreateWrite by the name the forged metadata replaced = %v; want it sent to pd2 and refused", err)
	}
	if ev := <-pd2.events; ev.Outcome != InboundRefused {
		t.Errorf("pd2 saw %+v; want a refused WRITE", ev)
	}
	if err := prod.InvalidateRemoteMetadata("pd1"); err != nil {
		t.Fatal(err)
	}
	if err := prod.Deregister(sreg); err != nil {
		t.Fatal(err)
	}
	mustZero(t, prod)
}

// TestPerRequestPeersLeaveNothing (the attack run's A3 and A7): requests
// created for many distinct peers keep each peer only as long as the
// request; malformed metadata creates nothing. Both directions, both
// backends.
func TestPerRequestPeersLeaveNothing(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			p := b.make(t, nil)
			md, err := p.cons.LocalMetadata()
			if err != nil {
				t.Fatal(err)
			}
			m, err := ParseMetadata(md)
			if err != nil {
				t.Fatal(err)
			}
			src := register(t, p.prod, make([]byte, 64))
			dst := register(t, p.cons, make([]byte, 64))
			for i := range 500 {
				named := encodeMetadata(b.name, fmt.Sprintf("agent-%d", i), m.Address)
				create := p.prod.CreateWriteTo
				if i%2 == 1 {
					create = p.prod.CreateReadFrom
				}
				req, err := create(src.Descriptors, named, dst.Descriptors)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if err := p.prod.Release(req); err != nil {
					t.Fatal(err)
				}
			}
			for name, bad := range map[string][]byte{
				"nil":                  nil,
				"truncated":            md[:len(md)-1],
				"padded port":          encodeMetadata(BackendTCP, "x", "127.0.0.1:"+strings.Repeat("0", 1000)+"7202"),
				"another backend's md": encodeMetadata(map[string]string{BackendTCP: BackendLoopback, BackendLoopback: BackendTCP}[b.name], "x", "127.0.0.1:7202"),
			} {
				if _, err := p.prod.CreateWriteTo(src.Descriptors, bad, dst.Descriptors); !errors.Is(err, ErrInvalidParam) {
					t.Errorf("CreateWriteTo with %s metadata = %v; want ErrInvalidParam", name, err)
				}
				if _, err := p.prod.CreateReadFrom(src.Descriptors, bad, dst.Descriptors); !errors.Is(err, ErrInvalidParam) {
					t.Errorf("CreateReadFrom with %s metadata = %v; want ErrInvalidParam", name, err)
				}
			}
			if c := p.prod.Counters(); c.Peers != 0 || c.Requests != 0 {
				t.Errorf("after 500 per-request peers: %+v; want no peer and no request", c)
			}
			// A genuine per-request WRITE still lands and leaves nothing.
			req, err := p.prod.CreateWriteTo(src.Descriptors, md, dst.Descriptors)
			if err != nil {
				t.Fatal(err)
			}
			if err := postAndRelease(t, p.prod, req); err != nil {
				t.Fatalf("genuine CreateWriteTo = %v", err)
			}
			if err := p.prod.Deregister(src); err != nil {
				t.Fatal(err)
			}
			mustZero(t, p.prod)
		})
	}
}

// TestCheckRemote: the remote-side checks of CreateWrite, callable before
// a transfer is committed to.
func TestCheckRemote(t *testing.T) {
	key := []byte("0123456789abcdef")
	ok := Descriptor{Address: 1 << 36, Length: 10, MemoryKind: MemoryHost, RemoteKey: key}
	with := func(f func(d *Descriptor)) []Descriptor { d := ok; f(&d); return []Descriptor{d} }
	if err := CheckRemote([]Descriptor{ok, ok}); err != nil {
		t.Fatalf("CheckRemote(valid) = %v", err)
	}
	for _, c := range []struct {
		name   string
		remote []Descriptor
		want   error
	}{
		{"none", nil, ErrInvalidParam},
		{"too many", make([]Descriptor, MaxSegments+1), ErrInvalidParam},
		{"empty", with(func(d *Descriptor) { d.Length = 0 }), ErrInvalidParam},
		{"wraps", with(func(d *Descriptor) { d.Address = ^uint64(0) }), ErrInvalidParam},
		{"no key", with(func(d *Descriptor) { d.RemoteKey = nil }), ErrInvalidParam},
		{"long key", with(func(d *Descriptor) { d.RemoteKey = make([]byte, maxRemoteKeyBytes+1) }), ErrInvalidParam},
		{"cuda", with(func(d *Descriptor) { d.MemoryKind = MemoryCUDA }), ErrNotSupported},
		{"unknown kind", with(func(d *Descriptor) { d.MemoryKind = "disk" }), ErrNotSupported},
	} {
		if err := CheckRemote(c.remote); !errors.Is(err, c.want) {
			t.Errorf("CheckRemote(%s) = %v; want %v", c.name, err, c.want)
		}
	}
}

// TestTCPIdlePoolBounded: clean writes to more peers than maxIdleTotal
// keep at most maxIdleTotal connections: the longest-kept one goes first,
// the newest is reused.
func TestTCPIdlePoolBounded(t *testing.T) {
	netw := &countingNetwork{}
	prod, err := NewTCP(TCPOptions{Options: Options{Name: "producer"}, Network: netw})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	tr := prod.(*core).tr.(*tcpTransport)
	src := register(t, prod, make([]byte, 16))
	targets := make([]*tcpTarget, maxIdleTotal+6)
	writeTo := func(x *tcpTarget) {
		t.Helper()
		req, err := prod.CreateWriteTo(src.Descriptors, x.md, x.reg.Descriptors)
		if err != nil {
			t.Fatal(err)
		}
		if err := postAndRelease(t, prod, req); err != nil {
			t.Fatal(err)
		}
		<-x.events
	}
	for i := range targets {
		targets[i] = newTCPTarget(t, fmt.Sprintf("consumer-%d", i), 16)
		writeTo(targets[i])
	}
	tr.mu.Lock()
	kept, counted := 0, tr.idleN
	for _, conns := range tr.idle {
		kept += len(conns)
	}
	tr.mu.Unlock()
	if kept != maxIdleTotal || counted != kept {
		t.Fatalf("%d connections kept (counted %d) after clean writes to %d peers; want %d", kept, counted, len(targets), maxIdleTotal)
	}
	dials := netw.dials.Load()
	writeTo(targets[len(targets)-1])
	if got := netw.dials.Load(); got != dials {
		t.Errorf("a write to the newest peer dialled again (%d dials, want %d): its kept connection was not reused", got, dials)
	}
	writeTo(targets[0])
	if got := netw.dials.Load(); got != dials+1 {
		t.Errorf("a write to the longest-kept peer made %d dials; want 1 (its connection was closed to bound the pool)", got-dials)
	}
}
