package kvsession

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/baton-dev/baton/engine/consumer"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/xfer"
)

type fakeEnv struct{ cleanups []string }

func (f *fakeEnv) FailCleanup(what string, err error)                      { f.cleanups = append(f.cleanups, what) }
func (f *fakeEnv) EnterQuarantine(*consumer.Quarantine, []<-chan struct{}) {}

// TestSessions: a held session is released once (ABORTED, then
// ALREADY_FINISHED), one nobody fetches expires, the drain releases the
// rest; D's replay guard refuses a second attach until the session is
// forgotten.
func TestSessions(t *testing.T) {
	agent, err := xfer.NewLoopback(xfer.NewRegistry(), xfer.Options{Name: "prefill"})
	if err != nil {
		t.Fatal(err)
	}
	env := &fakeEnv{}
	d := &Driver{Sessions: &Sessions{}, Agent: agent, Env: env, Log: slog.New(slog.DiscardHandler)}
	if _, err := d.Register("short", []byte{1}, 0); err == nil {
		t.Fatal("Register of a 1-byte session succeeded; want an error")
	}
	hold := func(id string, ttl time.Duration) {
		s, err := d.Register(id, make([]byte, lm.SessionBytes), 1)
		if err != nil {
			t.Fatal(err)
		}
		d.Hold(s, ttl)
	}
	hold("a", time.Hour)
	hold("b", time.Millisecond)
	hold("c", time.Hour)
	if !d.Release("a") || d.Release("a") {
		t.Error("Release twice: want live once, then not")
	}
	deadline := time.Now().Add(5 * time.Second)
	for d.Sessions.Live() != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := d.Sessions.Live(); n != 1 {
		t.Fatalf("%d sessions live after an expiry; want 1", n)
	}
	d.Drain()
	if n := d.Sessions.Live(); n != 0 || len(env.cleanups) != 0 {
		t.Errorf("after Drain: %d live, cleanups %v; want 0, none", n, env.cleanups)
	}
	if released, expired := d.Sessions.Ended(); released != 2 || expired != 1 {
		t.Errorf("Ended = %d released, %d expired; want 2 (a released, c drained), 1 (b)", released, expired)
	}

	if !d.Sessions.Attach("x", time.Hour) || d.Sessions.Attach("x", time.Hour) {
		t.Error("Attach twice: want the first, not the replay")
	}
	d.Sessions.Forget("x")
	if d.Sessions.Attached() != 0 || !d.Sessions.Attach("x", time.Hour) {
		t.Error("after Forget: want nothing remembered and a new attach")
	}
}

// readPair is a P holding session "s" (bytes want) for D, and a D whose
// agent runs with dOpts (its Faults, say), both over one loopback
// registry; md is P's agent metadata for D's Read.
type readPair struct {
	p, d   *Driver
	pAgent xfer.Agent
	s      *Session
	md     []byte
}

func newReadPair(t *testing.T, want []byte, pEnv, dEnv Env, dOpts xfer.Options) readPair {
	t.Helper()
	reg := xfer.NewRegistry()
	pAgent, err := xfer.NewLoopback(reg, xfer.Options{Name: "prefill"})
	if err != nil {
		t.Fatal(err)
	}
	dOpts.Name = "decode"
	dAgent, err := xfer.NewLoopback(reg, dOpts)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	p := &Driver{Sessions: &Sessions{}, Agent: pAgent, Env: pEnv, Log: log}
	s, err := p.Register("s", want, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Hold(s, time.Hour)
	md, err := pAgent.LocalMetadata()
	if err != nil {
		t.Fatal(err)
	}
	return readPair{p: p, d: &Driver{Sessions: &Sessions{}, Agent: dAgent, Env: dEnv, Log: log}, pAgent: pAgent, s: s, md: md}
}

// TestRead: D READs a session P holds from P's agent, with the metadata
// and region P describes, into a buffer it frees afterwards.
func TestRead(t *testing.T) {
	env := &fakeEnv{}
	want := make([]byte, lm.SessionBytes)
	for i := range want {
		want[i] = byte(i + 1)
	}
	rp := newReadPair(t, want, env, env, xfer.Options{})
	p, d, s, md := rp.p, rp.d, rp.s, rp.md
	got, err := d.Read(context.Background(), "s", md, s.Reg.Descriptors[0], time.Second, "kv/s/1")
	if err != nil || string(got) != string(want) {
		t.Fatalf("Read = %x, %v; want the session's bytes", got, err)
	}
	if live := p.Release("s"); !live || len(env.cleanups) != 0 {
		t.Errorf("after the READ: Release = %v, cleanups %v; want true (still live until released), none", live, env.cleanups)
	}
}

// quarantineEnv records the quarantine a READ enters.
type quarantineEnv struct {
	fakeEnv
	q      *consumer.Quarantine
	proofs []<-chan struct{}
}

func (e *quarantineEnv) EnterQuarantine(q *consumer.Quarantine, proofs []<-chan struct{}) {
	e.q, e.proofs = q, proofs
}

// TestReadInFlightAtDeadline: a READ that the agent has not ended when its
// wait's deadline (timeout + ReadGrace) comes keeps D's buffer and request
// (CONTRACT Q-1: bytes may still land in it). Read answers an error and
// enters a quarantine for the buffer whose one proof closes only once
// the READ ended and was released; then its Free deregisters the
// buffer, and P frees the session it served without a cleanup failure.
func TestReadInFlightAtDeadline(t *testing.T) {
	hang := xfer.NewHang()
	pEnv, dEnv := &fakeEnv{}, &quarantineEnv{}
	rp := newReadPair(t, make([]byte, lm.SessionBytes), pEnv, dEnv, xfer.Options{Faults: func(w xfer.WriteInfo) xfer.Fault {
		if !w.Read {
			return xfer.Fault{}
		}
		return xfer.Fault{Kind: xfer.FaultHang, AfterBytes: 64, Hang: hang}
	}})
	p, d, s, md, pAgent := rp.p, rp.d, rp.s, rp.md, rp.pAgent
	got, err := d.Read(context.Background(), "s", md, s.Reg.Descriptors[0], time.Millisecond, "kv/s/1")
	if err == nil || got != nil {
		t.Fatalf("Read of a READ hung past its deadline = %d bytes, %v; want no bytes and an error", len(got), err)
	}
	q := dEnv.q
	if q == nil || q.ID != "kv/s/1" || q.UncountedBytes != lm.SessionBytes || len(dEnv.proofs) != 1 {
		t.Fatalf("quarantine entered = %+v with %d proofs; want kv/s/1 keeping %d uncounted bytes, one proof", q, len(dEnv.proofs), lm.SessionBytes)
	}
	select {
	case <-dEnv.proofs[0]:
		t.Fatal("the quarantine's proof closed while the READ is still in flight")
	default:
	}
	if err := q.Free(); err == nil {
		t.Fatal("the buffer deregistered while its READ is in flight; want the agent to refuse")
	}
	hang.Cancel() // the READ ends (failed): nothing can land in the buffer any more
	select {
	case <-dEnv.proofs[0]:
	case <-time.After(10 * time.Second):
		t.Fatal("the quarantine's proof did not close within 10s of the READ's end")
	}
	if err := q.Free(); err != nil {
		t.Errorf("Free after the proof: %v; want the buffer deregistered", err)
	}
	if !p.Release("s") {
		t.Error("P's session is not live after the failed READ; want it held until released")
	}
	if err := pAgent.Deregister(s.Reg); !errors.Is(err, xfer.ErrNotFound) {
		t.Errorf("P's session region after Release: Deregister = %v; want ErrNotFound (freed at once: nothing reads it any more)", err)
	}
	if len(pEnv.cleanups) != 0 || len(dEnv.cleanups) != 0 {
		t.Errorf("cleanup failures P %v, D %v; want none", pEnv.cleanups, dEnv.cleanups)
	}
}
