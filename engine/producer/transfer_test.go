package producer

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-dev/baton/engine/cache/memory"
	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/consumer"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/xfer"
)

// tcpRig is a producer whose memory store holds one entry (idA, published
// and claimed for a transfer) and a consumer agent with a registered
// buffer of its size, on one loopback registry.
type tcpRig struct {
	env     *fakeEnv
	d       *Driver
	entry   *memory.Entry
	payload []byte
	buf     []byte
	md      []byte
	remote  []xfer.Descriptor
	prod    xfer.Agent
}

func newTCPRig(t *testing.T, faults xfer.FaultHook) *tcpRig {
	t.Helper()
	reg := xfer.NewRegistry()
	prod, err := xfer.NewLoopback(reg, xfer.Options{Name: "producer", Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := xfer.NewLoopback(reg, xfer.Options{Name: "consumer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close(); prod.Close() })
	store, err := memory.New(prod)
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte{1, 2, 3, 4}, 64)
	if err := store.Write(idA, []shareddir.Tensor{{Name: "img0", DType: "F32", Shape: []int{1, 64}, Data: payload}}, nil); err != nil {
		t.Fatal(err)
	}
	tb := New(handoff.ProducerConfig{QuotaBytes: 1 << 20})
	publish(t, tb, 1<<40, idA)
	if err := tb.ClaimForTransfer(idA); err != nil {
		t.Fatal(err)
	}
	entry, ok := store.Take(idA)
	if !ok {
		t.Fatal("store lost the entry")
	}
	buf := make([]byte, len(payload))
	creg, err := cons.RegisterMemory([][]byte{buf})
	if err != nil {
		t.Fatal(err)
	}
	md, err := cons.LocalMetadata()
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t)
	return &tcpRig{env: env, entry: entry, payload: payload, buf: buf, md: md, remote: creg.Descriptors, prod: prod,
		d: &Driver{Table: tb, Env: env, Agent: prod, Store: store, Entries: store, Log: discard}}
}

// freed reports whether the entry's source registration is gone from the
// producer's agent (Store.Free deregistered it).
func (r *tcpRig) freed() bool {
	return errors.Is(r.prod.Deregister(r.entry.Reg), xfer.ErrNotFound)
}

// TestWriteThenDone: a WRITE lands every byte in the consumer's registered
// buffer and reports them; Done ends the transfer in the core (CONSUMED)
// and frees the source.
func TestWriteThenDone(t *testing.T) {
	r := newTCPRig(t, nil)
	n, pending, err := r.d.Write(context.Background(), r.entry, r.md, "", r.remote, 5*time.Second)
	if err != nil || pending != nil || n != uint64(len(r.payload)) {
		t.Fatalf("Write = %d, pending %v, %v; want %d bytes, nothing pending", n, pending, err, len(r.payload))
	}
	if !bytes.Equal(r.buf, r.payload) {
		t.Errorf("consumer buffer after the WRITE differs from the source")
	}
	r.d.Done(idA, r.entry)
	if c := r.d.Table.Counters(); c.Consumed != 1 || r.d.Table.Transfers() != 0 || r.d.Table.HeldBytes() != 0 {
		t.Errorf("after Done: counters %+v, transfers %d, held %d; want 1 consumed, none in flight, 0 held", c, r.d.Table.Transfers(), r.d.Table.HeldBytes())
	}
	if !r.freed() {
		t.Errorf("source still registered after Done; want it freed")
	}
	if len(r.env.refused)+len(r.env.cleanupFailures)+len(r.env.quarantines) != 0 {
		t.Errorf("refused %q, cleanup failures %q, quarantines %d; want none", r.env.refused, r.env.cleanupFailures, len(r.env.quarantines))
	}
}

// TestWriteCallerCancelDoesNotEndIt: the WRITE waits on the producer's own
// deadline, not the caller's: a caller whose context is already cancelled
// still gets the landed WRITE (a consumer that gave up must not turn a
// landing write into a freed source).
func TestWriteCallerCancelDoesNotEndIt(t *testing.T) {
	hang := xfer.NewHang()
	r := newTCPRig(t, func(xfer.WriteInfo) xfer.Fault { return xfer.Fault{Kind: xfer.FaultHang, AfterBytes: 8, Hang: hang} })
	go func() {
		<-hang.Reached()
		time.Sleep(100 * time.Millisecond) // the WRITE is in flight; the caller gave up long ago
		hang.Resume()
	}()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n, pending, err := r.d.Write(ctx, r.entry, r.md, "", r.remote, 5*time.Second); err != nil || pending != nil || n != uint64(len(r.payload)) {
		t.Errorf("Write with the caller's context cancelled = %d, %v, %v; want the whole WRITE", n, pending, err)
	}
}

// TestWriteHungPastDeadlineThenFail: a WRITE still in flight at the
// producer's deadline is returned as pending (its release refused: the
// source may still be read); Fail then quarantines the source until that
// WRITE ends: a quarantine with one proof, open while the
// WRITE hangs, closed once it ended and was released; ending it unjails
// and frees the source.
func TestWriteHungPastDeadlineThenFail(t *testing.T) {
	hang := xfer.NewHang()
	r := newTCPRig(t, func(xfer.WriteInfo) xfer.Fault { return xfer.Fault{Kind: xfer.FaultHang, AfterBytes: 8, Hang: hang} })
	n, pending, err := r.d.Write(context.Background(), r.entry, r.md, "", r.remote, 50*time.Millisecond)
	if err == nil || pending == nil || n != 0 {
		t.Fatalf("Write hung past its deadline = %d, pending %v, %v; want 0, the pending request and an error", n, pending, err)
	}
	dec := r.d.Fail(handoff.TransferFailure{EntryID: idA, HasSource: true, Provable: true, Reason: "Q-3 test"}, r.entry, pending, err)
	if dec.Source != handoff.QuarantineSourceUntilWriteEnds || dec.Code != handoff.CodeUnavailable {
		t.Fatalf("Fail = %+v; want the source quarantined until the WRITE ends, UNAVAILABLE", dec)
	}
	if len(r.env.quarantines) != 1 {
		t.Fatalf("quarantines entered %d; want 1", len(r.env.quarantines))
	}
	q := r.env.quarantines[0]
	if q.q.ID != "source/"+idA || len(q.proofs) != 1 || q.q.End == nil || q.q.Free == nil {
		t.Fatalf("quarantine %+v with %d proofs; want source/%s with one proof, End and Free", q.q, len(q.proofs), idA)
	}
	if n, _ := r.d.Store.QuarantinedSources(); n != 1 {
		t.Errorf("store's quarantined sources = %d; want 1", n)
	}
	if consumer.AllClosed(q.proofs) {
		t.Fatal("the proof is closed while the WRITE hangs; want it open (Q-6: the source may still be read)")
	}
	if r.freed() {
		t.Fatal("the source was freed while the WRITE hangs")
	}
	hang.Cancel()
	select {
	case <-q.proofs[0]:
	case <-time.After(5 * time.Second):
		t.Fatal("the proof never closed after the WRITE ended")
	}
	q.q.End()
	if n, _ := r.d.Store.QuarantinedSources(); n != 0 {
		t.Errorf("store's quarantined sources after End = %d; want 0", n)
	}
	if err := q.q.Free(); err != nil {
		t.Errorf("Free of the ended quarantine = %v", err)
	}
	if c := r.d.Table.Counters(); c.Quarantined != 1 || r.d.Table.Transfers() != 0 {
		t.Errorf("counters %+v, transfers %d; want 1 quarantined, none in flight", c, r.d.Table.Transfers())
	}
}

// TestFailDecisions: Fail carries out the core's decision for each kind
// of failure after the claim: a WRITE proved ended frees the source with
// no quarantine; a failure the transport cannot explain keeps it for the
// life of the process (no proofs); a missing source does nothing; the Q-3
// mutant frees it early but still turns Health NOT_READY.
func TestFailDecisions(t *testing.T) {
	for _, tc := range []struct {
		name           string
		ev             handoff.TransferFailure
		m              handoff.Mutants
		noEntry        bool
		wantFreed      bool
		wantQuarantine bool
		wantProofs     bool
		wantCode       handoff.Code
	}{
		{name: "write ended", ev: handoff.TransferFailure{HasSource: true, WriteEnded: true, Provable: true}, wantFreed: true, wantCode: handoff.CodeUnavailable},
		{name: "unprovable", ev: handoff.TransferFailure{HasSource: true, WriteEnded: true}, wantQuarantine: true, wantCode: handoff.CodeUnavailable},
		{name: "no source", ev: handoff.TransferFailure{}, noEntry: true, wantCode: handoff.CodeUnavailable},
		{name: "free early mutant", ev: handoff.TransferFailure{HasSource: true, WriteEnded: true}, m: handoff.Mutants{FreeSourceOnTransferFailure: true},
			wantFreed: true, wantQuarantine: true, wantCode: handoff.CodeUnavailable},
		{name: "invalid argument mutant", ev: handoff.TransferFailure{HasSource: true, WriteEnded: true, Provable: true}, m: handoff.Mutants{InvalidArgumentAfterRemoval: true},
			wantFreed: true, wantCode: handoff.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTCPRig(t, nil)
			r.env.m = tc.m
			tc.ev.EntryID = idA
			entry := r.entry
			if tc.noEntry {
				entry = nil
			}
			dec := r.d.Fail(tc.ev, entry, nil, errDisk)
			if dec.Code != tc.wantCode || dec.Rule != "Q-3" {
				t.Errorf("Fail = %+v; want code %v, rule Q-3", dec, tc.wantCode)
			}
			if got := r.freed(); got != tc.wantFreed {
				t.Errorf("source freed = %v; want %v", got, tc.wantFreed)
			}
			if got := len(r.env.quarantines) == 1; got != tc.wantQuarantine || len(r.env.quarantines) > 1 {
				t.Fatalf("quarantines entered %d; want quarantine %v", len(r.env.quarantines), tc.wantQuarantine)
			}
			if tc.wantQuarantine && (r.env.quarantines[0].proofs != nil) != tc.wantProofs {
				t.Errorf("quarantine proofs %v; want proofs %v (nil: for the life of the process)", r.env.quarantines[0].proofs, tc.wantProofs)
			}
			if c := r.d.Table.Counters(); c.Quarantined != 1 || r.d.Table.Transfers() != 0 {
				t.Errorf("counters %+v, transfers %d; want the entry counted quarantined, none in flight", c, r.d.Table.Transfers())
			}
			if len(r.env.refused) != 0 {
				t.Errorf("core refused %q", r.env.refused)
			}
		})
	}
}

// TestDoneOfUnknownTransferIsReported: Done of a transfer the core does
// not hold in flight is a refused transition, reported (CoreRefused), not
// silently counted.
func TestDoneOfUnknownTransferIsReported(t *testing.T) {
	r := newTCPRig(t, nil)
	r.d.Done(idB, r.entry)
	if len(r.env.refused) != 1 {
		t.Errorf("CoreRefused calls %q; want TransferDone of an unknown transfer reported", r.env.refused)
	}
}

// TestFailUnprovableWithWriteInFlight: a failure the transport cannot
// explain keeps the source for the life of the process (no proof), even
// when its WRITE request is still there to wait for: its end would prove
// nothing about a failure nobody can explain.
func TestFailUnprovableWithWriteInFlight(t *testing.T) {
	hang := xfer.NewHang()
	r := newTCPRig(t, func(xfer.WriteInfo) xfer.Fault { return xfer.Fault{Kind: xfer.FaultHang, AfterBytes: 8, Hang: hang} })
	defer hang.Cancel()
	_, pending, err := r.d.Write(context.Background(), r.entry, r.md, "", r.remote, 50*time.Millisecond)
	if pending == nil {
		t.Fatalf("Write hung past its deadline: no pending request (%v)", err)
	}
	dec := r.d.Fail(handoff.TransferFailure{EntryID: idA, HasSource: true}, r.entry, pending, err)
	if dec.Source != handoff.QuarantineSourceForever || len(r.env.quarantines) != 1 {
		t.Fatalf("Fail = %+v, %d quarantines; want the source quarantined for good, once", dec, len(r.env.quarantines))
	}
	if p := r.env.quarantines[0].proofs; p != nil {
		t.Errorf("quarantine proofs %v; want nil (kept for the life of the process)", p)
	}
}
