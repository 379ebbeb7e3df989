package nodes

import (
	"errors"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/world"
)

// The PD consumers' request handling: a consume's admission in CONTRACT's
// order, the shared-directory claim, the transfer backend's receive (its
// request, E's answer, the consumer's deadline, a client's cancel) and how
// a receive ends (freed, or quarantined: ). A consumer's state
// (world.ConsumerNode: its receives, buffers, health) stays in package
// world; these are its handlers, installed in Behaviour's table.

// consumeArrive: a consumer's Generate(encoder.consume=ref) in CONTRACT's
// order of which rule decides: health (S-2, X-1, Q-4, under the consumer's
// lock, which the Q-5 mutant holds across a transfer), the reference
// (handoff.AdmitConsume: L-1, SU-4, H-3, N-1, SE-3, SU-5), SU-2 (expired,
// then handoff.AdmitReceive: not in the shared directory), Preflight (L-5),
// then the backend's claim.
func consumeArrive(w *world.World, ev world.Event) {
	rq := world.ConsumeRequestOf(ev)
	c := w.Cons[rq.Consumer]
	reply := world.ConsumeReply{Client: rq.Client, Consumer: rq.Consumer, Rpc: rq.Rpc, Entry: rq.Entry}
	if !c.Up {
		return // connection refused; the client's deadline ends its call
	}
	if w.Opts.Mutant == world.MutantLockAcrossTransfer && c.TransferInFlight() {
		if rq.WaitingSince == 0 {
			rq.WaitingSince = w.Now + 1 // arrival tick + 1
		}
		if w.Tracing {
			w.Notef("PD%d lock held across a transfer: consume waits", c.Idx)
		}
		w.After(1, rq.Event(ev.Kind))
		return
	}
	if rq.WaitingSince != 0 {
		c.LateAdmissions = append(c.LateAdmissions, [2]int64{rq.WaitingSince - 1, w.Now})
		w.LateAdmissions++ // Q-5's skip (sim/checks/check_locks.go)
	}
	if err := c.Health.Admit(); err != nil {
		reply.Result = world.ResOf(err)
		w.Ledger.RefuseForHealth(world.CallKey{H: rq.Client, Rpc: rq.Rpc})
		if w.Tracing {
			w.Notef("admit: %v", err)
		}
		w.Send(world.MsgReply, reply.Event())
		return
	}
	rec := w.Ledger.Get(rq.Entry)
	if err := consumerCheckRef(w, c, rec, rq.Form, rq.Client, rq.Rpc); err != nil {
		reply.Result = world.ResOf(err)
		w.Ledger.RejectCall(world.CallKey{H: rq.Client, Rpc: rq.Rpc}, reply.Result)
		if w.Tracing {
			w.Notef("%v", err)
		}
		w.Send(world.MsgReply, reply.Event())
		return
	}
	if err := handoff.AdmitUnexpired(rec.Id, rec.ExpiresMs, w.Now); err != nil {
		reply.Result = world.ResOf(err) // ResSpent
		if w.Tracing {
			w.Notef("SU-2 %s expired", world.Short(rq.Entry))
		}
		w.Send(world.MsgReply, reply.Event())
		return
	}
	num := int64(len(w.Xreqs) + 1)
	key := w.RecvKey(num, rq.Entry)
	w.Xreqs = append(w.Xreqs, world.Xreq{H: int(rq.Client), Rpc: rq.Rpc, C: c.Idx, Inc: c.Inc, Buf: -1, Entry: rq.Entry, Key: key, Form: rq.Form})
	exists, lookErr := true, error(nil) // a transfer: the producer decides SU-2
	if w.Set.Backend == world.BackendSharedDir {
		exists, lookErr = shareddir.EntryExists(w.Sd.Cons[c.Idx], world.CacheRoot, rec.Instance, rec.Id)
	}
	// SU-2 before L-5 (CONTRACT precedence): the core's handoff.AdmitReceive
	// looks (shareddir.EntryExists) before it reserves receive bytes.
	if err := handoff.AdmitReceive(rec.Id, exists, lookErr, func() error { return c.Receives.Preflight(key, rec.PayloadBytes) }); err != nil {
		reply.Result = world.ResOf(err)
		if w.Tracing {
			if errors.Is(err, handoff.ErrSpentReference) {
				w.Notef("SU-2 %s is not in the shared directory", world.Short(rq.Entry))
			} else {
				w.Notef("preflight: %v", err)
			}
		}
		w.Send(world.MsgReply, reply.Event())
		return
	}
	r := w.NewRecv(world.Recv{Num: num, H: int(rq.Client), Rpc: rq.Rpc, Entry: rq.Entry, Key: key, Buf: -1, Form: rq.Form})
	c.Recvs[num] = r
	if w.Set.Backend == world.BackendSharedDir {
		claimShared(w, c, r, reply)
		return
	}
	requestTransfer(w, c, r, reply)
}

// claimShared claims with the real shareddir.Claim over the simulated disk
// (atomic rename, one winner, SU-1; shared_disk.go); the mutant reads the
// file in place instead, leaving it for the next claimant. A consumer whose
// crash fault is on may die inside the Claim after its rename won (drawn
// from the shared disk's stream): the entry is spent and its claimed file
// is an orphan for E's CollectOrphans (or its Close).
func claimShared(w *world.World, c *world.ConsumerNode, r *world.Recv, reply world.ConsumeReply) {
	world.Must(c.Receives.Registered(r.Key))
	world.Must(c.Receives.Requested(r.Key))
	rec := w.Ledger.Get(r.Entry)
	ok := false
	crash := w.Faults.On(world.SiteConsumerCrash) && !w.Faults.Healed && w.Sd.Rng.IntN(16) == 0
	switch w.Sd.Claim(w.Sd.Cons[c.Idx], c.Idx, rec, crash) {
	case world.ClaimWon:
		ok = true
	case world.ClaimCrashed:
		took(w, rec, r.Key, int32(r.H), r.Rpc, r.Form)
		w.Reach(world.StCrashInsideClaim)
		if w.Tracing {
			w.Notef("PD%d died inside its Claim of %s after the rename: the claimed file is an orphan", c.Idx, world.Short(r.Entry))
		}
		w.RunNow(world.ConsumerStep{Consumer: int32(c.Idx)}.Event(world.EvCrash))
		return
	}
	if !ok {
		world.Must(c.Receives.Rejected(r.Key))
		delete(c.Recvs, r.Num)
		reply.Result = world.ResSpent
		if w.Tracing {
			w.Notef("SU-2 %s already consumed, released or expired", world.Short(r.Entry))
		}
		w.Send(world.MsgReply, reply.Event())
		return
	}
	took(w, w.Ledger.Get(r.Entry), r.Key, int32(r.H), r.Rpc, r.Form)
	if w.Tracing {
		w.Notef("claimed %s as %s", world.Short(r.Entry), r.Key)
	}
	w.After(world.Between(w.DiskRNG, 0, 3), world.RecvTimer{Consumer: int32(c.Idx), Recv: r.Num, Inc: c.Inc}.Event(world.EvClaimRead))
}

// claimRead: the Claim (rename, read, delete) returned and the consumer
// answers; the receive succeeded.
func claimRead(w *world.World, ev world.Event) {
	t := world.RecvTimerOf(ev)
	c := w.Cons[t.Consumer]
	if !c.Up || c.Inc != t.Inc {
		return // crashed in between: the claimed file is an orphan for the next incarnation
	}
	r := c.Recvs[t.Recv]
	world.Must(c.Receives.Succeeded(r.Key))
	consumeMedia(w, c, r)
	delete(c.Recvs, r.Num)
	w.Send(world.MsgReply, world.ConsumeReply{Client: int32(r.H), Consumer: t.Consumer, Rpc: r.Rpc, Entry: r.Entry, Result: world.ResOK}.Event())
}

// requestTransfer: register a buffer, then Requested BEFORE sending
// TransferEncoderCache; the consumer's own deadline bounds the wait (C-4).
func requestTransfer(w *world.World, c *world.ConsumerNode, r *world.Recv, reply world.ConsumeReply) {
	buf := -1
	for i := range c.Bufs {
		if c.Bufs[i].Owner == 0 && !c.Bufs[i].Quarantined {
			buf = i
			break
		}
	}
	if buf < 0 {
		world.Must(c.Receives.Rejected(r.Key))
		delete(c.Recvs, r.Num)
		reply.Result = world.ResExhausted
		if w.Tracing {
			w.Notef("L-5 no free receive buffer")
		}
		w.Send(world.MsgReply, reply.Event())
		return
	}
	c.Bufs[buf].Owner = r.Num
	r.Buf = buf
	reg, err := c.Agent.RegisterMemory(w.OneRegion(c.Bufs[buf].Mem))
	world.Must(err)
	c.Bufs[buf].Reg = reg
	rq := &w.Xreqs[r.Num-1]
	rq.Buf, rq.Md, rq.Targets, rq.Carrier = buf, c.Md, reg.Descriptors, ctrlConnFor(w, c)
	world.Must(c.Receives.Registered(r.Key))
	world.Must(c.Receives.Requested(r.Key))
	if w.Tracing {
		w.Notef("registered buffer %d for %s; TransferEncoderCache sent", buf, r.Key)
	}
	if !w.DirectRequest(r) {
		w.Send(world.MsgRequest, world.TransferRequest{Consumer: int32(c.Idx), Recv: r.Num, Entry: r.Entry}.Event())
	}
	w.After(w.Set.ConsumerTimeoutMs, world.RecvTimer{Consumer: int32(c.Idx), Recv: r.Num, Inc: c.Inc}.Event(world.EvTransferTimeout))
}

// transferReply: the producer's answer. A receive already ended (duplicate
// or late reply, or a past incarnation's) is ignored.
func transferReply(w *world.World, ev world.Event) {
	if w.DirectReply(&ev) {
		return
	}
	rep := world.TransferReplyOf(ev)
	c := w.Cons[rep.Consumer]
	rq := w.Xreqs[rep.Recv-1]
	r, ok := c.Recvs[rep.Recv]
	if !c.Up || c.Inc != rq.Inc || !ok {
		if w.Tracing {
			w.Notef("reply %s for %s ignored: receive already ended", world.ResNames[rep.Result], rq.Key)
		}
		return
	}
	if rep.Result == world.ResOK {
		b := &c.Bufs[r.Buf]
		if string(b.Mem) != r.Entry || b.Owner != r.Num {
			w.Failf(world.Correctness, "Q-4", "receive %s succeeded but its buffer %d holds %q owned by receive %d", r.Key, r.Buf, b.Mem, b.Owner)
		}
	}
	transferEnded(w, c, r, world.ProducerAnswered(rep.Result), rep.Result)
}

// transferEnded: handoff.EndTransfer decides how the receive ends on the
// producer's answer (or cause: causeDeadline) and the driver carries it
// out: release the buffer (success, a definite rejection, Q-2) or
// quarantine it with health NOT_READY. The simulator sends no
// request over a refused connection (a stopped producer answers
// UNAVAILABLE without the trailer), so nothing is ever unsent here.
func transferEnded(w *world.World, c *world.ConsumerNode, r *world.Recv, why string, cause int64) {
	d, err := c.Receives.EndTransfer(handoff.TransferEnded{
		ReceiveID:       r.Key,
		StatusOK:        cause == world.ResOK,
		Complete:        cause == world.ResOK, // the world's WRITE faults land every byte or none (transport.go)
		BeforeWrite:     cause == world.ResBeforeWrite || cause == world.ResUnavailableBeforeWrite,
		InvalidArgument: cause == world.ResPlainInvalid,
		Reason:          w.Concat("Q-1 receive ", r.Key, " quarantined: ", why), // every transfer ends here: no fmt, no allocation of its own
	}, w.Decisions)
	world.Must(err)
	switch {
	case d.Buffers == handoff.QuarantineBuffers:
		quarantineReceive(w, c, r, d, why, cause)
	case d.Reply == handoff.ReplyData:
		consumeMedia(w, c, r)
		endReceive(w, c, r, world.ResOK, cause)
	case cause == world.ResBeforeWrite || cause == world.ResPlainInvalid:
		endReceive(w, c, r, world.ResSpent, cause) // the producer's rejection, relayed
	case cause == world.ResUnavailableBeforeWrite:
		endReceive(w, c, r, world.ResUnavailable, cause) // the producer refused for its health: retryable
	default:
		endReceive(w, c, r, world.ResUnavailable, cause)
	}
}

// consumerCancelled: the client of call (h, rpc) cancelled it (the stream's
// RST reaches the consumer at once). handoff.ClientCancelled decides: a
// transfer in flight keeps its buffers until its outcome is known (C-4);
// the C-4 mutant's switch ends it now. handoff.CancelReachesCall decides
// whether the cancel reaches the transfer call (never; the SE-4 mutant's
// switch cancels it, and its outcome is uncertain: CauseCancelled).
func consumerCancelled(w *world.World, c *world.ConsumerNode, h int32, rpc int64) {
	if !c.Up {
		return
	}
	for _, r := range c.Recvs {
		if int32(r.H) != h || r.Rpc != rpc || r.Buf < 0 {
			continue
		}
		w.Reach(world.StCancelMidTransfer)
		_, ended, err := c.Receives.ClientCancelled(r.Key, w.Decisions) // handoff decides (C-4)
		world.Must(err)
		switch {
		case ended: // the C-4 mutant
			endReceive(w, c, r, world.ResCancelled, world.CauseCancelled)
		case handoff.CancelReachesCall(w.Decisions): // the SE-4 mutant: the call ends CANCELLED, uncertain
			transferEnded(w, c, r, "the client's cancel cancelled the call", world.CauseCancelled)
		}
		return // otherwise the receive waits for the transfer's outcome (C-4)
	}
}

// transferTimeout: the consumer's deadline passed with the outcome unknown.
func transferTimeout(w *world.World, ev world.Event) {
	t := world.RecvTimerOf(ev)
	c := w.Cons[t.Consumer]
	r, ok := c.Recvs[t.Recv]
	if !c.Up || c.Inc != t.Inc || !ok {
		return
	}
	transferEnded(w, c, r, "deadline passed", world.CauseDeadline)
}

// quarantineReceive carries out a quarantine handoff.EndTransfer decided
// the buffer's registration is revoked with the consumer's xfer
// agent (every later WRITE to it is refused; one it accepted before may
// still land, and the revocation's done channel closes once none can: the
// Q-6 proof, with the connection that carried the request closed, which
// the consumer retires here as the core decides, d.RetireCarriers), the buffer is
// kept until that proof ends the quarantine (endProvedQuarantines),
// health NOT_READY, the client answered UNAVAILABLE.
func quarantineReceive(w *world.World, c *world.ConsumerNode, r *world.Recv, d handoff.ReceiveDecision, why string, cause int64) {
	w.RecvEnds = append(w.RecvEnds, world.RecvEnd{Key: r.Key, Cause: cause})
	b := &c.Bufs[r.Buf]
	b.Quarantined = true
	c.Entered++
	done, err := c.Agent.Revoke(b.Reg)
	world.Must(err)
	b.Reg = nil
	w.Xreqs[r.Num-1].Revoked = true
	if !d.NoProof { // nothing proves a NoProof quarantine over: kept for the incarnation
		b.Revoked, b.Carrier = done, w.Xreqs[r.Num-1].Carrier
		w.Xf.ProofWaits++
	}
	if d.RetireCarriers { // the core decides (the KeepCarrierOpen mutant keeps it open)
		retireCarrier(w, w.Xreqs[r.Num-1].Carrier) // closed with its last use: the carrier's closing is the consumer's to bring about
	}
	c.Health.Fail(d.Health.Check, d.Health.Reason)
	delete(c.Recvs, r.Num)
	if w.Tracing {
		w.Notef("Q-1 %s uncertain (%s): buffer %d quarantined", r.Key, why, r.Buf)
		select {
		case <-done:
		default:
			w.Notef("its revocation waits for a WRITE in flight")
		}
	}
	w.Send(world.MsgReply, world.ConsumeReply{Client: int32(r.H), Consumer: int32(c.Idx), Rpc: r.Rpc, Entry: r.Entry, Result: world.ResUnavailable}.Event())
}

// endReceive frees a receive's buffer (its outcome is known) and answers the client.
// cause is the producer's answer (or causeDeadline, causeCancelled) it ended on.
func endReceive(w *world.World, c *world.ConsumerNode, r *world.Recv, res, cause int64) {
	w.RecvEnds = append(w.RecvEnds, world.RecvEnd{Key: r.Key, Cause: cause, Freed: true})
	b := &c.Bufs[r.Buf]
	if err := c.Agent.Deregister(b.Reg); err != nil {
		// A WRITE the agent accepted may still land (only a broken
		// decision frees the buffer then): a failed cleanup, as the
		// engine's driver reports it (engine/consumer Release:
		// Env.FailCleanup, X-1, handoff decides); then revoke, and reuse
		// the buffer early.
		c.Health.CleanupFailed("deregister receive buffers: "+err.Error(), w.Decisions)
		_, err = c.Agent.Revoke(b.Reg)
		world.Must(err)
	}
	b.Reg = nil
	b.Owner = 0
	delete(c.Recvs, r.Num)
	if w.Tracing {
		w.Notef("%s ended %s; buffer %d freed", r.Key, world.ResNames[res], r.Buf)
	}
	w.Send(world.MsgReply, world.ConsumeReply{Client: int32(r.H), Consumer: int32(c.Idx), Rpc: r.Rpc, Entry: r.Entry, Result: res}.Event())
}
