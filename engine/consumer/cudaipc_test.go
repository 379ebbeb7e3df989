package consumer

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/xfer"
)

// TestDriverIPC: a cuda_ipc receive whose copy failed on a device that
// synchronizes frees its buffer without a quarantine; one whose
// call's outcome is uncertain is quarantined until its carriers close
// and one whose device does not synchronize for the life of the
// process (no proofs); an unsent receive frees its buffer.
func TestDriverIPC(t *testing.T) {
	machine := xfer.NewFakeIPC()
	env := &fakeEnv{}
	d := &Driver{Receives: New(handoff.ConsumerConfig{InflightQuotaBytes: 1 << 20}), Env: env, Device: machine.Device(0), Log: slog.New(slog.DiscardHandler)}
	begin := func(id string, sent bool) *IPCReceive {
		r, err := d.BeginIPC(id, 64)
		if err != nil {
			t.Fatal(err)
		}
		if r.Dst.Bytes() != 64 {
			t.Fatalf("BeginIPC buffer of %d bytes; want 64", r.Dst.Bytes())
		}
		if sent {
			if err := d.Receives.Registered(id); err != nil {
				t.Fatal(err)
			}
			if err := d.Receives.Requested(id); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}

	d.UnsentIPC(begin("r/unsent", false))
	if _, live, _ := machine.Counts(); live != 0 || d.Receives.Inflight() != 0 {
		t.Fatalf("after an unsent receive: %d buffers live, %d in flight; want 0, 0", live, d.Receives.Inflight())
	}

	gaveBack := 0
	if err := d.FailedCopy(begin("r/synced", true), nil, "copy failed", func() { gaveBack++ }); err != nil || gaveBack != 1 || len(env.entered) != 0 {
		t.Fatalf("failed copy on a device that synchronizes: %v, loan given back %d times, %d quarantines; want nil, once, none", err, gaveBack, len(env.entered))
	}

	r := begin("r/lost", true)
	dec := d.EndTransfer(handoff.TransferEnded{ReceiveID: r.ID, Reason: "Q-1 test"})
	carrier := make(chan struct{})
	if dec.Buffers != handoff.QuarantineBuffers {
		t.Fatalf("uncertain call: decision %+v; want quarantine", dec)
	}
	if err := d.QuarantineIPC(r, nil, dec, "reply lost", []<-chan struct{}{carrier}); !errors.Is(err, handoff.ErrTransferUncertain) || len(env.entered) != 1 || len(env.proofs[0]) != 1 {
		t.Fatalf("QuarantineIPC = %v with %d quarantines, proofs %v; want ErrTransferUncertain, the carrier its proof", err, len(env.entered), env.proofs)
	}
	q := env.entered[0]
	d.Receives.AddQuarantine(q)
	if q, _ := d.Receives.RemoveQuarantine(q.ID); q == nil || q.Free() != nil {
		t.Fatal("the quarantine was not found, or its buffer did not free")
	}
	machine.SetFailSync(true)
	err := d.FailedCopy(begin("r/stuck", true), nil, "copy failed", func() { gaveBack++ })
	if !errors.Is(err, handoff.ErrTransferUncertain) || gaveBack != 1 || len(env.entered) != 2 || env.proofs[1] != nil {
		t.Fatalf("failed copy on a device that does not synchronize: %v, loan given back %d times, %d quarantines, proofs %v; want ErrTransferUncertain, none, one for the life of the process", err, gaveBack, len(env.entered), env.proofs)
	}
	machine.SetFailSync(false)

	if len(env.refused) != 0 || len(env.cleanups) != 0 {
		t.Errorf("refused %v, cleanups %v; want none", env.refused, env.cleanups)
	}
}
