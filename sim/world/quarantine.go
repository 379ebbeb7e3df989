package world

import (
	"github.com/baton-dev/baton/engine/handoff"
)

// Quarantines end by proof (CONTRACT Q-6), as in the engine
// (engine/consumer quarantine.go and the engine's gRPC layer), never because time passed:
//
//   - a consumer's quarantined receive buffer: its registration was revoked
//     with the consumer's xfer agent at the quarantine (sim/nodes' quarantineReceive);
//     the revocation's done channel closes once no WRITE is in flight into
//     it and none can land (xfer ends the WRITEs it accepted before at the
//     network's Deliver, Cut or Complete, or when their initiator closes);
//     and every connection that carried the transfer has closed: the
//     consumer's control connection to E that carried the request
//     (ctrlConn). As the engine's consumer does (its gRPC
//     layer's transfer.go, producers.retire), the consumer retires that connection
//     at the quarantine: no new request goes over it, and it is closed
//     with its last use, once no other TransferEncoderCache call of the
//     consumer is outstanding on it; so the proof comes while E lives. It
//     closes as well when either process is gone (E crashed or stopped at
//     its drain, the consumer's incarnation crashed). A request already on
//     its way over it still reaches E (its bytes were sent), and a WRITE it
//     makes E post then is refused by the revocation: a closed carrier
//     lands no further write. The world looks at the proofs at one
//     deterministic point, after every step (dispatch), without blocking:
//     no goroutine, no timer;
//   - the producer's quarantined source: its WRITE request ended (the
//     network's Complete) and E released it (CompleteWrite), in
//     sim/nodes' writeComplete.
//
// On the proof the core decides (handoff.EndsOnProof): the driver ends the
// quarantine in the core's table (ConsumerReceives.EndQuarantine; the
// producer's source), frees the memory (the buffer is free for the next
// receive; the source is deregistered), and handoff's
// Health.QuarantineEnded recovers Health once the side holds no quarantine
// any more. The NeverEndQuarantine mutant (quarantine-never-ends) keeps
// it: the buffer or source is marked proved, and check_proof.go's end
// check finds it still held at the end of a converged run.

// ctrlConn is one control connection of a consumer incarnation to one E
// process: the engine's cached producer client (its gRPC layer's peers.go),
// over which the consumer's TransferEncoderCache requests go.
type ctrlConn struct {
	to   *producerNode
	cons *ConsumerNode
	inc  int64 // the consumer incarnation that dialled it
	// Retired: the consumer took it out of use after a request it carried
	// ended uncertain (retireCarrier); it is closed once no call uses it.
	Retired bool
}

// CtrlConnFor returns the connection consumer c sends its next request to
// E over: its cached one, or a fresh one when it has none to this E
// process or retired it (the next call dials afresh).
func (w *World) CtrlConnFor(c *ConsumerNode) *ctrlConn {
	if cc := c.conn; cc != nil && cc.to == w.Prod && cc.inc == c.Inc && !cc.Retired {
		return cc
	}
	c.conn = &ctrlConn{to: w.Prod, cons: c, inc: c.Inc}
	return c.conn
}

// RetireCarrier retires the connection that carried a request whose
// outcome is uncertain (the quarantine's carrier): nothing new goes over
// it, and it closes with its last use (carrierClosed).
func (w *World) RetireCarrier(cc *ctrlConn) {
	if cc == nil || cc.Retired {
		return
	}
	cc.Retired = true
	if w.Tracing && w.CarrierClosed(cc) {
		w.Notef("Q-6 PD%d closed the connection that carried the uncertain request", cc.cons.Idx)
	}
}

// CarrierClosed reports whether connection cc can carry nothing more: E's
// process it went to is gone (crashed or stopped), the consumer
// incarnation that dialled it is gone, or the consumer retired it and no
// TransferEncoderCache call of the consumer is outstanding on it (closed
// with its last use).
func (w *World) CarrierClosed(cc *ctrlConn) bool {
	if cc.to != w.Prod || w.Nodes.ProdDown || cc.to.Stopped {
		return true
	}
	c := cc.cons
	if !c.Up || c.Inc != cc.inc {
		return true
	}
	if !cc.Retired {
		return false
	}
	for _, r := range c.Recvs {
		if r.Buf >= 0 && w.Xreqs[r.Num-1].Carrier == cc {
			return false // another call still uses it
		}
	}
	return true
}

// endProvedQuarantines ends every consumer quarantine whose proof came.
// It also recounts the quarantines still waiting for their proof
// (proofWaits), so a crashed incarnation's are forgotten.
func (w *World) endProvedQuarantines() {
	waits := 0
	for _, c := range w.Cons {
		if !c.Up {
			continue
		}
		for i := range c.Bufs {
			b := &c.Bufs[i]
			if !b.Quarantined || b.Revoked == nil || b.proved {
				continue
			}
			if w.ReceiveProved(b.Revoked, b.Carrier) {
				w.quarantineProved(c, i)
			} else {
				waits++
			}
		}
	}
	w.Xf.ProofWaits = waits
}

// ReceiveProved reports whether a consumer quarantine's Q-6 proof came:
// the revocation is done and the connection that carried its request
// (carrier) is closed, so nothing can carry its transfer any more.
func (w *World) ReceiveProved(revoked <-chan struct{}, carrier *ctrlConn) bool {
	return Closed(revoked) && w.CarrierClosed(carrier)
}

// quarantineProved: the Q-6 proof of consumer c's quarantined buffer i
// came; the core decides whether the quarantine ends.
func (w *World) quarantineProved(c *ConsumerNode, i int) {
	b := &c.Bufs[i]
	key := w.Xreqs[b.Owner-1].Key
	if !handoff.EndsOnProof(w.Decisions) {
		b.proved = true // the Q-6 mutant: kept for the life of the incarnation
		if w.Tracing {
			w.Notef("Q-6 %s: revocation of buffer %d done and the connection that carried its request closed; quarantine kept", key, i)
		}
		return
	}
	Must(c.Receives.EndQuarantine(key))
	b.Quarantined, b.Owner, b.Revoked, b.Carrier = false, 0, nil, nil
	left, _ := c.Receives.Quarantine()
	c.Health.QuarantineEnded(left)
	w.Reach(stQuarantineEndedByProof)
	if w.Tracing {
		w.Notef("Q-6 %s: revocation of buffer %d done and the connection that carried its request closed; quarantine ended, buffer freed (%d quarantined left)", key, i, left)
	}
}

// QuarantineSource records a source quarantine FailTransfer decided
// (QuarantineSourceUntilWriteEnds, or the Q-3 mutant's early free with
// the same Health): it lasts until wr's request ended and was released.
func (w *World) QuarantineSource(wr *Write) {
	if w.Prod.Quarantines == nil {
		w.Prod.Quarantines = map[string]*Write{}
	}
	w.Prod.Quarantines[wr.Entry] = wr
	w.Prod.Qver++
}

// WriteEndedProof: E completed and released wr's request (the Q-6 proof
// of its source's quarantine, if any): the core decides whether the
// quarantine ends; it then frees the source and recovers Health once no
// source is quarantined any more.
func (w *World) WriteEndedProof(wr *Write) {
	p := w.Prod
	if p.Quarantines[wr.Entry] != wr || wr.agent != p.agent || w.Nodes.ProdDown || p.Stopped {
		return
	}
	if !handoff.EndsOnProof(w.Decisions) {
		wr.proved = true // the Q-6 mutant: kept for the life of the process
		if w.Tracing {
			w.Notef("Q-6 WRITE #%d ended and released; source of %s kept quarantined", wr.Num, Short(wr.Entry))
		}
		return
	}
	delete(p.Quarantines, wr.Entry)
	p.Qver++
	if w.Sources[wr.Entry] == SourceQuarantined || w.Xf.srcRegs[wr.Entry] != nil {
		w.FreeSource(wr.Entry)
	}
	p.Health.QuarantineEnded(len(p.Quarantines))
	w.Reach(stSourceQuarantineEndedByProof)
	if w.Tracing {
		w.Notef("Q-6 WRITE #%d ended and released; quarantine of the source of %s ended, source freed (%d quarantined left)", wr.Num, Short(wr.Entry), len(p.Quarantines))
	}
}

// Closed reports, without waiting, whether ch is closed (nil: never).
func Closed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
