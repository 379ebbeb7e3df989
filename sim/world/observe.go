package world

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// The checks a node makes at the moment something happens, where a step
// checker afterwards could no longer see it: a WRITE landing in a buffer
// (Q-1, with checks.checkReceiveBuffers) and a D node's step (N-2: what it
// records in nodes.n2 checks.checkNoEncoderOnDecode reports).

// checkLanding is checkReceiveBuffers' Q-1 check at the moment a WRITE
// lands.
func (w *World) checkLanding(wr *write, b *buffer) {
	if err := bufferHeld(wr, b); err != nil {
		w.failf(Correctness, "Q-1", "WRITE landed: %s", err)
	}
}

// bufferHeld says what is wrong when wr may land in b.
func bufferHeld(wr *write, b *buffer) error {
	switch {
	case b.quarantined && b.owner == wr.recv:
		return nil
	case b.owner == wr.recv:
		return nil
	case b.owner == 0:
		return fmt.Errorf("PD%d freed buffer %d while WRITE #%d of %s may still land in it", wr.c, wr.buf, wr.num, short(wr.entry))
	default:
		return fmt.Errorf("PD%d reused buffer %d for receive %d while WRITE #%d of %s for receive %d may still land in it",
			wr.c, wr.buf, b.owner, wr.num, short(wr.entry), wr.recv)
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

// encoderSnapshot takes E's and the consumers' state before a D step.
func (w *World) encoderSnapshot() encoderState {
	t := w.prod.table
	s := encoderState{counters: t.Counters(), entries: t.Entries(), removals: t.PendingRemovals(), held: t.HeldBytes(),
		diskOps: w.sd.disk.Ops, sources: len(w.sources), ledger: len(w.ledger.all)}
	for _, c := range w.cons {
		s.receiving += c.receives.Inflight()
	}
	for _, e := range w.ledger.all {
		s.consumptions += len(e.consumptions)
	}
	return s
}

// checkEncoderUntouched compares E's state after D's step ev with before.
func (w *World) checkEncoderUntouched(before encoderState, ev event) {
	if w.nodes.n2 != "" {
		return
	}
	if after := w.encoderSnapshot(); after != before {
		w.nodes.n2 = fmt.Sprintf("D's %s step changed the encoder side: %+v -> %+v", ev.kind, before, after)
		return
	}
	if ev.kind == evDecodeArrive {
		if r := w.nodes.reqs[decodeRequestOf(ev).req-1]; r.entryRef != "" {
			w.nodes.n2 = fmt.Sprintf("decode request %d to D%d carries encoder reference %s", r.num, r.d, short(r.entryRef))
		}
	}
}

// checkStopped: S-2, when the producer is about to exit its drain: every
// cleanup task it started has finished (no removal pending, no publish
// between Reserve and its end). Called by stopProducer.
func checkStopped(w *World) error {
	p := w.prod
	if p.cleanups > 0 || p.table.PendingRemovals() > 0 || p.publishing > 0 {
		return fmt.Errorf("producer exits its drain with %d cleanup task(s) running, %d removal(s) pending and %d publish(es) in flight",
			p.cleanups, p.table.PendingRemovals(), p.publishing)
	}
	return nil
}
