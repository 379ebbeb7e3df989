package world

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// checkNoEncoderOnDecode: N-2. KV-session decode requests never touch the
// encoder or the encoder cache: every step a D node takes (a decode
// request arriving, its fetch's answer, its deadline) leaves E's table,
// its counters, the shared directory, the transfer sources, the entries'
// ground truth and every consumer's receives as they were, and no decode
// request carries an encoder reference. onDecoder records the first
// violation; this checker reports it.
func checkNoEncoderOnDecode(w *World) error { return asFailure(w.nodes.n2) }

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

func init() { stepCheckers = append(stepCheckers, checker{rule: "N-2", check: checkNoEncoderOnDecode}) }
