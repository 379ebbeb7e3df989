package xfer

import (
	"bytes"
	"errors"
	"testing"
)

// oneFault returns a hook that applies f to the first post only.
func oneFault(f Fault) FaultHook {
	return func(w WriteInfo) Fault {
		if w.Seq == 1 {
			return f
		}
		return Fault{}
	}
}

// TestHungWriteRefusesReleaseAndDeregister (CONTRACT Q-1, C-4): while a
// write may be in flight, Release is refused with ErrRepostActive (the
// handle stays valid), a repost is refused, and Deregister is refused on
// both sides; once the write ends (cancelled) all of them succeed.
func TestHungWriteRefusesReleaseAndDeregister(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			seed := testSeed(t)
			hang := NewHang()
			p := bc.make(t, oneFault(Fault{Kind: FaultHang, AfterBytes: 1000, Hang: hang}))
			peer := p.connect(t)
			dst := filled(50_000, canary)
			creg := register(t, p.cons, dst)
			src := randomBytes(seed, len(dst))
			preg := register(t, p.prod, src)
			req, err := p.prod.CreateWrite(preg.Descriptors, peer, creg.Descriptors)
			if err != nil {
				t.Fatal(err)
			}
			if st, err := p.prod.Post(req); st != StatusInProgress || err != nil {
				t.Fatalf("Post = %v, %v; want NIXL_IN_PROG", st, err)
			}
			<-hang.Reached()

			if st, err := p.prod.Status(req); st != StatusInProgress || err != nil {
				t.Fatalf("Status during the hang = %v, %v", st, err)
			}
			if err := p.prod.Release(req); !errors.Is(err, ErrRepostActive) {
				t.Fatalf("Release during the hang = %v, want ErrRepostActive", err)
			}
			if _, err := p.prod.Post(req); !errors.Is(err, ErrRepostActive) {
				t.Fatalf("Post during the hang = %v, want ErrRepostActive", err)
			}
			if err := p.prod.Deregister(preg); !errors.Is(err, ErrNotAllowed) {
				t.Fatalf("producer Deregister during the hang = %v, want ErrNotAllowed", err)
			}
			if err := p.cons.Deregister(creg); !errors.Is(err, ErrNotAllowed) {
				t.Fatalf("consumer Deregister during the hang = %v, want ErrNotAllowed", err)
			}
			if c := p.cons.Counters(); c.InboundInFlight != 1 {
				t.Fatalf("consumer InboundInFlight = %d during the hang, want 1", c.InboundInFlight)
			}
			if c := p.prod.Counters(); c.InFlight != 1 || c.Requests != 1 {
				t.Fatalf("producer counters during the hang = %+v", c)
			}

			hang.Cancel()
			if _, err := wait(t, p.prod, req); !errors.Is(err, ErrCanceled) {
				t.Fatalf("Wait after Cancel = %v, want ErrCanceled", err)
			}
			ev := p.event(t)
			if ev.Outcome != InboundBroken || ev.Landed > 1000 {
				t.Fatalf("inbound event %+v, want broken with at most 1000 bytes", ev)
			}
			if !bytes.Equal(dst[:ev.Landed], src[:ev.Landed]) || !allCanary(dst[ev.Landed:]) {
				t.Fatal("consumer memory holds other bytes than the landed prefix")
			}
			if err := p.prod.Release(req); err != nil {
				t.Fatalf("Release after the write ended = %v", err)
			}
			if err := p.prod.Release(req); !errors.Is(err, ErrInvalidParam) {
				t.Fatalf("second Release = %v, want ErrInvalidParam", err)
			}
			if err := p.prod.Deregister(preg); err != nil {
				t.Fatal(err)
			}
			if err := p.cons.Deregister(creg); err != nil {
				t.Fatal(err)
			}
			p.prod.InvalidateRemoteMetadata(peer)
			mustZero(t, p.prod)
			mustZero(t, p.cons)
		})
	}
}

// TestHangResumeCompletes: a hang that is resumed completes normally.
func TestHangResumeCompletes(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			hang := NewHang()
			p := bc.make(t, oneFault(Fault{Kind: FaultHang, AfterBytes: 1 << 40, Hang: hang}))
			peer := p.connect(t)
			dst := filled(10_000, canary)
			creg := register(t, p.cons, dst)
			src := randomBytes(testSeed(t), len(dst))
			preg := register(t, p.prod, src)
			req, err := p.prod.CreateWrite(preg.Descriptors, peer, creg.Descriptors)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.prod.Post(req); err != nil {
				t.Fatal(err)
			}
			<-hang.Reached()
			hang.Resume()
			if st, err := wait(t, p.prod, req); st != StatusDone || err != nil {
				t.Fatalf("Wait after Resume = %v, %v", st, err)
			}
			if !bytes.Equal(dst, src) {
				t.Fatal("resumed write did not land")
			}
		})
	}
}

// TestFailAfterBytesStaysInBounds: a write cut after k bytes (a disconnect
// mid-write) fails with an uncertain error; exactly the first k bytes of the
// target range land, in segment order, and nothing outside the target
// descriptors is ever written.
func TestFailAfterBytesStaysInBounds(t *testing.T) {
	for _, bc := range backends() {
		for _, k := range []uint64{0, 1, 3000, 5999, 6000, 9999} {
			t.Run(bc.name, func(t *testing.T) {
				seed := testSeed(t)
				p := bc.make(t, oneFault(Fault{Kind: FaultFailAfter, AfterBytes: k}))
				peer := p.connect(t)
				dst := filled(40_000, canary)
				creg := register(t, p.cons, dst)
				src := randomBytes(seed, 10_000)
				preg := register(t, p.prod, src)
				l1, _ := preg.Descriptors[0].Sub(0, 6000)
				l2, _ := preg.Descriptors[0].Sub(6000, 4000)
				r1, _ := creg.Descriptors[0].Sub(1000, 6000)  // dst[1000:7000]
				r2, _ := creg.Descriptors[0].Sub(20000, 4000) // dst[20000:24000]
				err := write(t, p.prod, []Descriptor{l1, l2}, peer, []Descriptor{r1, r2})
				if !errors.Is(err, ErrRemoteDisconnect) {
					t.Fatalf("k=%d: write = %v, want ErrRemoteDisconnect", k, err)
				}
				ev := p.event(t)
				if ev.Outcome != InboundBroken || ev.Landed != k {
					t.Fatalf("k=%d: inbound event %+v, want broken after %d bytes", k, ev, k)
				}
				want := filled(len(dst), canary)
				_ = forRange([][]byte{want[1000:7000], want[20000:24000]}, 0, k, func(i int, off uint64, p []byte) error {
					base := [...]uint64{0, 6000}[i]
					copy(p, src[base+off:])
					return nil
				})
				if !bytes.Equal(dst, want) {
					t.Fatalf("k=%d: consumer memory differs from exactly the first %d bytes landed", k, k)
				}
				if err := p.cons.Deregister(creg); err != nil {
					t.Fatalf("consumer Deregister after the broken write ended = %v", err)
				}
			})
		}
	}
}

// TestLostAckAfterLanding (CONTRACT Q-1): every byte lands, but the
// acknowledgement is lost; the producer sees an uncertain error although the
// consumer's memory is complete.
func TestLostAckAfterLanding(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			p := bc.make(t, oneFault(Fault{Kind: FaultLoseAck}))
			peer := p.connect(t)
			dst := filled(70_000, canary)
			creg := register(t, p.cons, dst)
			src := randomBytes(testSeed(t), len(dst))
			preg := register(t, p.prod, src)
			err := write(t, p.prod, preg.Descriptors, peer, creg.Descriptors)
			if !errors.Is(err, ErrRemoteDisconnect) {
				t.Fatalf("write = %v, want ErrRemoteDisconnect", err)
			}
			if ev := p.event(t); ev.Outcome != InboundLanded || ev.Landed != uint64(len(dst)) {
				t.Fatalf("inbound event %+v, want all bytes landed", ev)
			}
			if !bytes.Equal(dst, src) {
				t.Fatal("data did not land before the lost acknowledgement")
			}
			// The next post of the same request is clean.
			if err := write(t, p.prod, preg.Descriptors, peer, creg.Descriptors); err != nil {
				t.Fatalf("next write = %v", err)
			}
		})
	}
}

// TestConsumerClosesMidWrite: the consumer agent goes away during a write;
// the producer's write fails (uncertain) and the consumer's memory past the
// landed prefix is untouched.
func TestConsumerClosesMidWrite(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			hang := NewHang()
			p := bc.make(t, oneFault(Fault{Kind: FaultHang, AfterBytes: 2000, Hang: hang}))
			peer := p.connect(t)
			dst := filled(30_000, canary)
			creg := register(t, p.cons, dst)
			src := randomBytes(testSeed(t), 10_000)
			preg := register(t, p.prod, src)
			remote, _ := creg.Descriptors[0].Sub(5000, 10_000)
			req, err := p.prod.CreateWrite(preg.Descriptors, peer, []Descriptor{remote})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.prod.Post(req); err != nil {
				t.Fatal(err)
			}
			<-hang.Reached()
			if err := p.cons.Close(); err != nil {
				t.Fatal(err)
			}
			ev := p.event(t)
			if ev.Outcome != InboundBroken || ev.Landed > 2000 {
				t.Fatalf("inbound event %+v, want broken with at most 2000 bytes", ev)
			}
			hang.Resume()
			if _, err := wait(t, p.prod, req); !errors.Is(err, ErrRemoteDisconnect) {
				t.Fatalf("Wait = %v, want ErrRemoteDisconnect", err)
			}
			if !allCanary(dst[:5000]) || !allCanary(dst[5000+ev.Landed:]) || !bytes.Equal(dst[5000:5000+ev.Landed], src[:ev.Landed]) {
				t.Fatal("consumer memory written outside the landed prefix")
			}
			if c := p.cons.Counters(); c.InboundInFlight != 0 {
				t.Fatalf("closed consumer still counts %d inbound writes", c.InboundInFlight)
			}
			if _, err := p.cons.RegisterMemory([][]byte{dst}); !errors.Is(err, ErrNotAllowed) {
				t.Fatalf("RegisterMemory after Close = %v, want ErrNotAllowed", err)
			}
			if err := p.cons.Deregister(creg); err != nil {
				t.Fatalf("Deregister after Close = %v", err)
			}
		})
	}
}

// TestProducerCloseCancelsInFlight: Close ends a hung write with
// ErrCanceled; the request can then be released and its memory deregistered.
func TestProducerCloseCancelsInFlight(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			hang := NewHang()
			p := bc.make(t, oneFault(Fault{Kind: FaultHang, Hang: hang}))
			peer := p.connect(t)
			creg := register(t, p.cons, filled(100, canary))
			preg := register(t, p.prod, make([]byte, 100))
			req, err := p.prod.CreateWrite(preg.Descriptors, peer, creg.Descriptors)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.prod.Post(req); err != nil {
				t.Fatal(err)
			}
			<-hang.Reached()
			if err := p.prod.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := p.prod.Status(req); !errors.Is(err, ErrCanceled) {
				t.Fatalf("Status after Close = %v, want ErrCanceled", err)
			}
			if _, err := p.prod.Post(req); !errors.Is(err, ErrNotAllowed) {
				t.Fatalf("Post after Close = %v, want ErrNotAllowed", err)
			}
			if err := p.prod.Release(req); err != nil {
				t.Fatal(err)
			}
			if err := p.prod.Deregister(preg); err != nil {
				t.Fatal(err)
			}
			if ev := p.event(t); ev.Outcome != InboundBroken {
				t.Fatalf("inbound event %+v, want broken", ev)
			}
			if err := p.cons.Deregister(creg); err != nil {
				t.Fatal(err)
			}
		})
	}
}
