package kvsession

import (
	"context"
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

	if !d.Sessions.Attach("x", time.Hour) || d.Sessions.Attach("x", time.Hour) {
		t.Error("Attach twice: want the first, not the replay")
	}
	d.Sessions.Forget("x")
	if d.Sessions.Attached() != 0 || !d.Sessions.Attach("x", time.Hour) {
		t.Error("after Forget: want nothing remembered and a new attach")
	}
}

// TestRead: D READs a session P holds from P's agent, with the metadata
// and region P describes, into a buffer it frees afterwards.
func TestRead(t *testing.T) {
	reg := xfer.NewRegistry()
	pAgent, err := xfer.NewLoopback(reg, xfer.Options{Name: "prefill"})
	if err != nil {
		t.Fatal(err)
	}
	dAgent, err := xfer.NewLoopback(reg, xfer.Options{Name: "decode"})
	if err != nil {
		t.Fatal(err)
	}
	env := &fakeEnv{}
	log := slog.New(slog.DiscardHandler)
	p := &Driver{Sessions: &Sessions{}, Agent: pAgent, Env: env, Log: log}
	want := make([]byte, lm.SessionBytes)
	for i := range want {
		want[i] = byte(i + 1)
	}
	s, err := p.Register("s", want, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Hold(s, time.Hour)
	md, err := pAgent.LocalMetadata()
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{Sessions: &Sessions{}, Agent: dAgent, Env: env, Log: log}
	got, err := d.Read(context.Background(), "s", md, s.Reg.Descriptors[0], time.Second, "kv/s/1")
	if err != nil || string(got) != string(want) {
		t.Fatalf("Read = %x, %v; want the session's bytes", got, err)
	}
	if live := p.Release("s"); !live || len(env.cleanups) != 0 {
		t.Errorf("after the READ: Release = %v, cleanups %v; want true (still live until released), none", live, env.cleanups)
	}
}
