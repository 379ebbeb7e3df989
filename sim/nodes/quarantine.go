package nodes

import (
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/world"
)

// What the nodes do about their quarantines (Q-1, Q-3, Q-6; the state and
// the Q-6 proof's end of a consumer's quarantine are the world's,
// sim/world/quarantine.go): a consumer's control connections to E and the
// retirement of the one that carried an uncertain request, and E's
// quarantine of a source until its WRITE ends.

// ctrlConnFor returns the connection consumer c sends its next request to
// E over: its cached one, or a fresh one when it has none to this E
// process or retired it (the next call dials afresh).
func ctrlConnFor(w *world.World, c *world.ConsumerNode) *world.CtrlConn {
	if cc := c.Conn; cc != nil && cc.To == w.Prod && cc.Inc == c.Inc && !cc.Retired {
		return cc
	}
	c.Conn = c.NewConn(w.Prod)
	return c.Conn
}

// retireCarrier retires the connection that carried a request whose
// outcome is uncertain (the quarantine's carrier): nothing new goes over
// it, and it closes with its last use (carrierClosed).
func retireCarrier(w *world.World, cc *world.CtrlConn) {
	if cc == nil || cc.Retired {
		return
	}
	cc.Retired = true
	if w.Tracing && w.CarrierClosed(cc) {
		w.Notef("Q-6 PD%d closed the connection that carried the uncertain request", cc.Cons.Idx)
	}
}

// quarantineSource records a source quarantine FailTransfer decided
// (QuarantineSourceUntilWriteEnds, or the Q-3 mutant's early free with
// the same Health): it lasts until wr's request ended and was released.
func quarantineSource(w *world.World, wr *world.Write) {
	if w.Prod.Quarantines == nil {
		w.Prod.Quarantines = map[string]*world.Write{}
	}
	w.Prod.Quarantines[wr.Entry] = wr
	w.Prod.Qver++
}

// writeEndedProof: E completed and released wr's request (the Q-6 proof
// of its source's quarantine, if any): the core decides whether the
// quarantine ends; it then frees the source and recovers Health once no
// source is quarantined any more.
func writeEndedProof(w *world.World, wr *world.Write) {
	p := w.Prod
	if p.Quarantines[wr.Entry] != wr || wr.Agent != p.Agent || w.Nodes.ProdDown || p.Stopped {
		return
	}
	if !handoff.EndsOnProof(w.Decisions) {
		wr.Proved = true // the Q-6 mutant: kept for the life of the process
		if w.Tracing {
			w.Notef("Q-6 WRITE #%d ended and released; source of %s kept quarantined", wr.Num, world.Short(wr.Entry))
		}
		return
	}
	delete(p.Quarantines, wr.Entry)
	p.Qver++
	if w.Sources[wr.Entry] == world.SourceQuarantined || w.Xf.SrcRegs[wr.Entry] != nil {
		w.FreeSource(wr.Entry)
	}
	p.Health.QuarantineEnded(len(p.Quarantines))
	w.Reach(world.StSourceQuarantineEndedByProof)
	if w.Tracing {
		w.Notef("Q-6 WRITE #%d ended and released; quarantine of the source of %s ended, source freed (%d quarantined left)", wr.Num, world.Short(wr.Entry), len(p.Quarantines))
	}
}
