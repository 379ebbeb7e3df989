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
//     network's Complete) and E released it (completeWrite), in
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

// CtrlConn is one control connection of a consumer incarnation to one E
// process: the engine's cached producer client (its gRPC layer's peers.go),
// over which the consumer's TransferEncoderCache requests go.
type CtrlConn struct {
	To   *producerNode // the E process it goes to
	Cons *ConsumerNode // the consumer that dialled it
	Inc  int64         // the consumer incarnation that dialled it
	// Retired: the consumer took it out of use after a request it carried
	// ended uncertain (sim/nodes' retireCarrier); it is closed once no call uses it.
	Retired bool
}

// NewConn returns a fresh control connection of c's current incarnation to
// E process to: the node's first in the run in its own memory (firstConn;
// a consumer dials once or twice a run, and that was an allocation each),
// any later one allocated.
func (c *ConsumerNode) NewConn(to *producerNode) *CtrlConn {
	cc := &c.firstConn
	if c.firstConnUsed {
		cc = new(CtrlConn)
	}
	c.firstConnUsed = true
	*cc = CtrlConn{To: to, Cons: c, Inc: c.Inc}
	return cc
}

// CarrierClosed reports whether connection cc can carry nothing more: E's
// process it went to is gone (crashed or stopped), the consumer
// incarnation that dialled it is gone, or the consumer retired it and no
// TransferEncoderCache call of the consumer is outstanding on it (closed
// with its last use).
func (w *World) CarrierClosed(cc *CtrlConn) bool {
	if cc.To != w.Prod || w.Nodes.ProdDown || cc.To.Stopped {
		return true
	}
	c := cc.Cons
	if !c.Up || c.Inc != cc.Inc {
		return true
	}
	return cc.Retired && w.CarrierIdle(cc) // closed with its last use
}

// CarrierIdle reports whether no TransferEncoderCache call of cc's
// consumer is outstanding on connection cc.
func (w *World) CarrierIdle(cc *CtrlConn) bool {
	for _, r := range cc.Cons.Recvs {
		if r.Buf >= 0 && w.Xreqs[r.Num-1].Carrier == cc {
			return false
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
func (w *World) ReceiveProved(revoked <-chan struct{}, carrier *CtrlConn) bool {
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
