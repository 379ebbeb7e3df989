package xfer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// tcpConsumer starts a tcp consumer agent with one registered region and
// returns it, its address, its region and its inbound events.
func tcpConsumer(t *testing.T, opts TCPOptions, size int) (Agent, string, []byte, *Registration, chan InboundEvent) {
	t.Helper()
	events := make(chan InboundEvent, 64)
	opts.Name = "consumer"
	opts.OnInbound = func(ev InboundEvent) { events <- ev }
	cons, err := NewTCP(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	dst := filled(size, canary)
	reg := register(t, cons, dst)
	md, _ := cons.LocalMetadata()
	p, err := decodeMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	return cons, p.conn, dst, reg, events
}

// rawExchange sends b on a fresh connection, half-closes if asked, and
// returns every byte the target answered before it closed.
func rawExchange(t *testing.T, addr string, b []byte, closeWrite bool) []byte {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testTimeout))
	if _, err := conn.Write(b); err != nil {
		t.Fatal(err)
	}
	if closeWrite {
		conn.(*net.TCPConn).CloseWrite()
	}
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("target neither answered nor closed")
	}
	return got
}

// TestTCPTargetMalformedFrames: every malformed or hostile frame on the
// consumer's port is refused or dropped without writing a byte outside what
// a valid header granted, and the agent keeps serving.
func TestTCPTargetMalformedFrames(t *testing.T) {
	cons, addr, dst, reg, events := tcpConsumer(t, TCPOptions{}, 4096)
	d := reg.Descriptors[0]
	seg := func(addr, n uint64) Descriptor {
		return Descriptor{Address: addr, Length: n, MemoryKind: MemoryHost, RemoteKey: d.RemoteKey}
	}
	valid := encodeHeader("raw", "consumer", []Descriptor{seg(d.Address, 100)})
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), valid...)) }
	countAt := len(frameMagic) + 1 + len("consumer") + 1 + len("raw")
	keyLenAt := countAt + 2
	payload := randomBytes(testSeed(t), 150)

	cases := []struct {
		name       string
		frame      []byte
		closeWrite bool
		reply      []byte         // what the target answers before closing
		event      InboundOutcome // -1: no event
		landed     uint64
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\n\r\n"), false, nil, -1, 0},
		{"bad magic", edit(func(b []byte) []byte { b[3] = '2'; return b }), false, nil, -1, 0},
		{"truncated header", valid[:len(valid)-3], true, nil, -1, 0},
		{"zero segments", edit(func(b []byte) []byte { binary.BigEndian.PutUint16(b[countAt:], 0); return b }), false, nil, -1, 0},
		{"too many segments", edit(func(b []byte) []byte { binary.BigEndian.PutUint16(b[countAt:], MaxSegments+1); return b }), false, nil, -1, 0},
		{"empty key", edit(func(b []byte) []byte { b[keyLenAt] = 0; return b }), false, nil, -1, 0},
		{"65-byte key", edit(func(b []byte) []byte { b[keyLenAt] = 65; return append(b, make([]byte, 80)...) }), false, nil, -1, 0},
		{"empty target name", edit(func(b []byte) []byte { b[len(frameMagic)] = 0; return b }), false, nil, -1, 0},
		{"zero-length segment", encodeHeader("raw", "consumer", []Descriptor{seg(d.Address, 0)}), false, nil, -1, 0},
		{"lengths past 2^63", encodeHeader("raw", "consumer", []Descriptor{seg(d.Address, 1<<62), seg(d.Address, 1<<62), seg(d.Address, 1<<62)}), false, nil, -1, 0},
		{"another agent's name", encodeHeader("raw", "someone", []Descriptor{seg(d.Address, 100)}), false, []byte{replyRefuse}, InboundRefused, 0},
		{"unknown key", encodeHeader("raw", "consumer", []Descriptor{{Address: d.Address, Length: 100, RemoteKey: []byte("guess")}}), false, []byte{replyRefuse}, InboundRefused, 0},
		{"past the region", encodeHeader("raw", "consumer", []Descriptor{seg(d.Address+4000, 100)}), false, []byte{replyRefuse}, InboundRefused, 0},
		{"huge length", encodeHeader("raw", "consumer", []Descriptor{seg(d.Address, 1<<40)}), false, []byte{replyRefuse}, InboundRefused, 0},
		{"short body", append(append([]byte(nil), valid...), payload[:40]...), true, []byte{replyAccept}, InboundBroken, 40},
		{"body longer than declared", append(append([]byte(nil), valid...), payload...), false, []byte{replyAccept, replyAck}, InboundLanded, 100},
	}
	for _, tc := range cases {
		for i := range dst {
			dst[i] = canary
		}
		got := rawExchange(t, addr, tc.frame, tc.closeWrite)
		if !bytes.Equal(got, tc.reply) {
			t.Errorf("%s: target answered %x, want %x", tc.name, got, tc.reply)
		}
		if tc.event >= 0 {
			ev := <-events
			if ev.Outcome != tc.event || ev.Landed != tc.landed {
				t.Errorf("%s: inbound event %+v, want outcome %d with %d bytes", tc.name, ev, tc.event, tc.landed)
			}
		}
		if !bytes.Equal(dst[:tc.landed], payload[:tc.landed]) || !allCanary(dst[tc.landed:]) {
			t.Errorf("%s: region holds other bytes than the %d landed", tc.name, tc.landed)
		}
	}
	select {
	case ev := <-events:
		t.Fatalf("unexpected inbound event %+v", ev)
	default:
	}
	if c := cons.Counters(); c.InboundInFlight != 0 {
		t.Fatalf("InboundInFlight = %d after every connection ended", c.InboundInFlight)
	}
	if err := cons.Deregister(reg); err != nil {
		t.Fatal(err)
	}
}

// silentTarget accepts connections and never answers. It returns its
// address; the connections close with the test.
func silentTarget(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestTCPWriteTimeout: a target that accepts the connection but never
// answers fails the write with ErrBackend once WriteTimeout passes.
func TestTCPWriteTimeout(t *testing.T) {
	prod, err := NewTCP(TCPOptions{Options: Options{Name: "producer"}, WriteTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	peer, err := prod.LoadRemoteMetadata(encodeMetadata(BackendTCP, "silent", silentTarget(t)))
	if err != nil {
		t.Fatal(err)
	}
	preg := register(t, prod, make([]byte, 64))
	remote := Descriptor{Address: 1, Length: 64, MemoryKind: MemoryHost, RemoteKey: []byte{1}}
	if err := write(t, prod, preg.Descriptors, peer, []Descriptor{remote}); !errors.Is(err, ErrBackend) {
		t.Fatalf("write to a silent target = %v, want ErrBackend", err)
	}
}

// TestTCPDialFailure: a target nobody listens on fails the write with
// ErrRemoteDisconnect.
func TestTCPDialFailure(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	prod, _ := NewTCP(TCPOptions{Options: Options{Name: "producer"}})
	defer prod.Close()
	peer, _ := prod.LoadRemoteMetadata(encodeMetadata(BackendTCP, "gone", addr))
	preg := register(t, prod, make([]byte, 8))
	remote := Descriptor{Address: 1, Length: 8, MemoryKind: MemoryHost, RemoteKey: []byte{1}}
	if err := write(t, prod, preg.Descriptors, peer, []Descriptor{remote}); !errors.Is(err, ErrRemoteDisconnect) {
		t.Fatalf("write to a closed port = %v, want ErrRemoteDisconnect", err)
	}
}

// TestTCPTargetIdleTimeout: an initiator that stalls mid-body is dropped
// after IdleTimeout; the landed prefix is reported and the region can be
// deregistered again.
func TestTCPTargetIdleTimeout(t *testing.T) {
	cons, addr, dst, reg, events := tcpConsumer(t, TCPOptions{IdleTimeout: 200 * time.Millisecond}, 1000)
	d := reg.Descriptors[0]
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testTimeout))
	conn.Write(encodeHeader("raw", "consumer", []Descriptor{d}))
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil || b[0] != replyAccept {
		t.Fatalf("accept = %x, %v", b, err)
	}
	conn.Write([]byte("0123456789"))
	if ev := <-events; ev.Outcome != InboundBroken || ev.Landed != 10 {
		t.Fatalf("inbound event %+v, want broken after 10 bytes", ev)
	}
	if _, err := conn.Read(b[:]); err == nil {
		t.Fatal("target kept a stalled connection open")
	}
	if string(dst[:10]) != "0123456789" || !allCanary(dst[10:]) {
		t.Fatal("region holds other bytes than the landed prefix")
	}
	if err := cons.Deregister(reg); err != nil {
		t.Fatal(err)
	}
}

// pastClock is a Clock an hour behind: every deadline the agent sets from it
// has already passed.
type pastClock struct{}

func (pastClock) Now() time.Time { return time.Now().Add(-time.Hour) }

// TestTCPDeadlinesComeFromClock: the injected Clock, not the wall clock,
// sets the write deadline: with a clock an hour late the 30 s budget is
// already spent and the write fails with ErrBackend.
func TestTCPDeadlinesComeFromClock(t *testing.T) {
	cons, _, _, creg, _ := tcpConsumer(t, TCPOptions{}, 64)
	prod, _ := NewTCP(TCPOptions{Options: Options{Name: "producer", Clock: pastClock{}}})
	defer prod.Close()
	md, _ := cons.LocalMetadata()
	peer, _ := prod.LoadRemoteMetadata(md)
	preg := register(t, prod, make([]byte, 64))
	if err := write(t, prod, preg.Descriptors, peer, creg.Descriptors); !errors.Is(err, ErrBackend) {
		t.Fatalf("write with an expired clock = %v, want ErrBackend", err)
	}
}

// pipeNetwork is an in-memory Network over net.Pipe, as a simulator would
// provide one: each Listen gets the address "pipe:N".
type pipeNetwork struct {
	mu        sync.Mutex
	listeners map[string]*pipeListener
}

type pipeListener struct {
	addr  pipeAddr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

type pipeAddr string

func (pipeAddr) Network() string  { return "pipe" }
func (a pipeAddr) String() string { return string(a) }

func (n *pipeNetwork) Listen(string) (net.Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners == nil {
		n.listeners = map[string]*pipeListener{}
	}
	ln := &pipeListener{addr: pipeAddr(fmt.Sprintf("pipe:%d", len(n.listeners)+1)), conns: make(chan net.Conn), done: make(chan struct{})}
	n.listeners[string(ln.addr)] = ln
	return ln, nil
}

func (n *pipeNetwork) Dial(ctx context.Context, address string, _ time.Time) (net.Conn, error) {
	n.mu.Lock()
	ln := n.listeners[address]
	n.mu.Unlock()
	if ln == nil {
		return nil, errors.New("pipe: connection refused")
	}
	a, b := net.Pipe()
	select {
	case ln.conns <- b:
		return a, nil
	case <-ln.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return l.addr }

// TestTCPOverInjectedNetwork: the tcp backend runs unchanged over an
// injected in-memory Network.
func TestTCPOverInjectedNetwork(t *testing.T) {
	netw := &pipeNetwork{}
	cons, err := NewTCP(TCPOptions{Options: Options{Name: "consumer"}, Network: netw})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, _ := NewTCP(TCPOptions{Options: Options{Name: "producer"}, Network: netw, ListenAddress: "unused"})
	defer prod.Close()
	md, _ := cons.LocalMetadata()
	peer, err := prod.LoadRemoteMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	dst := filled(100_000, canary)
	creg := register(t, cons, dst)
	src := randomBytes(testSeed(t), len(dst))
	preg := register(t, prod, src)
	if err := write(t, prod, preg.Descriptors, peer, creg.Descriptors); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("write over the injected network did not land")
	}
}
