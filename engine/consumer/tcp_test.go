package consumer

import (
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/xfer"
)

// fakeEnv is a consumer.Env that records what the driver asks of the engine.
type fakeEnv struct {
	sync.Mutex
	refused  []string
	cleanups []string
	entered  []*Quarantine
	proofs   [][]<-chan struct{}
}

func (f *fakeEnv) FailCleanup(what string, err error) { f.cleanups = append(f.cleanups, what) }
func (f *fakeEnv) CoreRefused(op string, err error) {
	if err != nil {
		f.refused = append(f.refused, op)
	}
}
func (f *fakeEnv) Decisions() handoff.Mutants { return handoff.Mutants{} }
func (f *fakeEnv) EnterQuarantine(q *Quarantine, proofs []<-chan struct{}) {
	f.entered = append(f.entered, q)
	f.proofs = append(f.proofs, proofs)
}

// TestDriverTCP: a receive whose call succeeded releases its buffers; one
// whose outcome is uncertain is quarantined with the revocation and
// the carriers as its Q-6 proofs, and the core counts it until End runs.
func TestDriverTCP(t *testing.T) {
	agent, err := xfer.NewLoopback(xfer.NewRegistry(), xfer.Options{Name: "consumer"})
	if err != nil {
		t.Fatal(err)
	}
	env := &fakeEnv{}
	d := &Driver{Receives: New(handoff.ConsumerConfig{InflightQuotaBytes: 1 << 20}), Env: env, Agent: agent, Log: slog.New(slog.DiscardHandler)}
	items := []handoff.ItemMeta{{Rows: 2, Cols: 4}, {Rows: 1, Cols: 4}}
	send := func(id string) *TCPReceive {
		r, err := d.BeginTCP(id, items)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Bufs) != 2 || len(r.Bufs[0]) != 32 || len(r.Bufs[1]) != 16 {
			t.Fatalf("BeginTCP buffers %d: want [32 16] bytes", len(r.Bufs))
		}
		_ = d.Receives.Registered(id)
		_ = d.Receives.Requested(id)
		return r
	}

	ok := send("r/ok")
	if dec := d.EndTCP(ok, handoff.TransferEnded{ReceiveID: "r/ok", StatusOK: true, Complete: true}, nil, nil); dec.Buffers != handoff.ReleaseBuffers || dec.Reply != handoff.ReplyData {
		t.Errorf("complete OK reply: decision %+v; want release, data", dec)
	}
	if len(env.entered) != 0 || d.Receives.Inflight() != 0 {
		t.Errorf("after a complete receive: %d quarantines, %d in flight; want 0, 0", len(env.entered), d.Receives.Inflight())
	}

	lost := send("r/lost")
	carrier := make(chan struct{})
	dec := d.EndTCP(lost, handoff.TransferEnded{ReceiveID: "r/lost", Reason: "Q-1 test"}, errors.New("reply lost"), []<-chan struct{}{carrier})
	if dec.Buffers != handoff.QuarantineBuffers || len(env.entered) != 1 || env.entered[0].ID != "receive/r/lost" || len(env.proofs[0]) != 2 {
		t.Fatalf("uncertain outcome: decision %+v, quarantines %d, proofs %v; want one quarantine with the revocation and the carrier", dec, len(env.entered), env.proofs)
	}
	if n, _ := d.Receives.Quarantine(); n != 2 {
		t.Errorf("core counts %d quarantined buffers; want 2", n)
	}
	d.Receives.AddQuarantine(env.entered[0])
	if q, _ := d.Receives.RemoveQuarantine("receive/r/lost"); q == nil {
		t.Fatal("the quarantine was not found")
	}
	if n, _ := d.Receives.Quarantine(); n != 0 || len(env.refused) != 0 || len(env.cleanups) != 0 {
		t.Errorf("after End: %d quarantined buffers, refused %v, cleanups %v; want 0, none, none", n, env.refused, env.cleanups)
	}
}
