package xfer

import (
	"errors"
	"testing"
	"time"
)

// isDone reports whether ch is closed, without waiting.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitDone fails the test unless ch closes within the test timeout.
func waitDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testTimeout):
		t.Fatalf("%s: Revoke never done", what)
	}
}

// TestRevokeRefusesLaterTransfers: a revoked registration is gone from the
// tables at once, every later transfer naming it is refused before a byte
// lands, and with nothing in flight and no connection that carried a
// transfer into it, Revoke is done at once (CONTRACT Q-6).
func TestRevokeRefusesLaterTransfers(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			p := b.make(t, nil)
			peer := p.connect(t)
			dst := filled(4096, canary)
			reg := register(t, p.cons, dst)
			src := register(t, p.prod, randomBytes(1, 4096))
			done, err := p.cons.Revoke(reg)
			if err != nil {
				t.Fatalf("Revoke = %v", err)
			}
			if !isDone(done) {
				t.Fatal("Revoke of a registration no transfer touched is not done at once")
			}
			if c := p.cons.Counters(); c.Registrations != 0 || c.Regions != 0 || c.Revoked != 0 {
				t.Errorf("Counters after Revoke = %+v; want no registration, region or pending revocation", c)
			}
			if err := write(t, p.prod, src.Descriptors, peer, reg.Descriptors); err == nil || !isUncertain(err) {
				t.Errorf("write into a revoked registration = %v; want a refusal (ErrBackend)", err)
			}
			if ev := p.event(t); ev.Outcome != InboundRefused || ev.Landed != 0 {
				t.Errorf("inbound event = %+v; want refused with nothing landed", ev)
			}
			if !allCanary(dst) {
				t.Error("a refused write changed the revoked buffer")
			}
			if err := p.cons.Deregister(reg); !errors.Is(err, ErrNotFound) {
				t.Errorf("Deregister after Revoke = %v; want ErrNotFound", err)
			}
			if _, err := p.cons.Revoke(reg); !errors.Is(err, ErrNotFound) {
				t.Errorf("second Revoke = %v; want ErrNotFound", err)
			}
			if _, err := p.cons.Revoke(nil); !errors.Is(err, ErrInvalidParam) {
				t.Errorf("Revoke(nil) = %v; want ErrInvalidParam", err)
			}
		})
	}
}

// hungWrite posts a write of src into dst that the producer's FaultHang
// holds after some bytes, waits until it hangs, and revokes dst's
// registration: it returns the request and Revoke's done channel, which
// must still be open.
func hungWrite(t *testing.T, p *pair, hang *Hang, peer string, src, dst *Registration) (*Request, <-chan struct{}) {
	t.Helper()
	req, err := p.prod.CreateWrite(src.Descriptors, peer, dst.Descriptors)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.prod.Post(req); err != nil {
		t.Fatal(err)
	}
	<-hang.Reached()
	done, err := p.cons.Revoke(dst)
	if err != nil {
		t.Fatalf("Revoke during a write = %v", err)
	}
	if isDone(done) {
		t.Fatal("Revoke done while a write was landing in the registration")
	}
	return req, done
}

// TestRevokeWaitsForInFlightWrite: a write in flight when the registration
// is revoked may still land; Revoke is done only after it ended and (tcp)
// the connection that carried it closed, never while a byte could land.
func TestRevokeWaitsForInFlightWrite(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			hang := NewHang()
			p := b.make(t, func(WriteInfo) Fault { return Fault{Kind: FaultHang, AfterBytes: 1024, Hang: hang} })
			peer := p.connect(t)
			payload := randomBytes(2, 4096)
			dst := filled(4096, canary)
			reg := register(t, p.cons, dst)
			src := register(t, p.prod, payload)
			req, done := hungWrite(t, p, hang, peer, src, reg)
			if c := p.cons.Counters(); c.Revoked != 1 {
				t.Errorf("Counters().Revoked = %d while the write lands; want 1", c.Revoked)
			}
			hang.Resume() // the write continues: its bytes land after the revocation
			if _, err := wait(t, p.prod, req); err != nil {
				t.Fatalf("the resumed write = %v; want it to complete", err)
			}
			if err := p.prod.Release(req); err != nil {
				t.Fatal(err)
			}
			if string(dst) != string(payload) {
				t.Error("the write accepted before the revocation did not land whole")
			}
			if b.name == BackendTCP {
				if isDone(done) {
					t.Fatal("tcp Revoke done while the connection that carried the write is still open (pooled)")
				}
				// The producer drops its idle connections to the peer: the
				// connection that carried the write closes.
				if err := p.prod.InvalidateRemoteMetadata(peer); err != nil {
					t.Fatal(err)
				}
			}
			waitDone(t, done, "after the write ended and its connection closed")
			if c := p.cons.Counters(); c.Revoked != 0 {
				t.Errorf("Counters().Revoked = %d after done; want 0", c.Revoked)
			}
		})
	}
}

// TestRevokeDoneWhenPeerCloses: a tcp write cut by the producer's Close
// while in flight; the revoked registration is done once the carrier
// closed, and the agents hold nothing afterwards.
func TestRevokeDoneWhenPeerCloses(t *testing.T) {
	hang := NewHang()
	p := backends()[1].make(t, func(WriteInfo) Fault { return Fault{Kind: FaultHang, AfterBytes: 100, Hang: hang} })
	peer := p.connect(t)
	reg := register(t, p.cons, filled(1000, canary))
	src := register(t, p.prod, randomBytes(3, 1000))
	_, done := hungWrite(t, p, hang, peer, src, reg)
	p.prod.Close() // the producer process ends: its connections close
	waitDone(t, done, "after the producer closed")
	if ev := p.event(t); ev.Outcome != InboundBroken {
		t.Errorf("inbound event = %+v; want broken", ev)
	}
	mustZero(t, p.cons)
}

// TestParseMetadata: metadata is described without being loaded; anything
// else is ErrInvalidParam.
func TestParseMetadata(t *testing.T) {
	a, err := NewTCP(TCPOptions{Options: Options{Name: "agent-x"}, AdvertiseAddress: "10.1.2.3:4567"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	md, err := a.LocalMetadata()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseMetadata(md)
	if err != nil || got != (PeerMetadata{Backend: BackendTCP, Name: "agent-x", Address: "10.1.2.3:4567"}) {
		t.Errorf("ParseMetadata = %+v, %v", got, err)
	}
	if c := a.Counters(); c.Peers != 0 {
		t.Errorf("ParseMetadata loaded a peer: %+v", c)
	}
	for _, bad := range [][]byte{nil, []byte("BXMD"), append(md, 0)} {
		if _, err := ParseMetadata(bad); !errors.Is(err, ErrInvalidParam) {
			t.Errorf("ParseMetadata(%q) = %v; want ErrInvalidParam", bad, err)
		}
	}
}
