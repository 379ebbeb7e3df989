package xfer

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// canary fills memory nobody may write.
const canary = 0xEE

// testTimeout bounds every wait of a test so a bug fails instead of hanging.
const testTimeout = 20 * time.Second

// pair is a producer (initiator) and a consumer (target) agent of one backend.
type pair struct {
	prod, cons Agent
	events     chan InboundEvent // the consumer's OnInbound
}

type backendCase struct {
	name string
	make func(t *testing.T, faults FaultHook) *pair
}

func backends() []backendCase {
	return []backendCase{
		{BackendLoopback, func(t *testing.T, faults FaultHook) *pair {
			reg := NewRegistry()
			p := &pair{events: make(chan InboundEvent, 256)}
			var err error
			if p.cons, err = NewLoopback(reg, Options{Name: "consumer", OnInbound: func(ev InboundEvent) { p.events <- ev }}); err != nil {
				t.Fatal(err)
			}
			if p.prod, err = NewLoopback(reg, Options{Name: "producer", Faults: faults}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.prod.Close(); p.cons.Close() })
			return p
		}},
		{BackendTCP, func(t *testing.T, faults FaultHook) *pair {
			p := &pair{events: make(chan InboundEvent, 256)}
			var err error
			if p.cons, err = NewTCP(TCPOptions{Options: Options{Name: "consumer", OnInbound: func(ev InboundEvent) { p.events <- ev }}}); err != nil {
				t.Fatal(err)
			}
			if p.prod, err = NewTCP(TCPOptions{Options: Options{Name: "producer", Faults: faults}}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.prod.Close(); p.cons.Close() })
			return p
		}},
	}
}

// connect loads the consumer's metadata into the producer.
func (p *pair) connect(t *testing.T) string {
	t.Helper()
	md, err := p.cons.LocalMetadata()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := p.prod.LoadRemoteMetadata(md)
	if err != nil {
		t.Fatalf("LoadRemoteMetadata = %v", err)
	}
	if peer != p.cons.Name() {
		t.Fatalf("LoadRemoteMetadata = %q, want %q", peer, p.cons.Name())
	}
	return peer
}

// event waits for the consumer's next inbound event.
func (p *pair) event(t *testing.T) InboundEvent {
	t.Helper()
	select {
	case ev := <-p.events:
		return ev
	case <-time.After(testTimeout):
		t.Fatal("no inbound event")
	}
	return InboundEvent{}
}

// register registers bufs, failing the test on error.
func register(t *testing.T, a Agent, bufs ...[]byte) *Registration {
	t.Helper()
	reg, err := a.RegisterMemory(bufs)
	if err != nil {
		t.Fatalf("%s.RegisterMemory = %v", a.Name(), err)
	}
	return reg
}

// wait waits for req with the test timeout.
func wait(t *testing.T, a Agent, req *Request) (Status, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	st, err := Wait(ctx, a, req)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("write did not finish")
	}
	return st, err
}

// write creates, posts and waits for one write, then releases it; it
// returns the outcome of the wait.
func write(t *testing.T, a Agent, local []Descriptor, peer string, remote []Descriptor) error {
	t.Helper()
	req, err := a.CreateWrite(local, peer, remote)
	if err != nil {
		t.Fatalf("CreateWrite = %v", err)
	}
	if _, perr := a.Post(req); perr == nil {
		wait(t, a, req)
	}
	_, err = a.Status(req) // the post's outcome, whether Post or the wait saw it
	if rerr := a.Release(req); rerr != nil {
		t.Fatalf("Release after the write ended = %v", rerr)
	}
	return err
}

// randomBytes returns n seeded random bytes.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func filled(n int, v byte) []byte { return bytes.Repeat([]byte{v}, n) }

// allCanary reports whether b is untouched.
func allCanary(b []byte) bool { return bytes.Count(b, []byte{canary}) == len(b) }

// isUncertain: the errors a failed post may carry (package doc, "How errors
// collapse").
func isUncertain(err error) bool {
	return errors.Is(err, ErrBackend) || errors.Is(err, ErrRemoteDisconnect) || errors.Is(err, ErrCanceled)
}

// mustZero fails unless every counter is zero.
func mustZero(t *testing.T, a Agent) {
	t.Helper()
	if c := a.Counters(); c != (Counters{}) {
		t.Fatalf("%s.Counters() = %+v, want all zero", a.Name(), c)
	}
}

func testSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	t.Logf("SEED=%d", seed)
	return seed
}
