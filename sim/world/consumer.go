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
	// owner is the receive number using it (0: free).
	owner int64
	// quarantined buffers are never freed or reused until their
	// quarantine ends on its Q-6 proof.
	quarantined bool
	// proved: the revocation of this quarantined buffer is done (the Q-6
	// proof came) but the core kept the quarantine (its
	// NeverEndQuarantine mutant).
	proved bool
	// mem is the buffer's memory (entryIDBytes): what a WRITE landed here
	// last put there, through the consumer's xfer agent.
	mem []byte
	// reg is its registration while a receive owns it (nil otherwise).
	reg *xfer.Registration
	// revoked is the done channel of the Revoke of a quarantined buffer:
	// closed once no WRITE can land in it any more.
	revoked <-chan struct{}
	// carrier is the control connection the quarantined receive's
	// request went over (xreq.carrier): the Q-6 proof also needs it
	// closed, which the consumer brings about itself (it retired the
	// connection at the quarantine: closed with its last use) or which
	// happens when either process is gone.
	carrier *ctrlConn
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
	// checked is what checkCore last checked of the receives.
	checked  checkedCore
	idx      int
	inc      int64
	up       bool
	receives *handoff.ConsumerReceives
	health   *handoff.Health
	recvs    map[int64]*recv
	bufs     []buffer
	// agent is the incarnation's transfer agent and md its metadata (the
	// transfer backend only).
	agent xfer.Agent
	md    []byte
	// conn is the control connection the incarnation sends its next
	// TransferEncoderCache over (ctrlConnFor; nil before the first).
	conn *ctrlConn
	// entered counts the quarantines the incarnation entered (the
	// engine's optional observable encoder.quarantine.entered): one that
	// Q-6 ended at once still shows.
	entered int64
	// healthSig is the signature checkHealth last checked fully; cheapSig
	// the one it last checked cheaply; name is "PD<idx>".
	healthSig healthSig
	cheapSig  cheapCheck
	name      string
	// lateAdmissions lists (arrival, admission) ticks of consumes that were
	// not admitted in the step they arrived (only a lock held across a
	// transfer call delays one; Q-5).
	lateAdmissions [][2]int64
}

// transferInFlight reports whether a TransferEncoderCache call of c is outstanding.
func (c *consumerNode) transferInFlight() bool {
	for _, r := range c.recvs {
		if r.buf >= 0 {
			return true
		}
	}
	return false
}

func newConsumerNode(w *World, idx int) *consumerNode {
	c := &consumerNode{idx: idx, inc: 1, name: "PD" + strconv.Itoa(idx)}
	w.sd.cons = append(w.sd.cons, nil)
	c.boot(w)
	return c
}

// boot starts a fresh incarnation: new core state, fresh registered memory.
func (c *consumerNode) boot(w *World) {
	c.up = true
	w.sd.cons[c.idx] = w.sd.disk.Proc(consumerAgentName(c.idx, c.inc))
	c.receives = handoff.NewConsumerReceives(handoff.ConsumerConfig{InflightQuotaBytes: w.set.ConsumerQuotaBytes})
	c.health = handoff.NewHealth()
	c.health.Started()
	c.recvs = map[int64]*recv{}
	c.entered = 0
	c.bufs = make([]buffer, w.set.BuffersPerConsumer)
	if w.set.Backend == BackendTransfer {
		c.agent = w.newAgent(consumerAgentName(c.idx, c.inc), true)
		md, err := c.agent.LocalMetadata()
		must(err)
		c.md = md
		mem := make([]byte, entryIDBytes*len(c.bufs))
		for i := range c.bufs {
			c.bufs[i].mem = mem[i*entryIDBytes : (i+1)*entryIDBytes : (i+1)*entryIDBytes]
		}
	}
}

// consumeArrive: a consumer's Generate(encoder.consume=ref) in CONTRACT's
// order of which rule decides: health (S-2, X-1, Q-4, under the consumer's
// lock, which the Q-5 mutant holds across a transfer), the reference
// (handoff.AdmitConsume: L-1, SU-4, H-3, N-1, SE-3, SU-5), SU-2 (expired,
// then handoff.AdmitReceive: not in the shared directory), Preflight (L-5),
// then the backend's claim.
func (w *World) consumeArrive(ev event) {
	rq := consumeRequestOf(ev)
	c := w.cons[rq.consumer]
	reply := consumeReply{client: rq.client, consumer: rq.consumer, rpc: rq.rpc, entry: rq.entry}
	if !c.up {
		return // connection refused; the client's deadline ends its call
	}
	if w.opts.Mutant == MutantLockAcrossTransfer && c.transferInFlight() {
		if rq.waitingSince == 0 {
			rq.waitingSince = w.now + 1 // arrival tick + 1
		}
		if w.tracing {
			w.notef("PD%d lock held across a transfer: consume waits", c.idx)
		}
		w.after(1, rq.event(ev.kind))
		return
	}
	if rq.waitingSince != 0 {
		c.lateAdmissions = append(c.lateAdmissions, [2]int64{rq.waitingSince - 1, w.now})
	}
	if err := c.health.Admit(); err != nil {
		reply.result = resOf(err)
		w.ledger.refuseForHealth(callKey{rq.client, rq.rpc})
		if w.tracing {
			w.notef("admit: %v", err)
		}
		w.send(msgReply, reply.event())
		return
	}
	rec := w.ledger.get(rq.entry)
	if err := w.consumerCheckRef(c, rec, rq.form, rq.client, rq.rpc); err != nil {
		reply.result = resOf(err)
		w.ledger.rejectCall(callKey{rq.client, rq.rpc}, reply.result)
		if w.tracing {
			w.notef("%v", err)
		}
		w.send(msgReply, reply.event())
		return
	}
	if w.now >= rec.expiresMs {
		reply.result = resSpent
		if w.tracing {
			w.notef("SU-2 %s expired", short(rq.entry))
		}
		w.send(msgReply, reply.event())
		return
	}
	num := int64(len(w.xreqs) + 1)
	key := "r" + strconv.FormatInt(num, 10) + "/" + rq.entry // fmt.Sprintf("r%d/%s"), one allocation
	w.xreqs = append(w.xreqs, xreq{h: int(rq.client), rpc: rq.rpc, c: c.idx, inc: c.inc, buf: -1, entry: rq.entry, key: key, form: rq.form})
	exists, lookErr := true, error(nil) // a transfer: the producer decides SU-2
	if w.set.Backend == BackendSharedDir {
		exists, lookErr = shareddir.EntryExists(w.sd.cons[c.idx], cacheRoot, rec.instance, rec.id)
	}
	// SU-2 before L-5 (CONTRACT precedence): the core's handoff.AdmitReceive
	// looks (shareddir.EntryExists) before it reserves receive bytes.
	if err := handoff.AdmitReceive(rec.id, exists, lookErr, func() error { return c.receives.Preflight(key, rec.payloadBytes) }); err != nil {
		reply.result = resOf(err)
		if w.tracing {
			if errors.Is(err, handoff.ErrSpentReference) {
				w.notef("SU-2 %s is not in the shared directory", short(rq.entry))
			} else {
				w.notef("preflight: %v", err)
			}
		}
		w.send(msgReply, reply.event())
		return
	}
	r := &recv{num: num, h: int(rq.client), rpc: rq.rpc, entry: rq.entry, key: key, buf: -1, form: rq.form}
	c.recvs[num] = r
	if w.set.Backend == BackendSharedDir {
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
func (w *World) claimShared(c *consumerNode, r *recv, reply consumeReply) {
	must(c.receives.Registered(r.key))
	must(c.receives.Requested(r.key))
	rec := w.ledger.get(r.entry)
	ok := false
	crash := w.faults.enabled[SiteConsumerCrash] && !w.faults.healed && w.sd.rng.IntN(16) == 0
	switch w.sd.claim(w.sd.cons[c.idx], c.idx, rec, crash) {
	case claimWon:
		ok = true
	case claimCrashed:
		w.took(rec, r.key, int32(r.h), r.rpc, r.form)
		w.reach(stCrashInsideClaim)
		if w.tracing {
			w.notef("PD%d died inside its Claim of %s after the rename: the claimed file is an orphan", c.idx, short(r.entry))
		}
		w.crash(consumerStep{consumer: int32(c.idx)}.event(evCrash))
		return
	}
	if !ok {
		must(c.receives.Rejected(r.key))
		delete(c.recvs, r.num)
		reply.result = resSpent
		if w.tracing {
			w.notef("SU-2 %s already consumed, released or expired", short(r.entry))
		}
		w.send(msgReply, reply.event())
		return
	}
	w.took(w.ledger.get(r.entry), r.key, int32(r.h), r.rpc, r.form)
	if w.tracing {
		w.notef("claimed %s as %s", short(r.entry), r.key)
	}
	w.after(between(w.diskRNG, 0, 3), recvTimer{consumer: int32(c.idx), recv: r.num, inc: c.inc}.event(evClaimRead))
}

// claimRead: the Claim (rename, read, delete) returned and the consumer
// answers; the receive succeeded.
func (w *World) claimRead(ev event) {
	t := recvTimerOf(ev)
	c := w.cons[t.consumer]
	if !c.up || c.inc != t.inc {
		return // crashed in between: the claimed file is an orphan for the next incarnation
	}
	r := c.recvs[t.recv]
	must(c.receives.Succeeded(r.key))
	w.consumeMedia(c, r)
	delete(c.recvs, r.num)
	w.send(msgReply, consumeReply{client: int32(r.h), consumer: t.consumer, rpc: r.rpc, entry: r.entry, result: resOK}.event())
}

// requestTransfer: register a buffer, then Requested BEFORE sending
// TransferEncoderCache; the consumer's own deadline bounds the wait (C-4).
func (w *World) requestTransfer(c *consumerNode, r *recv, reply consumeReply) {
	buf := -1
	for i := range c.bufs {
		if c.bufs[i].owner == 0 && !c.bufs[i].quarantined {
			buf = i
			break
		}
	}
	if buf < 0 {
		must(c.receives.Rejected(r.key))
		delete(c.recvs, r.num)
		reply.result = resExhausted
		if w.tracing {
			w.notef("L-5 no free receive buffer")
		}
		w.send(msgReply, reply.event())
		return
	}
	c.bufs[buf].owner = r.num
	r.buf = buf
	reg, err := c.agent.RegisterMemory([][]byte{c.bufs[buf].mem})
	must(err)
	c.bufs[buf].reg = reg
	rq := &w.xreqs[r.num-1]
	rq.buf, rq.md, rq.targets, rq.carrier = buf, c.md, reg.Descriptors, w.ctrlConnFor(c)
	must(c.receives.Registered(r.key))
	must(c.receives.Requested(r.key))
	if w.tracing {
		w.notef("registered buffer %d for %s; TransferEncoderCache sent", buf, r.key)
	}
	if !w.directRequest(r) {
		w.send(msgRequest, transferRequest{consumer: int32(c.idx), recv: r.num, entry: r.entry}.event())
	}
	w.after(w.set.ConsumerTimeoutMs, recvTimer{consumer: int32(c.idx), recv: r.num, inc: c.inc}.event(evTransferTimeout))
}

// transferReply: the producer's answer. A receive already ended (duplicate
// or late reply, or a past incarnation's) is ignored.
func (w *World) transferReply(ev event) {
	if w.directReply(&ev) {
		return
	}
	rep := transferReplyOf(ev)
	c := w.cons[rep.consumer]
	rq := w.xreqs[rep.recv-1]
	r, ok := c.recvs[rep.recv]
	if !c.up || c.inc != rq.inc || !ok {
		if w.tracing {
			w.notef("reply %s for %s ignored: receive already ended", resNames[rep.result], rq.key)
		}
		return
	}
	if rep.result == resOK {
		b := &c.bufs[r.buf]
		if string(b.mem) != r.entry || b.owner != r.num {
			w.failf(Correctness, "Q-4", "receive %s succeeded but its buffer %d holds %q owned by receive %d", r.key, r.buf, b.mem, b.owner)
		}
	}
	w.transferEnded(c, r, "producer answered "+resNames[rep.result], rep.result)
}

// transferEnded: handoff.EndTransfer decides how the receive ends on the
// producer's answer (or cause: causeDeadline) and the driver carries it
// out: release the buffer (success, a definite rejection, Q-2) or
// quarantine it with health NOT_READY. The simulator sends no
// request over a refused connection (a stopped producer answers
// UNAVAILABLE without the trailer), so nothing is ever unsent here.
func (w *World) transferEnded(c *consumerNode, r *recv, why string, cause int64) {
	d, err := c.receives.EndTransfer(handoff.TransferEnded{
		ReceiveID:       r.key,
		StatusOK:        cause == resOK,
		Complete:        cause == resOK, // the world's WRITE faults land every byte or none (transport.go)
		BeforeWrite:     cause == resBeforeWrite || cause == resUnavailableBeforeWrite,
		InvalidArgument: cause == resPlainInvalid,
		Reason:          "Q-1 receive " + r.key + " quarantined: " + why, // every transfer ends here: no fmt
	}, w.decisions)
	must(err)
	switch {
	case d.Buffers == handoff.QuarantineBuffers:
		w.quarantineReceive(c, r, d, why, cause)
	case d.Reply == handoff.ReplyData:
		w.consumeMedia(c, r)
		w.endReceive(c, r, resOK, cause)
	case cause == resBeforeWrite || cause == resPlainInvalid:
		w.endReceive(c, r, resSpent, cause) // the producer's rejection, relayed
	case cause == resUnavailableBeforeWrite:
		w.endReceive(c, r, resUnavailable, cause) // the producer refused for its health: retryable
	default:
		w.endReceive(c, r, resUnavailable, cause)
	}
}

// Causes of a receive's end that are no answer of the producer.
const (
	causeDeadline  int64 = -1 // the consumer's own deadline passed
	causeCancelled int64 = -2 // the client cancelled (C-4)
)

// recvEnd is how a transfer receive ended: the producer's answer (or
// cause) it ended on and whether its buffers were freed.
type recvEnd struct {
	key   string
	cause int64
	freed bool
}

// consumerCancelled: the client of call (h, rpc) cancelled it (the stream's
// RST reaches the consumer at once). handoff.ClientCancelled decides: a
// transfer in flight keeps its buffers until its outcome is known (C-4);
// the C-4 mutant's switch ends it now.
func (w *World) consumerCancelled(c *consumerNode, h int32, rpc int64) {
	if !c.up {
		return
	}
	for _, r := range c.recvs {
		if int32(r.h) != h || r.rpc != rpc || r.buf < 0 {
			continue
		}
		w.reach(stCancelMidTransfer)
		_, ended, err := c.receives.ClientCancelled(r.key, w.decisions) // handoff decides (C-4)
		must(err)
		if ended { // the C-4 mutant
			w.endReceive(c, r, resCancelled, causeCancelled)
		}
		return // otherwise the receive waits for the transfer's outcome (C-4)
	}
}

// transferTimeout: the consumer's deadline passed with the outcome unknown.
func (w *World) transferTimeout(ev event) {
	t := recvTimerOf(ev)
	c := w.cons[t.consumer]
	r, ok := c.recvs[t.recv]
	if !c.up || c.inc != t.inc || !ok {
		return
	}
	w.transferEnded(c, r, "deadline passed", causeDeadline)
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
	w.recvEnds = append(w.recvEnds, recvEnd{key: r.key, cause: cause})
	b := &c.bufs[r.buf]
	b.quarantined = true
	c.entered++
	done, err := c.agent.Revoke(b.reg)
	must(err)
	b.reg = nil
	w.xreqs[r.num-1].revoked = true
	if !d.NoProof { // nothing proves a NoProof quarantine over: kept for the incarnation
		b.revoked, b.carrier = done, w.xreqs[r.num-1].carrier
		w.xf.proofWaits++
	}
	w.retireCarrier(w.xreqs[r.num-1].carrier) // closed with its last use: the carrier's closing is the consumer's to bring about
	c.health.Fail(d.Health.Check, d.Health.Reason)
	delete(c.recvs, r.num)
	if w.tracing {
		w.notef("Q-1 %s uncertain (%s): buffer %d quarantined", r.key, why, r.buf)
		select {
		case <-done:
		default:
			w.notef("its revocation waits for a WRITE in flight")
		}
	}
	w.send(msgReply, consumeReply{client: int32(r.h), consumer: int32(c.idx), rpc: r.rpc, entry: r.entry, result: resUnavailable}.event())
}

// endReceive frees a receive's buffer (its outcome is known) and answers the client.
// cause is the producer's answer (or causeDeadline, causeCancelled) it ended on.
func (w *World) endReceive(c *consumerNode, r *recv, res, cause int64) {
	w.recvEnds = append(w.recvEnds, recvEnd{key: r.key, cause: cause, freed: true})
	b := &c.bufs[r.buf]
	if err := c.agent.Deregister(b.reg); err != nil {
		// A WRITE the agent accepted may still land (only a broken
		// decision frees the buffer then): revoke, and reuse it early.
		_, err = c.agent.Revoke(b.reg)
		must(err)
	}
	b.reg = nil
	b.owner = 0
	delete(c.recvs, r.num)
	if w.tracing {
		w.notef("%s ended %s; buffer %d freed", r.key, resNames[res], r.buf)
	}
	w.send(msgReply, consumeReply{client: int32(r.h), consumer: int32(c.idx), rpc: r.rpc, entry: r.entry, result: res}.event())
}

// chaos is a consumer's fault tick in the safety phase: it may crash.
func (w *World) chaos(ev event) {
	if w.faults.healed {
		return
	}
	n := consumerStepOf(ev).consumer
	c := w.cons[n]
	if c.up && w.faults.buggify(SiteConsumerCrash) {
		w.after(0, consumerStep{consumer: n}.event(evCrash))
	}
	w.after(between(w.procRNG, 50, 300), consumerStep{consumer: n}.event(evChaos))
}

// crash kills a consumer: its receives, buffers and quarantine go with the
// process; clients waiting on it hit their deadlines.
func (w *World) crash(ev event) {
	n := consumerStepOf(ev).consumer
	c := w.cons[n]
	if !c.up {
		return
	}
	c.up = false
	w.sd.cons[c.idx].Crash()
	if c.agent != nil {
		must(c.agent.Close()) // its process is gone: a WRITE to it fails (transport.go)
	}
	if len(c.recvs) > 0 {
		w.reach(stCrashWithReceive)
	}
	if w.tracing {
		w.notef("PD%d incarnation %d crashed with %d receives in flight", c.idx, c.inc, len(c.recvs))
	}
	w.after(between(w.procRNG, 10, 300), consumerStep{consumer: n, inc: c.inc}.event(evRestart))
}

// restart boots a new incarnation (a new process on the shared disk). A
// claimed file a past incarnation left is E's to collect (CollectOrphans),
// as in the engine.
func (w *World) restart(ev event) {
	st := consumerStepOf(ev)
	c := w.cons[st.consumer]
	if c.up || c.inc != st.inc {
		return
	}
	c.inc++
	c.boot(w)
	if w.tracing {
		w.notef("PD%d restarted as incarnation %d", c.idx, c.inc)
	}
}

// must panics on an error the driver's own ordering rules out (a Crash verdict).
func must(err error) {
	if err != nil {
		panic(err)
	}
}
