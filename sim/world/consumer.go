package world

import (
	"errors"
	"strconv"

	"github.com/baton-dev/baton/engine/cache/shareddir"
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
	// reg is its registration while a receive owns it (nil otherwise).
	reg *xfer.Registration
	// Revoked is the done channel of the Revoke of a quarantined buffer:
	// closed once no WRITE can land in it any more.
	Revoked <-chan struct{}
	// Carrier is the control connection the quarantined receive's
	// request went over (xreq.carrier): the Q-6 proof also needs it
	// closed, which the consumer brings about itself (it retired the
	// connection at the quarantine: closed with its last use) or which
	// happens when either process is gone.
	Carrier *ctrlConn
}

// recv is one receive in flight on a consumer.
type recv struct {
	num   int64
	h     int
	rpc   int64
	entry string
	key   string
	buf   int // -1 for the shared-directory backend
	form  refForm
}

// consumerNode is a PD consumer: the core's ConsumerReceives and Health.
// handoff.EndTransfer decides how a transfer receive ends;
// the driver carries the decision out, as the real engine does.
type consumerNode struct {
	// Checked is what checkCore last checked of the receives.
	Checked  CheckedCore
	Idx      int
	Inc      int64
	Up       bool
	Receives *handoff.ConsumerReceives
	Health   *handoff.Health
	Recvs    map[int64]*recv
	Bufs     []buffer
	// Agent is the incarnation's transfer agent and md its metadata (the
	// transfer backend only).
	Agent xfer.Agent
	md    []byte
	// conn is the control connection the incarnation sends its next
	// TransferEncoderCache over (ctrlConnFor; nil before the first).
	conn *ctrlConn
	// entered counts the quarantines the incarnation entered (the
	// engine's optional observable encoder.quarantine.entered): one that
	// Q-6 ended at once still shows.
	entered int64
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

// transferInFlight reports whether a TransferEncoderCache call of c is outstanding.
func (c *consumerNode) transferInFlight() bool {
	for _, r := range c.Recvs {
		if r.buf >= 0 {
			return true
		}
	}
	return false
}

func newConsumerNode(w *World, idx int) *consumerNode {
	c := &consumerNode{Idx: idx, Inc: 1, Name: "PD" + strconv.Itoa(idx)}
	w.Sd.Cons = append(w.Sd.Cons, nil)
	c.Boot(w)
	return c
}

// Boot starts a fresh incarnation: new core state, fresh registered memory.
func (c *consumerNode) Boot(w *World) {
	c.Up = true
	w.Sd.Cons[c.Idx] = w.Sd.Disk.Proc(consumerAgentName(c.Idx, c.Inc))
	c.Receives = handoff.NewConsumerReceives(handoff.ConsumerConfig{InflightQuotaBytes: w.Set.ConsumerQuotaBytes})
	c.Health = handoff.NewHealth()
	c.Health.Started()
	c.Recvs = map[int64]*recv{}
	c.entered = 0
	c.Bufs = make([]buffer, w.Set.BuffersPerConsumer)
	if w.Set.Backend == BackendTransfer {
		c.Agent = w.newAgent(consumerAgentName(c.Idx, c.Inc), true)
		md, err := c.Agent.LocalMetadata()
		Must(err)
		c.md = md
		mem := make([]byte, entryIDBytes*len(c.Bufs))
		for i := range c.Bufs {
			c.Bufs[i].Mem = mem[i*entryIDBytes : (i+1)*entryIDBytes : (i+1)*entryIDBytes]
		}
	}
}

// consumeArrive: a consumer's Generate(encoder.consume=ref) in CONTRACT's
// order of which rule decides: health (S-2, X-1, Q-4, under the consumer's
// lock, which the Q-5 mutant holds across a transfer), the reference
// (handoff.AdmitConsume: L-1, SU-4, H-3, N-1, SE-3, SU-5), SU-2 (expired,
// then handoff.AdmitReceive: not in the shared directory), Preflight (L-5),
// then the backend's claim.
func (w *World) consumeArrive(ev Event) {
	rq := ConsumeRequestOf(ev)
	c := w.Cons[rq.Consumer]
	reply := ConsumeReply{Client: rq.Client, Consumer: rq.Consumer, Rpc: rq.Rpc, Entry: rq.Entry}
	if !c.Up {
		return // connection refused; the client's deadline ends its call
	}
	if w.Opts.Mutant == MutantLockAcrossTransfer && c.transferInFlight() {
		if rq.WaitingSince == 0 {
			rq.WaitingSince = w.Now + 1 // arrival tick + 1
		}
		if w.Tracing {
			w.Notef("PD%d lock held across a transfer: consume waits", c.Idx)
		}
		w.After(1, rq.event(ev.Kind))
		return
	}
	if rq.WaitingSince != 0 {
		c.LateAdmissions = append(c.LateAdmissions, [2]int64{rq.WaitingSince - 1, w.Now})
	}
	if err := c.Health.Admit(); err != nil {
		reply.Result = ResOf(err)
		w.Ledger.refuseForHealth(CallKey{rq.Client, rq.Rpc})
		if w.Tracing {
			w.Notef("admit: %v", err)
		}
		w.Send(MsgReply, reply.Event())
		return
	}
	rec := w.Ledger.Get(rq.Entry)
	if err := w.consumerCheckRef(c, rec, rq.Form, rq.Client, rq.Rpc); err != nil {
		reply.Result = ResOf(err)
		w.Ledger.RejectCall(CallKey{rq.Client, rq.Rpc}, reply.Result)
		if w.Tracing {
			w.Notef("%v", err)
		}
		w.Send(MsgReply, reply.Event())
		return
	}
	if w.Now >= rec.ExpiresMs {
		reply.Result = ResSpent
		if w.Tracing {
			w.Notef("SU-2 %s expired", Short(rq.Entry))
		}
		w.Send(MsgReply, reply.Event())
		return
	}
	num := int64(len(w.Xreqs) + 1)
	key := "r" + strconv.FormatInt(num, 10) + "/" + rq.Entry // fmt.Sprintf("r%d/%s"), one allocation
	w.Xreqs = append(w.Xreqs, xreq{H: int(rq.Client), Rpc: rq.Rpc, C: c.Idx, Inc: c.Inc, Buf: -1, Entry: rq.Entry, Key: key, Form: rq.Form})
	exists, lookErr := true, error(nil) // a transfer: the producer decides SU-2
	if w.Set.Backend == BackendSharedDir {
		exists, lookErr = shareddir.EntryExists(w.Sd.Cons[c.Idx], cacheRoot, rec.Instance, rec.Id)
	}
	// SU-2 before L-5 (CONTRACT precedence): the core's handoff.AdmitReceive
	// looks (shareddir.EntryExists) before it reserves receive bytes.
	if err := handoff.AdmitReceive(rec.Id, exists, lookErr, func() error { return c.Receives.Preflight(key, rec.PayloadBytes) }); err != nil {
		reply.Result = ResOf(err)
		if w.Tracing {
			if errors.Is(err, handoff.ErrSpentReference) {
				w.Notef("SU-2 %s is not in the shared directory", Short(rq.Entry))
			} else {
				w.Notef("preflight: %v", err)
			}
		}
		w.Send(MsgReply, reply.Event())
		return
	}
	r := &recv{num: num, h: int(rq.Client), rpc: rq.Rpc, entry: rq.Entry, key: key, buf: -1, form: rq.Form}
	c.Recvs[num] = r
	if w.Set.Backend == BackendSharedDir {
		w.claimShared(c, r, reply)
		return
	}
	w.requestTransfer(c, r, reply)
}

// claimShared claims with the real shareddir.Claim over the simulated disk
// (atomic rename, one winner, SU-1; shared_disk.go); the mutant reads the
// file in place instead, leaving it for the next claimant. A consumer whose
// crash fault is on may die inside the Claim after its rename won (drawn
// from the shared disk's stream): the entry is spent and its claimed file
// is an orphan for E's CollectOrphans (or its Close).
func (w *World) claimShared(c *consumerNode, r *recv, reply ConsumeReply) {
	Must(c.Receives.Registered(r.key))
	Must(c.Receives.Requested(r.key))
	rec := w.Ledger.Get(r.entry)
	ok := false
	crash := w.Faults.enabled[SiteConsumerCrash] && !w.Faults.Healed && w.Sd.rng.IntN(16) == 0
	switch w.Sd.Claim(w.Sd.Cons[c.Idx], c.Idx, rec, crash) {
	case ClaimWon:
		ok = true
	case claimCrashed:
		w.Took(rec, r.key, int32(r.h), r.rpc, r.form)
		w.Reach(stCrashInsideClaim)
		if w.Tracing {
			w.Notef("PD%d died inside its Claim of %s after the rename: the claimed file is an orphan", c.Idx, Short(r.entry))
		}
		w.runNow(ConsumerStep{Consumer: int32(c.Idx)}.Event(EvCrash))
		return
	}
	if !ok {
		Must(c.Receives.Rejected(r.key))
		delete(c.Recvs, r.num)
		reply.Result = ResSpent
		if w.Tracing {
			w.Notef("SU-2 %s already consumed, released or expired", Short(r.entry))
		}
		w.Send(MsgReply, reply.Event())
		return
	}
	w.Took(w.Ledger.Get(r.entry), r.key, int32(r.h), r.rpc, r.form)
	if w.Tracing {
		w.Notef("claimed %s as %s", Short(r.entry), r.key)
	}
	w.After(Between(w.diskRNG, 0, 3), recvTimer{consumer: int32(c.Idx), recv: r.num, inc: c.Inc}.event(evClaimRead))
}

// claimRead: the Claim (rename, read, delete) returned and the consumer
// answers; the receive succeeded.
func (w *World) claimRead(ev Event) {
	t := recvTimerOf(ev)
	c := w.Cons[t.consumer]
	if !c.Up || c.Inc != t.inc {
		return // crashed in between: the claimed file is an orphan for the next incarnation
	}
	r := c.Recvs[t.recv]
	Must(c.Receives.Succeeded(r.key))
	w.consumeMedia(c, r)
	delete(c.Recvs, r.num)
	w.Send(MsgReply, ConsumeReply{Client: int32(r.h), Consumer: t.consumer, Rpc: r.rpc, Entry: r.entry, Result: ResOK}.Event())
}

// requestTransfer: register a buffer, then Requested BEFORE sending
// TransferEncoderCache; the consumer's own deadline bounds the wait (C-4).
func (w *World) requestTransfer(c *consumerNode, r *recv, reply ConsumeReply) {
	buf := -1
	for i := range c.Bufs {
		if c.Bufs[i].Owner == 0 && !c.Bufs[i].Quarantined {
			buf = i
			break
		}
	}
	if buf < 0 {
		Must(c.Receives.Rejected(r.key))
		delete(c.Recvs, r.num)
		reply.Result = resExhausted
		if w.Tracing {
			w.Notef("L-5 no free receive buffer")
		}
		w.Send(MsgReply, reply.Event())
		return
	}
	c.Bufs[buf].Owner = r.num
	r.buf = buf
	reg, err := c.Agent.RegisterMemory([][]byte{c.Bufs[buf].Mem})
	Must(err)
	c.Bufs[buf].reg = reg
	rq := &w.Xreqs[r.num-1]
	rq.Buf, rq.Md, rq.Targets, rq.Carrier = buf, c.md, reg.Descriptors, w.ctrlConnFor(c)
	Must(c.Receives.Registered(r.key))
	Must(c.Receives.Requested(r.key))
	if w.Tracing {
		w.Notef("registered buffer %d for %s; TransferEncoderCache sent", buf, r.key)
	}
	if !w.directRequest(r) {
		w.Send(MsgRequest, transferRequest{Consumer: int32(c.Idx), Recv: r.num, Entry: r.entry}.event())
	}
	w.After(w.Set.ConsumerTimeoutMs, recvTimer{consumer: int32(c.Idx), recv: r.num, inc: c.Inc}.event(evTransferTimeout))
}

// transferReply: the producer's answer. A receive already ended (duplicate
// or late reply, or a past incarnation's) is ignored.
func (w *World) transferReply(ev Event) {
	if w.directReply(&ev) {
		return
	}
	rep := transferReplyOf(ev)
	c := w.Cons[rep.Consumer]
	rq := w.Xreqs[rep.Recv-1]
	r, ok := c.Recvs[rep.Recv]
	if !c.Up || c.Inc != rq.Inc || !ok {
		if w.Tracing {
			w.Notef("reply %s for %s ignored: receive already ended", ResNames[rep.Result], rq.Key)
		}
		return
	}
	if rep.Result == ResOK {
		b := &c.Bufs[r.buf]
		if string(b.Mem) != r.entry || b.Owner != r.num {
			w.Failf(Correctness, "Q-4", "receive %s succeeded but its buffer %d holds %q owned by receive %d", r.key, r.buf, b.Mem, b.Owner)
		}
	}
	w.transferEnded(c, r, "producer answered "+ResNames[rep.Result], rep.Result)
}

// transferEnded: handoff.EndTransfer decides how the receive ends on the
// producer's answer (or cause: causeDeadline) and the driver carries it
// out: release the buffer (success, a definite rejection, Q-2) or
// quarantine it with health NOT_READY. The simulator sends no
// request over a refused connection (a stopped producer answers
// UNAVAILABLE without the trailer), so nothing is ever unsent here.
func (w *World) transferEnded(c *consumerNode, r *recv, why string, cause int64) {
	d, err := c.Receives.EndTransfer(handoff.TransferEnded{
		ReceiveID:       r.key,
		StatusOK:        cause == ResOK,
		Complete:        cause == ResOK, // the world's WRITE faults land every byte or none (transport.go)
		BeforeWrite:     cause == ResBeforeWrite || cause == ResUnavailableBeforeWrite,
		InvalidArgument: cause == ResPlainInvalid,
		Reason:          "Q-1 receive " + r.key + " quarantined: " + why, // every transfer ends here: no fmt
	}, w.Decisions)
	Must(err)
	switch {
	case d.Buffers == handoff.QuarantineBuffers:
		w.quarantineReceive(c, r, d, why, cause)
	case d.Reply == handoff.ReplyData:
		w.consumeMedia(c, r)
		w.endReceive(c, r, ResOK, cause)
	case cause == ResBeforeWrite || cause == ResPlainInvalid:
		w.endReceive(c, r, ResSpent, cause) // the producer's rejection, relayed
	case cause == ResUnavailableBeforeWrite:
		w.endReceive(c, r, ResUnavailable, cause) // the producer refused for its health: retryable
	default:
		w.endReceive(c, r, ResUnavailable, cause)
	}
}

// Causes of a receive's end that are no answer of the producer.
const (
	CauseDeadline  int64 = -1 // the consumer's own deadline passed
	CauseCancelled int64 = -2 // the client cancelled (C-4)
)

// recvEnd is how a transfer receive ended: the producer's answer (or
// cause) it ended on and whether its buffers were freed.
type recvEnd struct {
	Key   string
	Cause int64
	Freed bool
}

// consumerCancelled: the client of call (h, rpc) cancelled it (the stream's
// RST reaches the consumer at once). handoff.ClientCancelled decides: a
// transfer in flight keeps its buffers until its outcome is known (C-4);
// the C-4 mutant's switch ends it now.
func (w *World) consumerCancelled(c *consumerNode, h int32, rpc int64) {
	if !c.Up {
		return
	}
	for _, r := range c.Recvs {
		if int32(r.h) != h || r.rpc != rpc || r.buf < 0 {
			continue
		}
		w.Reach(stCancelMidTransfer)
		_, ended, err := c.Receives.ClientCancelled(r.key, w.Decisions) // handoff decides (C-4)
		Must(err)
		if ended { // the C-4 mutant
			w.endReceive(c, r, resCancelled, CauseCancelled)
		}
		return // otherwise the receive waits for the transfer's outcome (C-4)
	}
}

// transferTimeout: the consumer's deadline passed with the outcome unknown.
func (w *World) transferTimeout(ev Event) {
	t := recvTimerOf(ev)
	c := w.Cons[t.consumer]
	r, ok := c.Recvs[t.recv]
	if !c.Up || c.Inc != t.inc || !ok {
		return
	}
	w.transferEnded(c, r, "deadline passed", CauseDeadline)
}

// quarantineReceive carries out a quarantine handoff.EndTransfer decided
// the buffer's registration is revoked with the consumer's xfer
// agent (every later WRITE to it is refused; one it accepted before may
// still land, and the revocation's done channel closes once none can: the
// Q-6 proof, with the connection that carried the request closed, which
// the consumer retires here as the engine does), the buffer is
// kept until that proof ends the quarantine (endProvedQuarantines),
// health NOT_READY, the client answered UNAVAILABLE.
func (w *World) quarantineReceive(c *consumerNode, r *recv, d handoff.ReceiveDecision, why string, cause int64) {
	w.RecvEnds = append(w.RecvEnds, recvEnd{Key: r.key, Cause: cause})
	b := &c.Bufs[r.buf]
	b.Quarantined = true
	c.entered++
	done, err := c.Agent.Revoke(b.reg)
	Must(err)
	b.reg = nil
	w.Xreqs[r.num-1].revoked = true
	if !d.NoProof { // nothing proves a NoProof quarantine over: kept for the incarnation
		b.Revoked, b.Carrier = done, w.Xreqs[r.num-1].Carrier
		w.xf.proofWaits++
	}
	w.retireCarrier(w.Xreqs[r.num-1].Carrier) // closed with its last use: the carrier's closing is the consumer's to bring about
	c.Health.Fail(d.Health.Check, d.Health.Reason)
	delete(c.Recvs, r.num)
	if w.Tracing {
		w.Notef("Q-1 %s uncertain (%s): buffer %d quarantined", r.key, why, r.buf)
		select {
		case <-done:
		default:
			w.Notef("its revocation waits for a WRITE in flight")
		}
	}
	w.Send(MsgReply, ConsumeReply{Client: int32(r.h), Consumer: int32(c.Idx), Rpc: r.rpc, Entry: r.entry, Result: ResUnavailable}.Event())
}

// endReceive frees a receive's buffer (its outcome is known) and answers the client.
// cause is the producer's answer (or causeDeadline, causeCancelled) it ended on.
func (w *World) endReceive(c *consumerNode, r *recv, res, cause int64) {
	w.RecvEnds = append(w.RecvEnds, recvEnd{Key: r.key, Cause: cause, Freed: true})
	b := &c.Bufs[r.buf]
	if err := c.Agent.Deregister(b.reg); err != nil {
		// A WRITE the agent accepted may still land (only a broken
		// decision frees the buffer then): revoke, and reuse it early.
		_, err = c.Agent.Revoke(b.reg)
		Must(err)
	}
	b.reg = nil
	b.Owner = 0
	delete(c.Recvs, r.num)
	if w.Tracing {
		w.Notef("%s ended %s; buffer %d freed", r.key, ResNames[res], r.buf)
	}
	w.Send(MsgReply, ConsumeReply{Client: int32(r.h), Consumer: int32(c.Idx), Rpc: r.rpc, Entry: r.entry, Result: res}.Event())
}

// Must panics on an error the driver's own ordering rules out (a Crash verdict).
func Must(err error) {
	if err != nil {
		panic(err)
	}
}
