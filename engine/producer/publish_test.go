package producer

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/baton-dev/baton/engine/cache/memory"
	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/xfer"
)

// TestPublishEnds: a publish that ends uncommitted gives its reservation
// back (C-1, L-5); a committed one whose EncoderReady failed to send is
// released (C-7), its storage removed and its removal counted as ended; a
// later release answers ALREADY_FINISHED (SU-3).
func TestPublishEnds(t *testing.T) {
	agent, err := xfer.NewLoopback(xfer.NewRegistry(), xfer.Options{Name: "producer"})
	if err != nil {
		t.Fatal(err)
	}
	store, err := memory.New(agent)
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t)
	d := &Driver{Table: New(handoff.ProducerConfig{QuotaBytes: 64, DefaultTTLMs: 60_000}), Env: env, Agent: agent, Store: store, Entries: store, Log: slog.New(slog.DiscardHandler)}
	const a, b = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"

	pub, err := d.BeginPublish(a, 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.BeginPublish(b, 64); !errors.Is(err, handoff.ErrQuotaExceeded) {
		t.Fatalf("BeginPublish over the quota = %v; want ErrQuotaExceeded (L-5)", err)
	}
	pub.End()
	if n := d.Table.Entries(); n != 0 {
		t.Fatalf("after End of an uncommitted publish: %d entries; want 0 (C-1)", n)
	}

	pub, err = d.BeginPublish(b, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Write(b, []shareddir.Tensor{shareddir.F32Tensor("item.0", 4, 4, make([]float32, 16))}, nil); err != nil {
		t.Fatal(err)
	}
	if !pub.StepEnded(false) {
		t.Fatal("StepEnded on a live stream = abandon; want write")
	}
	if err := pub.Commit(60_000); err != nil {
		t.Fatal(err)
	}
	pub.End() // committed: nothing to give back
	sendErr := errors.New("stream broken")
	if err := pub.ReadySent(context.Background(), sendErr, nil); !errors.Is(err, sendErr) {
		t.Fatalf("ReadySent = %v; want the send's error", err)
	}
	if ok, _ := store.Exists(b); ok || d.Table.Counters().Released != 1 || env.started == 0 || len(env.removalsEnded) != env.started {
		t.Fatalf("after a failed EncoderReady: stored %v, released %d, removals started %d, ended %d; want gone, 1, as many ended as started (C-7)", ok, d.Table.Counters().Released, env.started, len(env.removalsEnded))
	}
	if out, err := d.Release(context.Background(), b); err != nil || out != handoff.ReleaseAlreadyFinished {
		t.Errorf("Release of a released entry = %v, %v; want ALREADY_FINISHED (SU-3)", out, err)
	}
	if len(env.refused) != 0 || len(env.cleanupFailures) != 0 {
		t.Errorf("refused %v, cleanups %v; want none", env.refused, env.cleanupFailures)
	}
}
