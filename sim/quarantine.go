package sim

import (
	"github.com/baton-dev/baton/engine/handoff"
)

// Quarantines end by proof (CONTRACT Q-6), as in the engine
// (engine/consumer quarantine.go, engine/server quarantine.go), never because time passed:
//
//   - a consumer's quarantined receive buffer: its registration was revoked
//     with the consumer's xfer agent at the quarantine (quarantineReceive);
//     the revocation's done channel closes once no WRITE is in flight into
//     it and none can land (xfer ends the WRITEs it accepted before at the
//     network's Deliver, Cut or Complete, or when their initiator closes);
//     and every connection that carried the transfer has closed: the
//     control connection to the E process the request was sent to, which
//     closes when that process is gone (crashed, or stopped at its drain),
//     as the engine's producer client is pinned until its connection closes
//     by itself (engine/server peers.go). A request still on that
//     connection could make E post a WRITE later; the simulator models no
//     keepalive, so a partition alone never closes it. The world looks at
//     the proofs at one deterministic point, after every step (dispatch),
//     without blocking: no goroutine, no timer;
//   - the producer's quarantined source: its WRITE request ended (the
//     network's Complete) and E released it (completeWrite), in
//     writeComplete.
//
// On the proof the core decides (handoff.EndsOnProof): the driver ends the
// quarantine in the core's table (ConsumerReceives.EndQuarantine; the
// producer's source), frees the memory (the buffer is free for the next
// receive; the source is deregistered), and handoff's
// Health.QuarantineEnded recovers Health once the side holds no quarantine
// any more. The NeverEndQuarantine mutant (quarantine-never-ends) keeps
// it: the buffer or source is marked proved, and check_proof.go's end
// check finds it still held at the end of a converged run.

// endProvedQuarantines ends every consumer quarantine whose revocation is
// done. It also recounts the quarantines still waiting for their proof
// (proofWaits), so a crashed incarnation's are forgotten.
func (w *World) endProvedQuarantines() {
	waits := 0
	for _, c := range w.cons {
		if !c.up {
			continue
		}
		for i := range c.bufs {
			b := &c.bufs[i]
			if !b.quarantined || b.revoked == nil || b.proved {
				continue
			}
			if w.receiveProved(b.revoked, b.carrier) {
				w.quarantineProved(c, i)
			} else {
				waits++
			}
		}
	}
	w.xf.proofWaits = waits
}

// receiveProved reports whether a consumer quarantine's Q-6 proof came:
// the revocation is done and the E process its request went to (carrier)
// is gone, so no connection can carry its transfer any more.
func (w *World) receiveProved(revoked <-chan struct{}, carrier *producerNode) bool {
	gone := carrier != w.prod || w.nodes.prodDown || carrier.stopped
	return gone && closed(revoked)
}

// quarantineProved: the Q-6 proof of consumer c's quarantined buffer i
// came; the core decides whether the quarantine ends.
func (w *World) quarantineProved(c *consumerNode, i int) {
	b := &c.bufs[i]
	key := w.xreqs[b.owner-1].key
	if !handoff.EndsOnProof(w.decisions) {
		b.proved = true // the Q-6 mutant: kept for the life of the incarnation
		if w.tracing {
			w.notef("Q-6 %s: revocation of buffer %d done and its producer connection closed; quarantine kept", key, i)
		}
		return
	}
	must(c.receives.EndQuarantine(key))
	b.quarantined, b.owner, b.revoked, b.carrier = false, 0, nil, nil
	left, _ := c.receives.Quarantine()
	c.health.QuarantineEnded(left)
	w.reach(stQuarantineEndedByProof)
	if w.tracing {
		w.notef("Q-6 %s: revocation of buffer %d done and its producer connection closed; quarantine ended, buffer freed (%d quarantined left)", key, i, left)
	}
}

// quarantineSource records a source quarantine FailTransfer decided
// (QuarantineSourceUntilWriteEnds, or the Q-3 mutant's early free with
// the same Health): it lasts until wr's request ended and was released.
func (w *World) quarantineSource(wr *write) {
	if w.prod.quarantines == nil {
		w.prod.quarantines = map[string]*write{}
	}
	w.prod.quarantines[wr.entry] = wr
	w.prod.qver++
}

// writeEndedProof: E completed and released wr's request (the Q-6 proof
// of its source's quarantine, if any): the core decides whether the
// quarantine ends; it then frees the source and recovers Health once no
// source is quarantined any more.
func (w *World) writeEndedProof(wr *write) {
	p := w.prod
	if p.quarantines[wr.entry] != wr || wr.agent != p.agent || w.nodes.prodDown || p.stopped {
		return
	}
	if !handoff.EndsOnProof(w.decisions) {
		wr.proved = true // the Q-6 mutant: kept for the life of the process
		if w.tracing {
			w.notef("Q-6 WRITE #%d ended and released; source of %s kept quarantined", wr.num, short(wr.entry))
		}
		return
	}
	delete(p.quarantines, wr.entry)
	p.qver++
	if w.sources[wr.entry] == sourceQuarantined || w.xf.srcRegs[wr.entry] != nil {
		w.freeSource(wr.entry)
	}
	p.health.QuarantineEnded(len(p.quarantines))
	w.reach(stSourceQuarantineEndedByProof)
	if w.tracing {
		w.notef("Q-6 WRITE #%d ended and released; quarantine of the source of %s ended, source freed (%d quarantined left)", wr.num, short(wr.entry), len(p.quarantines))
	}
}
