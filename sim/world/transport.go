package world

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/baton-dev/baton/engine/xfer"
)

// The transfer backend is not a model: E and every consumer incarnation run
// a real engine/xfer agent (xfer.NewManual) on one xfer.ManualNetwork, and
// the world steps its transfers at the virtual ticks it draws. E registers
// each entry's source (its payload: the entry id's 32 bytes) at
// publication, creates the WRITE with CreateWriteTo from the metadata and
// descriptors the consumer's request carries, Posts it (the consumer's
// agent accepts or refuses it then: key and bounds), and at the drawn tick
// the network Delivers it (the bytes land in the consumer's registered
// buffer, through the agent's own inbound path) or Cuts it (partition);
// one tick later it Completes and E reads Status, Releases the request,
// and Deregisters the source after TransferDone or keeps it (quarantine)
// after a failure. A consumer registers the receive buffer with its
// agent for each transfer receive, Deregisters it when the receive ends
// with a known outcome, and Revokes it on an uncertain one: a WRITE
// its agent accepted before still lands (xfer holds the region in flight),
// every later one is refused, and the revocation's done channel closes
// once none is in flight: with the connection that carried the request
// closed (the consumer retires it), the Q-6 proof that ends the quarantine (quarantine.go). E's source quarantined after its deadline passed is
// freed once its WRITE request ended and was released. A crashed
// consumer's agent is Closed, so a WRITE to it fails; a crashed E's agent
// is Closed, so its WRITEs end cancelled.

// entryIDBytes is the size of a transfer payload and of a receive buffer:
// the source holds the entry id, so the receive buffer holds the id of the
// entry whose WRITE landed in it last.
const entryIDBytes = 32

// xferWorld is the world's transfer network and what its drivers share.
type xferWorld struct {
	Net *xfer.ManualNetwork // the network every agent runs on (nil before the first agent)
	// keys is the remote-key source of every agent (xferKeys).
	keys xferKeys
	// Fault is the xfer fault the next Post takes (SiteWriteError).
	Fault xfer.Fault
	// Inbound is the last InboundEvent a consumer agent reported, and
	// Seen whether one was reported since the driver last cleared it.
	Inbound xfer.InboundEvent
	Seen    bool
	// SrcRegs are E's source registrations, by entry id.
	SrcRegs map[string]*xfer.Registration
	// inboundHook and faultHook are onInbound and nextFault as the
	// agents' hooks, made once per world (newAgent).
	inboundHook func(xfer.InboundEvent)
	faultHook   xfer.FaultHook
	// ProofWaits counts the consumers' quarantines waiting for their Q-6
	// proof (quarantine.go): while it is 0 no step looks for one.
	ProofWaits int
	// region is OneRegion's list; srcMem the chunk SourceMem takes from;
	// writes the block NewWrite takes from.
	region [1][]byte
	srcMem []byte
	writes []Write
}

// pooledXfer is what Run keeps of a World's transfer backend for its next
// run (issue #16: three allocations a run): E's map of source
// registrations, cleared, and the agents' hooks, bound to world's Xf.
type pooledXfer struct {
	world   *World
	srcRegs map[string]*xfer.Registration
	inbound func(xfer.InboundEvent)
	fault   xfer.FaultHook
}

// release keeps w's map and hooks for w's next run, when it made them and
// the map did not grow large, or when w's run made no agent (a
// shared-directory run between two transfer runs).
func (pool *pooledXfer) release(w *World) {
	if w.Xf.Net == nil && pool.world == w {
		return // the run made no agent: newAgent left pool as it was
	}
	*pool = pooledXfer{}
	if m := w.Xf.SrcRegs; m != nil && w.Xf.inboundHook != nil && len(m) <= maxPooledMap {
		clear(m)
		*pool = pooledXfer{world: w, srcRegs: m, inbound: w.Xf.inboundHook, fault: w.Xf.faultHook}
	}
}

// OneRegion returns the list of the one region buf, for an agent's
// RegisterMemory (which keeps none of the list, only the region: engine/xfer
// core.go), in a list the world reuses (issue #16: an allocation each).
func (w *World) OneRegion(buf []byte) [][]byte {
	w.Xf.region[0] = buf
	return w.Xf.region[:]
}

// SourceMem returns a copy of id, for E to register as an entry's source,
// taken from a chunk of the run's (issue #16: an allocation each); each
// copy is its own (capacity len(id)) and a chunk is never reused.
func (w *World) SourceMem(id string) []byte {
	n := len(id)
	if len(w.Xf.srcMem)+n > cap(w.Xf.srcMem) {
		size := textChunk
		if w.Xf.srcMem == nil {
			size = n * (w.Set.Handoffs + 1) // about one entry a handoff
		}
		w.Xf.srcMem = make([]byte, 0, max(size, n))
	}
	l := len(w.Xf.srcMem)
	w.Xf.srcMem = append(w.Xf.srcMem, id...)
	return w.Xf.srcMem[l : l+n : l+n]
}

// xferKeys issues remote keys deterministically: a counter, unique across
// the run's agents (the simulator needs no secrecy, only a seed-fixed run).
type xferKeys struct{ n uint64 }

// Read fills p with the next counter values.
func (k *xferKeys) Read(p []byte) (int, error) {
	for i := 0; i < len(p); i += 8 {
		k.n++
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], k.n)
		copy(p[i:], b[:])
	}
	return len(p), nil
}

// onInbound records a consumer agent's report of an inbound transfer.
func (x *xferWorld) onInbound(ev xfer.InboundEvent) { x.Inbound, x.Seen = ev, true }

// nextFault hands E's agent the fault its Post takes, once.
func (x *xferWorld) nextFault(xfer.WriteInfo) xfer.Fault {
	f := x.Fault
	x.Fault = xfer.Fault{}
	return f
}

// newAgent starts an xfer agent named name on the world's network; a
// consumer's reports its inbound transfers to the driver.
func (w *World) newAgent(name string, consumer bool) xfer.Agent {
	if w.Xf.Net == nil {
		w.Xf.Net = xfer.NewManualNetwork()
		if b := w.Bufs; b != nil && b.xf.world == w && b.xf.srcRegs != nil {
			// Run's, kept for this World (releaseBufs): the map cleared,
			// the hooks bound to this very World's Xf
			w.Xf.SrcRegs, b.xf.srcRegs = b.xf.srcRegs, nil
			w.Xf.inboundHook, w.Xf.faultHook = b.xf.inbound, b.xf.fault
		} else {
			w.Xf.SrcRegs = map[string]*xfer.Registration{}
			w.Xf.inboundHook, w.Xf.faultHook = w.Xf.onInbound, w.Xf.nextFault
		}
	}
	opts := xfer.Options{Name: name, Rand: &w.Xf.keys}
	if consumer {
		opts.OnInbound = w.Xf.inboundHook
	} else {
		opts.Faults = w.Xf.faultHook
	}
	a, err := xfer.NewManual(w.Xf.Net, opts)
	Must(err)
	return a
}

// FreeSource deregisters a source and marks it freed. A source a request
// still reads (the producer-frees-source mutant) keeps its registration.
func (w *World) FreeSource(id string) {
	w.Sources[id] = SourceFreed
	if reg := w.Xf.SrcRegs[id]; reg != nil && w.Prod.Agent.Deregister(reg) == nil {
		delete(w.Xf.SrcRegs, id)
	}
}

// Write is one WRITE E posted into a consumer's buffer: the driver's handle
// on an xfer request and what it knows of it.
// NewWrite returns a new WRITE holding wr, allocated from the run's blocks
// of WRITEs (issue #16: one allocation a transfer), which are never grown
// in place (WRITEs are referred to by pointer).
func (w *World) NewWrite(wr Write) *Write {
	if len(w.Xf.writes) == cap(w.Xf.writes) {
		w.Xf.writes = make([]Write, 0, max(8, 2*cap(w.Xf.writes)))
	}
	w.Xf.writes = append(w.Xf.writes, wr)
	return &w.Xf.writes[len(w.Xf.writes)-1]
}

type Write struct {
	Num   int64
	Entry string
	Recv  int64 // receive number (index into xreqs + 1)
	C     int
	Inc   int64
	Buf   int
	Req   *xfer.Request // its xfer request on E's agent
	Agent xfer.Agent    // E's agent that posted it
	// Landed: the consumer's agent reported every byte landed
	// (InboundLanded); Ended: it can land no more (delivered, refused,
	// cut, or its initiator closed).
	Landed, Ended bool
	// ProducerDone: the producer ended the transfer (done, failed or deadline).
	ProducerDone bool
	// Orphan: E's process crashed with it; its agent's Close ended it.
	Orphan bool
	// Released: E completed and released its request (sim/nodes' completeWrite):
	// nothing reads the source any more (the Q-6 proof of its quarantine).
	Released bool
	// Proved: released while its source was quarantined, and the core kept
	// the quarantine (the NeverEndQuarantine mutant).
	Proved bool
}

// Pending reports whether the WRITE may still land.
func (wr *Write) Pending() bool { return !wr.Ended }

// firstAgentNames are consumerAgentName's names of the first incarnations.
var firstAgentNames = [...]string{"PD0.1", "PD1.1", "PD2.1"}

// consumerAgentName names consumer idx's incarnation inc's agent,
// fmt.Sprintf("PD%d.%d"), a restart's in the run's text (text.go).
func (w *World) consumerAgentName(idx int, inc int64) string {
	if inc == 1 && idx < len(firstAgentNames) {
		return firstAgentNames[idx]
	}
	b := w.text(2 + 20 + 1 + 20) // "PD", two numbers of up to 20 bytes, "."
	b = strconv.AppendInt(append(b, "PD"...), int64(idx), 10)
	return w.keep(strconv.AppendInt(append(b, '.'), inc, 10))
}

// xferLeaks is the transfer backend's part of a drained world (S-4; CONTRACT
// section 4: nothing but quarantine left): no transfer pending on the
// network, E's agent holds no request, and each consumer's agent holds no
// registration, no revocation still waiting and no inbound transfer
// (quarantined buffers were revoked, and their revocations are done once
// no WRITE can land). "" when drained.
func (w *World) xferLeaks() string {
	if w.Xf.Net == nil {
		return ""
	}
	if n := w.Xf.Net.Pending(); n != 0 {
		return fmt.Sprintf("%d transfers still pending on the network", n)
	}
	if a := w.Prod.Agent; a != nil && !w.Nodes.ProdDown {
		if n := a.Counters(); n.Requests != 0 || n.InFlight != 0 {
			return fmt.Sprintf("E's xfer agent still holds %d requests (%d in flight)", n.Requests, n.InFlight)
		}
	}
	for _, c := range w.Cons {
		if n := c.Agent.Counters(); n.Registrations != 0 || n.Revoked != 0 || n.InboundInFlight != 0 {
			return fmt.Sprintf("PD%d's xfer agent still holds %d registrations, %d revocations not done, %d inbound transfers",
				c.Idx, n.Registrations, n.Revoked, n.InboundInFlight)
		}
	}
	return ""
}
