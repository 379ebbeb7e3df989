package nodes

import (
	"github.com/baton-dev/baton/engine/xfer"
	"github.com/baton-dev/baton/sim/world"
)

// The nodes' use of the transfer backend's real engine/xfer agents (the
// world's transport, sim/world/transport.go, holds the network, the
// agents and the WRITEs): E registers a published entry's source, posts
// its WRITE into a consumer's registered buffer and completes it; the
// network delivers or cuts a WRITE; a crashed E's agent is closed.

// registerSource registers the source of a published entry with E's agent.
func registerSource(w *world.World, id string) {
	reg, err := w.Prod.Agent.RegisterMemory(w.OneRegion(w.SourceMem(id)))
	world.Must(err)
	w.Xf.SrcRegs[id] = reg
	w.Sources[id] = world.SourceLive
}

// postWrite creates and posts E's WRITE of rq's entry into the consumer's
// registered buffer rq names. An error of CreateWriteTo or Post is
// returned for the caller to decide (Q-3: after the claim, a failure).
func postWrite(w *world.World, wr *world.Write, rq *world.Xreq, fault xfer.Fault) error {
	req, err := w.Prod.Agent.CreateWriteTo(w.Xf.SrcRegs[rq.Entry].Descriptors, rq.Md, rq.Targets)
	if err != nil {
		return err
	}
	wr.Req, wr.Agent = req, w.Prod.Agent
	w.Xf.Fault = fault
	w.Xf.Seen = false
	_, err = w.Prod.Agent.Post(req) // the consumer's agent accepts or refuses it now
	if w.Xf.Seen && w.Xf.Inbound.Outcome == xfer.InboundRefused {
		wr.Ended = true // refused: it can land no more (its buffer may be freed and reused, Q-6)
		if c := w.Cons[wr.C]; c.Up && c.Inc == wr.Inc && rq.Revoked {
			w.Reach(world.StWriteRefusedAfterRevoke)
		}
	}
	return err
}

// deliverWrite moves wr now (Deliver, or Cut when cut) and records what
// the consumer's agent reported.
func deliverWrite(w *world.World, wr *world.Write, cut bool) error {
	w.Xf.Seen = false
	var err error
	if cut {
		err = w.Xf.Net.Cut(wr.Req)
	} else {
		err = w.Xf.Net.Deliver(wr.Req)
	}
	wr.Ended = true
	wr.Landed = w.Xf.Seen && w.Xf.Inbound.Outcome == xfer.InboundLanded
	return err
}

// completeWrite completes wr on the network and returns E's Status of it,
// after releasing the request.
func completeWrite(w *world.World, wr *world.Write) error {
	_ = w.Xf.Net.Complete(wr.Req) // the outcome is read back through Status, as E does
	wr.Ended = true
	_, err := wr.Agent.Status(wr.Req)
	world.Must(wr.Agent.Release(wr.Req))
	wr.Released = true
	return err
}

// closeProducerAgent closes a crashed E's agent: its WRITEs in flight end
// cancelled (nothing lands after the crash) and its registered memory is gone.
func closeProducerAgent(w *world.World) {
	if w.Prod.Agent == nil {
		return
	}
	world.Must(w.Prod.Agent.Close())
	for _, wr := range w.Writes {
		if wr.Agent == w.Prod.Agent {
			wr.Ended, wr.Orphan, wr.ProducerDone = true, true, true
		}
	}
	clear(w.Xf.SrcRegs)
}
