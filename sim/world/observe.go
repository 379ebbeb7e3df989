package world

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// The checks a node makes at the moment something happens, where a step
// checker afterwards could no longer see it: a WRITE landing in a buffer
// (Q-1, as sim/checks' checkReceiveBuffers after each step), a D node's
// step (N-2: what it records in Nodes.N2 sim/checks' checkNoEncoderOnDecode
// reports) and the producer's exit from its drain (S-2).

// CheckLanding is checkReceiveBuffers' Q-1 check at the moment a WRITE
// lands.
func (w *World) CheckLanding(wr *Write, b *buffer) {
	if err := BufferHeld(wr, b); err != nil {
		w.Failf(Correctness, "Q-1", "WRITE landed: %s", err)
	}
}

// BufferHeld says what is wrong when wr may land in b.
func BufferHeld(wr *Write, b *buffer) error {
	switch {
	case b.Quarantined && b.Owner == wr.Recv:
		return nil
	case b.Owner == wr.Recv:
		return nil
	case b.Owner == 0:
		return fmt.Errorf("PD%d freed buffer %d while WRITE #%d of %s may still land in it", wr.C, wr.Buf, wr.Num, Short(wr.Entry))
	default:
		return fmt.Errorf("PD%d reused buffer %d for receive %d while WRITE #%d of %s for receive %d may still land in it",
			wr.C, wr.Buf, b.Owner, wr.Num, Short(wr.Entry), wr.Recv)
	}
}

// encoderState is what a D step must leave unchanged.
type encoderState struct {
	counters                handoff.ProducerCounters
	entries, removals       int
	held                    int64
	sources, ledger         int
	diskOps                 int64
	consumptions, receiving int
}

// EncoderSnapshot takes E's and the consumers' state before a D step.
func (w *World) EncoderSnapshot() encoderState {
	t := w.Prod.Table
	s := encoderState{counters: t.Counters(), entries: t.Entries(), removals: t.PendingRemovals(), held: t.HeldBytes(),
		diskOps: w.Sd.Disk.Ops, sources: len(w.Sources), ledger: len(w.Ledger.All)}
	for _, c := range w.Cons {
		s.receiving += c.Receives.Inflight()
	}
	for _, e := range w.Ledger.All {
		s.consumptions += len(e.Consumptions)
	}
	return s
}

// CheckEncoderUntouched compares E's state after D's step ev with before.
func (w *World) CheckEncoderUntouched(before encoderState, ev Event) {
	if w.Nodes.N2 != "" {
		return
	}
	if after := w.EncoderSnapshot(); after != before {
		w.Nodes.N2 = fmt.Sprintf("D's %s step changed the encoder side: %+v -> %+v", ev.Kind, before, after)
		return
	}
	if ev.Kind == EvDecodeArrive {
		if r := w.Nodes.Reqs[DecodeRequestOf(ev).Req-1]; r.entryRef != "" {
			w.Nodes.N2 = fmt.Sprintf("decode request %d to D%d carries encoder reference %s", r.Num, r.D, Short(r.entryRef))
		}
	}
}

// CheckStopped: S-2, when the producer is about to exit its drain: every
// cleanup task it started has finished (no removal pending, no publish
// between Reserve and its end). Called by stopProducer.
func CheckStopped(w *World) error {
	p := w.Prod
	if p.Cleanups > 0 || p.Table.PendingRemovals() > 0 || p.Publishing > 0 {
		return fmt.Errorf("producer exits its drain with %d cleanup task(s) running, %d removal(s) pending and %d publish(es) in flight",
			p.Cleanups, p.Table.PendingRemovals(), p.Publishing)
	}
	return nil
}
