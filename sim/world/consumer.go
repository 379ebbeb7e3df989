package world

import (
	"github.com/baton-dev/baton/sim/simfs"
	"strconv"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/xfer"
)

// buffer is one receive buffer of a consumer: memory its xfer agent
// registers for each transfer receive that uses it (transport.go).
type buffer struct {
	// Owner is the receive number using it (0: free).
	Owner int64
	// Quarantined buffers are never freed or reused until their
	// quarantine ends on its Q-6 proof.
	Quarantined bool
	// proved: the revocation of this quarantined buffer is done (the Q-6
	// proof came) but the core kept the quarantine (its
	// NeverEndQuarantine mutant).
	proved bool
	// Mem is the buffer's memory (entryIDBytes): what a WRITE landed here
	// last put there, through the consumer's xfer agent.
	Mem []byte
	// Reg is its registration while a receive owns it (nil otherwise).
	Reg *xfer.Registration
	// Revoked is the done channel of the Revoke of a quarantined buffer:
	// closed once no WRITE can land in it any more.
	Revoked <-chan struct{}
	// Carrier is the control connection the quarantined receive's
	// request went over (xreq.carrier): the Q-6 proof also needs it
	// closed, which the consumer brings about itself (it retired the
	// connection at the quarantine: closed with its last use) or which
	// happens when either process is gone.
	Carrier *CtrlConn
}

// Recv is one receive in flight on a consumer.
type Recv struct {
	Num   int64   // the receive's number (index into World.Xreqs + 1)
	H     int     // the client's index
	Rpc   int64   // its consume call's number
	Entry string  // the entry received
	Key   string  // the receive's id in the core (ConsumerReceives)
	Buf   int     // -1 for the shared-directory backend
	Form  RefForm // the form of the presented reference
}

// RecvKey is receive num's id in the core, "r<num>/<entry>", made in the
// run's text (text.go).
func (w *World) RecvKey(num int64, entry string) string {
	b := w.text(len(entry) + 21) // "r", a number's up to 19 digits, "/"
	b = append(b, 'r')
	b = strconv.AppendInt(b, num, 10)
	b = append(b, '/')
	b = append(b, entry...)
	return w.keep(b)
}

// NewRecv returns a new receive holding r, allocated from the run's blocks
// of receives (issue #16: one allocation a consume), which are never grown
// in place (receives are referred to by pointer).
func (w *World) NewRecv(r Recv) *Recv {
	if len(w.recvs) == cap(w.recvs) {
		w.recvs = make([]Recv, 0, max(16, 2*cap(w.recvs)))
	}
	w.recvs = append(w.recvs, r)
	return &w.recvs[len(w.recvs)-1]
}

// ConsumerNode is a PD consumer: the core's ConsumerReceives and Health.
// handoff.EndTransfer decides how a transfer receive ends;
// the driver carries the decision out, as the real engine does.
type ConsumerNode struct {
	// Checked is what checkCore last checked of the receives.
	Checked  CheckedCore
	Idx      int
	Inc      int64
	Up       bool
	Receives *handoff.ConsumerReceives
	Health   *handoff.Health
	Recvs    map[int64]*Recv
	Bufs     []buffer
	// Agent is the incarnation's transfer agent and Md its metadata (the
	// transfer backend only).
	Agent xfer.Agent
	Md    []byte
	// Conn is the control connection the incarnation sends its next
	// TransferEncoderCache over (sim/nodes' ctrlConnFor; nil before the first).
	Conn *CtrlConn
	// firstConn is the first connection the node dials in a run (NewConn),
	// firstConnUsed once it is handed out.
	firstConn     CtrlConn
	firstConnUsed bool
	// Entered counts the quarantines the incarnation entered (the
	// engine's optional observable encoder.quarantine.entered): one that
	// Q-6 ended at once still shows.
	Entered int64
	// HealthSig is the signature checkHealth last checked fully; cheapSig
	// the one it last checked cheaply; name is "PD<idx>".
	HealthSig HealthSig
	CheapSig  CheapCheck
	Name      string
	// LateAdmissions lists (arrival, admission) ticks of consumes that were
	// not admitted in the step they arrived (only a lock held across a
	// transfer call delays one; Q-5).
	LateAdmissions [][2]int64
}

// TransferInFlight reports whether a TransferEncoderCache call of c is outstanding.
func (c *ConsumerNode) TransferInFlight() bool {
	for _, r := range c.Recvs {
		if r.Buf >= 0 {
			return true
		}
	}
	return false
}

// consumerNames are the names of the consumers a drawn run has (1..3).
var consumerNames = [...]string{"PD0", "PD1", "PD2"}

func newConsumerNode(w *World, idx int) *ConsumerNode {
	var c *ConsumerNode
	if len(w.consNodes) > 0 { // Run's pooled one (cleared by releaseBufs)
		c, w.consNodes = &w.consNodes[0], w.consNodes[1:]
	} else {
		c = new(ConsumerNode)
	}
	var name string
	if idx < len(consumerNames) {
		name = consumerNames[idx]
	} else {
		name = "PD" + strconv.Itoa(idx)
	}
	*c = ConsumerNode{Idx: idx, Inc: 1, Name: name}
	if cap(w.Sd.Cons) < w.Set.Consumers {
		w.Sd.Cons = make([]*simfs.Proc, 0, w.Set.Consumers) // one allocation, not one a consumer (or Run's pooled one)
	}
	w.Sd.Cons = append(w.Sd.Cons, nil)
	c.Boot(w)
	return c
}

// Boot starts a fresh incarnation: new core state, fresh registered memory.
func (c *ConsumerNode) Boot(w *World) {
	c.Up = true
	name := consumerAgentName(c.Idx, c.Inc)
	w.Sd.Cons[c.Idx] = w.Sd.Disk.Proc(name)
	c.Receives = handoff.NewConsumerReceives(handoff.ConsumerConfig{InflightQuotaBytes: w.Set.ConsumerQuotaBytes})
	c.Health = handoff.NewHealth()
	c.Health.Started()
	if c.Recvs != nil && w.Bufs != nil {
		// a past incarnation's, for Run to pool once the run is over
		// (releaseBufs): nothing of it is cleared before
		w.retiredRecvs = append(w.retiredRecvs, c.Recvs)
	}
	if n := len(w.recvMaps); n > 0 { // Run's pooled one (cleared by releaseBufs)
		c.Recvs, w.recvMaps = w.recvMaps[n-1], w.recvMaps[:n-1]
	} else {
		c.Recvs = map[int64]*Recv{}
	}
	c.Entered = 0
	if n := w.Set.BuffersPerConsumer; len(w.consBufs) >= n && c.Inc == 1 {
		// a first incarnation's, from Run's pooled buffers (cleared)
		c.Bufs, w.consBufs = w.consBufs[:n:n], w.consBufs[n:]
	} else {
		c.Bufs = make([]buffer, n)
	}
	if w.Set.Backend == BackendTransfer {
		c.Agent = w.newAgent(name, true)
		md, err := c.Agent.LocalMetadata()
		Must(err)
		c.Md = md
		var mem []byte
		if n := entryIDBytes * len(c.Bufs); c.Inc == 1 && w.Bufs != nil {
			// a first incarnation's, from Run's pooled memory (cleared
			// by releaseBufs, which clears all of Bufs.consMem)
			if len(w.consMem)+n > cap(w.consMem) {
				w.Bufs.consMem = make([]byte, entryIDBytes*w.Set.Consumers*w.Set.BuffersPerConsumer)
				w.consMem = w.Bufs.consMem[:0]
			}
			l := len(w.consMem)
			mem, w.consMem = w.consMem[l:l+n:l+n], w.consMem[:l+n]
		} else {
			mem = make([]byte, n)
		}
		for i := range c.Bufs {
			c.Bufs[i].Mem = mem[i*entryIDBytes : (i+1)*entryIDBytes : (i+1)*entryIDBytes]
		}
	}
}

// Causes of a receive's end that are no answer of the producer.
const (
	CauseDeadline  int64 = -1 // the consumer's own deadline passed
	CauseCancelled int64 = -2 // the client cancelled (C-4)
)

// RecvEnd is how a transfer receive ended: the producer's answer (or
// cause) it ended on and whether its buffers were freed.
type RecvEnd struct {
	Key   string
	Cause int64
	Freed bool
}

// Must panics on an error the driver's own ordering rules out (a Crash verdict).
func Must(err error) {
	if err != nil {
		panic(err)
	}
}
