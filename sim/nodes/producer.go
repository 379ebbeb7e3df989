package nodes

import (
	"errors"
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/xfer"
	"github.com/baton-dev/baton/sim/world"
)

// E's request handling: publishes (L-5, C-1, C-6, C-7), releases (SU-3,
// X-1), removals and their start, the transfer backend's producer side
// and the consume a wrong-role probe sends to E (L-4); and E's
// look at which entries were claimed (shared directory) and its stop at
// the end of its drain (S-2, S-4). The producer's state
// (World.Prod: its table, health and quarantines) stays in package world;
// these are its handlers, installed in Behaviour's table.

// publishArrive: E's Generate(encoder.publish): admit, Reserve (L-5) BEFORE
// anything is written, then the encoder step.
func publishArrive(w *world.World, ev world.Event) {
	call := world.ClientCallOf(ev)
	p := w.Prod
	reply := world.CallReply{Client: call.Client, Rpc: call.Rpc}
	if p.Stopped {
		reply.Result = world.ResUnavailable
		w.Send(world.MsgReply, reply.Event(world.EvPublishFailArrive))
		return
	}
	if err := p.Health.Admit(); err != nil {
		reply.Result = world.ResOf(err)
		if w.Tracing {
			w.Notef("admit: %v", err)
		}
		w.Send(world.MsgReply, reply.Event(world.EvPublishFailArrive))
		return
	}
	cl := w.Clients[call.Client]
	if why := modalityError(w, &cl.Plan.Media); why != "" {
		reply.Result = world.ResUnimplemented // L-3: before execution, nothing reserved
		if w.Tracing {
			w.Notef("%s", why)
		}
		w.Send(world.MsgReply, reply.Event(world.EvPublishFailArrive))
		return
	}
	id := w.NewEntryID()
	if w.Decisions.EntryIDFromContent {
		id = handoff.EntryID(id, fmt.Sprint(cl.Plan.Content), w.Decisions) // the SU-6 mutant's id
	}
	if err := p.Table.Reserve(id, cl.Plan.PayloadBytes); err != nil {
		reply.Result = world.ResOf(err)
		if w.Tracing {
			w.Notef("reserve: %v", err)
		}
		w.Send(world.MsgReply, reply.Event(world.EvPublishFailArrive))
		return
	}
	p.Publishing++
	w.Ledger.Add(id, int(call.Client), cl.Plan.PayloadBytes).Instance = p.InstanceID
	d := world.Between(w.WorkRNG, 1, w.Set.EncodeMsMax)
	if w.Faults.Buggify(world.SiteEncoderLate) {
		d += world.Between(w.WorkRNG, 1, w.Set.LongDelayMaxMs)
	}
	if w.Tracing {
		w.Notef("reserved %s (%d bytes)", world.Short(id), cl.Plan.PayloadBytes)
	}
	w.After(d, world.EncodeDone{Client: call.Client, Rpc: call.Rpc, Entry: id}.Event())
}

// encodeDone: the encoder step ended. Cancelled or failed before publication
// -> AbandonPublish (C-1, C-6); otherwise write the storage, CommitPublish,
// then send EncoderReady; a failed send releases the entry (C-7).
func encodeDone(w *world.World, ev world.Event) {
	e := world.EncodeDoneOf(ev)
	p := w.Prod
	id := e.Entry
	rec := w.Ledger.Get(id)
	cl := w.Clients[e.Client]
	pubMs := publishMs(w, ev) // the clock reading before the write (sim/nodes/fsync.go)
	p.Publishing--
	abandon := func(res int64, rule, why string) {
		w.Ledger.Unpublished = append(w.Ledger.Unpublished, world.Unpublished{Rec: rec, Rule: rule, Why: why})
		abandoned := true
		if rule == "C-6" {
			abandoned = p.Table.EncoderFailed(id, w.Decisions) // the C-6 mutant keeps it
		} else {
			p.Table.AbandonPublish(id)
		}
		if !abandoned {
			if w.Tracing {
				w.Notef("encoder failed; %s keeps its reservation", world.Short(id))
			}
		} else {
			rec.Abandoned = true
			w.Ledger.Touch(rec)
			if w.Tracing {
				w.Notef("abandoned %s: %s", world.Short(id), why)
			}
		}
		if res != 0 {
			w.Send(world.MsgReply, world.CallReply{Client: e.Client, Rpc: e.Rpc, Result: res}.Event(world.EvPublishFailArrive))
		}
	}
	if fsyncWritten(w, ev) {
		goto committed // a slow write's fsync returned and it is renamed into place (sim/nodes/fsync.go)
	}
	switch {
	case w.Faults.Buggify(world.SiteEncoderFail):
		abandon(world.ResInternal, "C-6", "encoder failed")
		return
	case cl.StreamCancelled(e.Rpc) && handoff.DecidePublishStep(handoff.CancelledDuringStep, w.Decisions) == handoff.PublishAbandon:
		// The step completed after its client cancelled: the core decides
		// (C-1, C-2; the C-2 mutant writes it).
		abandon(0, "C-1", "cancelled before publication")
		return
	case p.Health.Draining():
		abandon(world.ResUnavailable, "S-2", "draining")
		return
	case w.Faults.Buggify(world.SiteENOSPC):
		if w.Set.Backend == world.BackendSharedDir {
			w.Sd.WriteENOSPC(rec) // the real Dir.Write, its write failing with ENOSPC
		}
		abandon(world.ResInternal, "L-5", "ENOSPC writing the entry")
		return
	}
	if w.Set.Backend == world.BackendSharedDir {
		if slowFsync(w, ev) {
			return // the fsync returns later (sim/nodes/fsync.go)
		}
		w.Sd.Publish(rec)
	} else {
		registerSource(w, id) // with E's xfer agent (transport.go)
	}
committed:
	publishMedia(w, rec, &cl.Plan.Media)
	ttl := p.Table.TTL(cl.Plan.TTLMs)
	if err := p.Table.CommitPublish(id, pubMs+ttl); err != nil {
		panic(err)
	}
	rec.Published = true
	w.Ledger.Publications++ // X-2's skip (sim/checks/check_answers.go)
	w.Ledger.Touch(rec)
	rec.ExpiresMs = pubMs + ttl
	rec.CommittedMs = w.Now
	cancelled := cl.StreamCancelled(e.Rpc)
	if cancelled {
		rec.CancelledBeforeReady = true // C-2: the late completion of a cancelled publish
		w.Ledger.Cancelled = append(w.Ledger.Cancelled, rec)
	}
	// The EncoderReady send: a fault may fail it on a live stream. The
	// core decides the entry's end (C-7; the C-2 mutant answers a
	// cancelled stream, the C-3 mutant keeps what never reached its client).
	sent := handoff.ReadySent{Cancelled: cancelled}
	if !cancelled {
		sent.SendFailed = w.Faults.Buggify(world.SiteSendFails)
	}
	if act := handoff.DecideReadySent(sent, w.Decisions); act != handoff.PublishAnswered {
		rec.ReadyUndelivered = true
		if !rec.CancelledBeforeReady {
			w.Ledger.Cancelled = append(w.Ledger.Cancelled, rec)
		}
		if act == handoff.PublishKeep {
			if w.Tracing {
				w.Notef("EncoderReady send failed; %s kept", world.Short(id))
			}
			return
		}
		if w.Tracing {
			w.Notef("C-7 EncoderReady send failed; releasing %s", world.Short(id))
		}
		producerRelease(w, id, -1, 0)
		return
	}
	if w.Tracing {
		w.Notef("published %s ttl %d", world.Short(id), ttl)
	}
	w.Send(world.MsgReply, world.ReadyReply{Client: e.Client, Rpc: e.Rpc, Entry: id, ExpiresMs: rec.ExpiresMs}.Event())
}

// releaseArrive: Abort(encoder_cache=ref) on E (SU-3).
func releaseArrive(w *world.World, ev world.Event) {
	rq := world.ReleaseRequestOf(ev)
	if w.Prod.Stopped {
		w.Send(world.MsgReply, world.CallReply{Client: rq.Client, Rpc: rq.Rpc, Result: world.ResUnavailable}.Event(world.EvReleaseReplyArrive))
		return
	}
	observeClaims(w) // the producer looks before it answers (CONTRACT: collection, GetLoad, Abort)
	if rec, ok := w.Ledger.Entries[rq.Entry]; ok {
		// SU-3: an expired entry is ALREADY_FINISHED, and is collected now:
		// the core's ProducerTable.ExpireBeforeRelease decides, before its
		// Release (the engine's Abort(encoder_cache) calls it too). Found
		// by the history check: the driver answered ABORTED for an entry a
		// consumer had already rejected as expired.
		for _, id := range w.Prod.Table.ExpireBeforeRelease(rec.ExpiresMs, w.Now) {
			startRemoval(w, id, handoff.CauseExpiry, -1, 0)
		}
	}
	producerRelease(w, rq.Entry, int(rq.Client), rq.Rpc)
}

// producerRelease decides a release; h < 0 means nobody waits for the answer (C-7).
func producerRelease(w *world.World, id string, h int, rpc int64) {
	switch w.Prod.Table.Release(id) {
	case handoff.ReleaseRemove:
		startRemoval(w, id, handoff.CauseRelease, h, rpc)
	case handoff.ReleaseWait:
		// Its removal is in flight: a consumer may still win the claim, or
		// the removal may fail; the answer waits for the outcome
		// (seeds 576264, 954255). Nobody waits for an internal one (h < 0):
		// the removal in flight ends the entry.
		if w.Tracing {
			w.Notef("release %s waits for its removal in flight", world.Short(id))
		}
		if h >= 0 {
			p := w.Prod
			if p.ReleaseWaits == nil {
				p.ReleaseWaits = map[string][]world.ReleaseWaiter{}
			}
			p.ReleaseWaits[id] = append(p.ReleaseWaits[id], world.ReleaseWaiter{H: h, Rpc: rpc})
		}
	case handoff.ReleaseCleanupFailed:
		if w.Tracing {
			w.Notef("release %s: UNAVAILABLE (X-1 its removal failed)", world.Short(id))
		}
		if h >= 0 {
			w.Send(world.MsgReply, world.CallReply{Client: int32(h), Rpc: rpc, Result: world.ResUnavailable}.Event(world.EvReleaseReplyArrive))
		}
	default:
		if w.Tracing {
			w.Notef("release %s: ALREADY_FINISHED", world.Short(id))
		}
		if h >= 0 {
			releaseReply(w, int32(h), rpc, id, world.ResAlreadyFinished)
		}
	}
}

// releaseReply answers an Abort(encoder_cache) call with the status the
// producer decided (the SU-3 mutant turns every ALREADY_FINISHED into
// ABORTED); the ledger counts the ABORTED answers given.
func releaseReply(w *world.World, h int32, rpc int64, id string, res int64) {
	if res == world.ResAlreadyFinished && handoff.AnswerRelease(handoff.ReleaseAlreadyFinished, w.Decisions) == handoff.ReleaseAborted {
		res = world.ResAborted // the SU-3 mutant (handoff.Mutants.ReleaseAlwaysAborted)
	}
	if res == world.ResAborted {
		rec := w.Ledger.Get(id)
		rec.Aborted++
		w.Ledger.Touch(rec)
	}
	w.Send(world.MsgReply, world.CallReply{Client: h, Rpc: rpc, Result: res}.Event(world.EvReleaseReplyArrive))
}

// removeDone: the removal syscall returned; report it with RemovalDone (or
// RemovalFailed + health NOT_READY on an I/O error, X-1).
func removeDone(w *world.World, ev world.Event) {
	rd := world.RemoveDoneOf(ev)
	p := w.Prod
	id := rd.Entry
	cause := rd.Cause
	rec := w.Ledger.Get(id)
	p.Cleanups--
	reply := func(res int64) {
		if cause == handoff.CauseRelease && rd.Client >= 0 {
			if res == world.ResUnavailable {
				w.Send(world.MsgReply, world.CallReply{Client: rd.Client, Rpc: rd.Rpc, Result: res}.Event(world.EvReleaseReplyArrive))
				return
			}
			releaseReply(w, rd.Client, rd.Rpc, id, res)
		}
	}
	early, landedEarly := w.Sd.TakeEarly(id) // removed inside a consumer's Claim (shared_disk.go)
	if !landedEarly && w.Faults.Buggify(world.SiteRemoveError) {
		if w.Set.Backend == world.BackendSharedDir {
			w.Sd.Remove(id, true) // the real Dir.Remove, its rename failing with EIO: ErrCleanup, the entry stays
		}
		p.Table.RemovalFailed(id)
		p.Health.CleanupFailed(fmt.Sprintf("X-1 remove entry %s: I/O error", world.Short(id)), w.Decisions) // handoff decides
		rec.RemoveFailed = true
		w.Ledger.RemoveFailures++
		if p.Health.Draining() {
			w.Reach(world.StCleanupFailureInDrain)
		}
		if w.Tracing {
			w.Notef("X-1 removal of %s failed", world.Short(id))
		}
		reply(world.ResUnavailable)
		decideWaitingReleases(w, id)
		return
	}
	won := false
	if landedEarly {
		won = early
	} else if w.Set.Backend == world.BackendSharedDir {
		won = w.Sd.Remove(id, false)
	} else if w.Sources[id] == world.SourceLive {
		w.FreeSource(id)
		won = true
	}
	if won {
		rec.RemovedCause = world.CauseNames[cause]
		w.Ledger.Touch(rec)
	}
	out := p.Table.RemovalDone(id, won)
	if w.Tracing {
		w.Notef("removal of %s won=%v -> %v", world.Short(id), won, out)
	}
	switch out {
	case handoff.ReleaseAborted:
		reply(world.ResAborted)
	default:
		reply(world.ResAlreadyFinished)
	}
	decideWaitingReleases(w, id)
}

// decideWaitingReleases: the removal of id ended; every release that
// waited for it is decided again (ALREADY_FINISHED, or UNAVAILABLE after
// a failed removal, X-1).
func decideWaitingReleases(w *world.World, id string) {
	p := w.Prod
	waits := p.ReleaseWaits[id]
	if len(waits) == 0 {
		return
	}
	delete(p.ReleaseWaits, id)
	for _, r := range waits {
		producerRelease(w, id, r.H, r.Rpc)
	}
}

// transferArrive: TransferEncoderCache on E: rejections up to the claim are
// before-write; ClaimForTransfer takes the entry out of the table
// BEFORE the WRITE is posted.
func transferArrive(w *world.World, ev world.Event) {
	tr := world.TransferRequestOf(ev)
	p := w.Prod
	rq := &w.Xreqs[tr.Recv-1]
	w.DirectArrive(tr.Recv)
	reply := world.TransferReply{Consumer: int32(rq.C), Recv: tr.Recv, Result: world.ResBeforeWrite}
	if p.Stopped {
		reply.Result = world.ResUnavailable // connection refused: no trailer, so uncertain for the consumer
		w.Send(world.MsgReply, reply.Event())
		return
	}
	rec := w.Ledger.Get(rq.Entry)
	err := producerCheckRef(w, rec, rq.Form)
	if errors.Is(err, handoff.ErrSpentReference) {
		w.Reach(world.StClaimRacesExpiry)
		for _, id := range p.Table.Expire(w.Now) {
			startRemoval(w, id, handoff.CauseExpiry, -1, 0)
		}
		if w.Tracing {
			w.Notef("SU-2 %s expired: before-write", world.Short(rq.Entry))
		}
		w.Send(world.MsgReply, reply.Event())
		return
	}
	if err != nil {
		reply.Result = beforeWriteAnswer(err)
		if w.Tracing {
			w.Notef("%v: before-write", err)
		}
		w.Send(world.MsgReply, reply.Event())
		return
	}
	// The consumer's agent metadata and descriptors, checked before the
	// claim as the engine's producer does (xfer.ParseMetadata, whose
	// check alone is xfer.CheckMetadata, and xfer.CheckRemote): a bad one
	// is a definite pre-write rejection.
	if err := xfer.CheckMetadata(rq.Md); err != nil {
		reply.Result = world.ResBeforeWrite
		w.Send(world.MsgReply, reply.Event())
		return
	}
	if err := xfer.CheckRemote(rq.Targets); err != nil {
		reply.Result = world.ResBeforeWrite
		w.Send(world.MsgReply, reply.Event())
		return
	}
	if err := p.Table.ClaimForTransfer(rq.Entry); err != nil {
		reply.Result = beforeWriteAnswer(err)
		if w.Tracing {
			w.Notef("claim: %v: before-write", err)
		}
		w.Send(world.MsgReply, reply.Event())
		return
	}
	// ---- the entry is out of the table: from here a failure quarantines (Q-3) ----
	rq.Claimed = true
	if w.Sources[rq.Entry] != world.SourceLive {
		panic(fmt.Sprintf("sim: transfer source of %s is %d", rq.Entry, w.Sources[rq.Entry]))
	}
	wr := w.NewWrite(world.Write{Num: int64(len(w.Writes) + 1), Entry: rq.Entry, Recv: tr.Recv, C: rq.C, Inc: rq.Inc, Buf: rq.Buf})
	var fault xfer.Fault // SiteWriteError: the WRITE fails before a byte lands, or lands and loses its acknowledgement
	if w.Faults.Buggify(world.SiteWriteError) {
		fault.Kind = xfer.FaultFailAfter
		if w.NetRNG.IntN(2) == 0 {
			fault.Kind = xfer.FaultLoseAck
		}
	}
	w.Writes = append(w.Writes, wr)
	world.Must(postWrite(w, wr, rq, fault)) // CreateWriteTo + Post on E's agent (transport.go)
	d := world.Between(w.NetRNG, 1, w.Set.WriteMsMax)
	if w.Faults.Buggify(world.SiteSlowWrite) {
		d += world.Between(w.NetRNG, 1, w.Set.LongDelayMaxMs)
	}
	if w.Tracing {
		w.Notef("WRITE #%d of %s posted, lands in %d", wr.Num, world.Short(rq.Entry), d)
	}
	w.After(d, world.WriteStep{Write: wr.Num}.Event(world.EvWriteLand))
	w.After(w.Set.ProducerTimeoutMs, world.WriteStep{Write: wr.Num}.Event(world.EvWriteDeadline))
}

// beforeWriteAnswer is the producer's answer to a rejection made before the
// claim: handoff.BeforeWrite decides whether it carries the before-write
// trailer; one that does not is UNAVAILABLE without it, an uncertain
// outcome for the consumer.
func beforeWriteAnswer(err error) int64 {
	if handoff.BeforeWrite(err) {
		if _, code := handoff.Classify(err); code == handoff.CodeUnavailable {
			return world.ResUnavailableBeforeWrite
		}
		return world.ResBeforeWrite
	}
	return world.ResUnavailable
}

// writeLand: the WRITE's bytes reach the consumer (xfer's Deliver): they
// land in its registered buffer, or the WRITE fails (the injected fault,
// the consumer's agent refused it or is gone with its process).
func writeLand(w *world.World, ev world.Event) {
	wr := w.Writes[world.WriteStepOf(ev).Write-1]
	err := deliverWrite(w, wr, false)
	c := w.Cons[wr.C]
	switch {
	case !wr.Landed && (!c.Up || c.Inc != wr.Inc):
		if w.Tracing {
			w.Notef("WRITE #%d failed: PD%d incarnation %d is gone", wr.Num, wr.C, wr.Inc)
		}
	case !wr.Landed:
		if w.Tracing {
			w.Notef("WRITE #%d failed before landing: %v", wr.Num, err)
		}
	case !c.Up || c.Inc != wr.Inc:
		w.Failf(world.Correctness, "Q-1", "WRITE #%d of %s landed in PD%d incarnation %d, whose agent was closed", wr.Num, world.Short(wr.Entry), wr.C, wr.Inc)
	default:
		if _, open := c.Recvs[wr.Recv]; !open {
			w.Reach(world.StWriteLandedAfterGiveUp)
		}
		b := &c.Bufs[wr.Buf]
		w.CheckLanding(wr, b)
		if string(b.Mem) != wr.Entry {
			w.Failf(world.Correctness, "Q-4", "xfer reported WRITE #%d of %s landed, but PD%d buffer %d holds %q", wr.Num, world.Short(wr.Entry), wr.C, wr.Buf, b.Mem)
		}
		rq := &w.Xreqs[wr.Recv-1]
		took(w, w.Ledger.Get(wr.Entry), rq.Key, int32(rq.H), rq.Rpc, rq.Form)
		if w.Tracing {
			w.Notef("WRITE #%d of %s landed in PD%d buffer %d", wr.Num, world.Short(wr.Entry), wr.C, wr.Buf)
		}
	}
	w.After(1, world.WriteStep{Write: wr.Num}.Event(world.EvWriteComplete))
}

// writeComplete: the producer learns the WRITE's status (xfer's Complete,
// then Status and Release): TransferDone and deregister the source, or
// fail the transfer.
func writeComplete(w *world.World, ev world.Event) {
	wr := w.Writes[world.WriteStepOf(ev).Write-1]
	if wr.Orphan {
		return // its producer process crashed: the agent's Close ended it
	}
	err := completeWrite(w, wr)
	writeEndedProof(w, wr) // ends its source's quarantine, if any
	if wr.ProducerDone || w.Prod.Stopped {
		return
	}
	wr.ProducerDone = true
	reply := world.TransferReply{Consumer: int32(wr.C), Recv: wr.Recv}
	if err != nil {
		reply.Result = failTransfer(w, wr, "WRITE failed")
	} else {
		if err := w.Prod.Table.TransferDone(wr.Entry); err != nil {
			panic(err)
		}
		w.FreeSource(wr.Entry)
		reply.Result = world.ResOK
		if w.Tracing {
			w.Notef("transfer of %s done", world.Short(wr.Entry))
		}
	}
	w.Send(world.MsgReply, reply.Event())
}

// writeDeadline: the producer's own deadline on its WRITE passed: the WRITE
// may still land, so the source is quarantined, never freed.
func writeDeadline(w *world.World, ev world.Event) {
	wr := w.Writes[world.WriteStepOf(ev).Write-1]
	if wr.ProducerDone || w.Prod.Stopped {
		return
	}
	wr.ProducerDone = true
	res := failTransfer(w, wr, "deadline passed")
	w.Send(world.MsgReply, world.TransferReply{Consumer: int32(wr.C), Recv: wr.Recv, Result: res}.Event())
}

// failTransfer: handoff.FailTransfer decides from what
// E's transport explains, as the engine's failTransfer: the WRITE request
// ended and was released (WriteEnded: its Complete reported the failure)
// or is still in flight (the producer's deadline passed first), and the
// xfer agent can prove its end (Provable: the simulator injects no failure
// the transport cannot explain). The core frees the source of an ended
// WRITE; otherwise it quarantines the source until the WRITE ends, with
// health NOT_READY (writeEndedProof ends it); the answer is UNAVAILABLE
// (never INVALID_ARGUMENT: the WRITE may have landed). The driver carries
// it out and returns the answer. The core's mutant switches free the
// source (producer-frees-source-on-failure) or answer a plain
// INVALID_ARGUMENT (invalid-argument-after-removal).
func failTransfer(w *world.World, wr *world.Write, why string) int64 {
	d, err := w.Prod.Table.FailTransfer(handoff.TransferFailure{
		EntryID:    wr.Entry,
		HasSource:  true,
		WriteEnded: wr.Released,
		Provable:   true, // E's xfer request tells when it ended (Complete, Release)
		Reason:     fmt.Sprintf("Q-3 source of entry %s quarantined after a failed WRITE: %s", world.Short(wr.Entry), why),
	}, w.Decisions)
	world.Must(err)
	w.Ledger.Get(wr.Entry).Quarantined = true
	if d.Source == handoff.FreeSource {
		w.FreeSource(wr.Entry)
	} else {
		w.Sources[wr.Entry] = world.SourceQuarantined
	}
	if d.Health != nil {
		w.Prod.Health.Fail(d.Health.Check, d.Health.Reason)
		quarantineSource(w, wr) // until the WRITE ends; the mutant's early free keeps Health NOT_READY as long
	}
	if w.Tracing {
		w.Notef("Q-3 transfer of %s failed (%s); source %s", world.Short(wr.Entry), why, map[bool]string{true: "freed", false: "quarantined"}[d.Source == handoff.FreeSource])
	}
	if d.Code == handoff.CodeInvalidArgument {
		return world.ResPlainInvalid
	}
	return world.ResUnavailable
}

// producerConsume: a consume sent to E, which does not serve it: L-4
// decides first, FAILED_PRECONDITION. The L-4 mutant serves it from its
// own store (a read of its own file, or a local copy of the source) and
// answers OK. While E is down the call never arrives (staleProducerEvent:
// connection refused), so only a live process serves it.
func producerConsume(w *world.World, ev world.Event) {
	p := w.Prod
	if p.Stopped {
		return // no process: the client's deadline ends the call
	}
	rq := world.ConsumeRequestOf(ev)
	reply := world.ConsumeReply{Client: rq.Client, Consumer: -1, Rpc: rq.Rpc, Entry: rq.Entry}
	if err := handoff.AdmitRole(fmt.Errorf("%w: L-4 only a consumer consumes an encoder output", handoff.ErrWrongRole), w.Decisions); err != nil {
		reply.Result = world.ResOf(err)
		w.Ledger.RejectCall(world.CallKey{H: rq.Client, Rpc: rq.Rpc}, reply.Result)
		w.Send(world.MsgReply, reply.Event())
		return
	}
	rec := w.Ledger.Get(rq.Entry)
	reply.Result = world.ResSpent
	key := fmt.Sprintf("E/%d/%d", rq.Client, rq.Rpc)
	if w.Set.Backend == world.BackendSharedDir {
		if w.Sd.Claim(w.Sd.Prod, -1, rec, false) == world.ClaimWon {
			took(w, rec, key, rq.Client, rq.Rpc, rq.Form)
			reply.Result = world.ResOK
		}
	} else if w.Now < rec.ExpiresMs && p.Table.ClaimForTransfer(rec.Id) == nil {
		world.Must(p.Table.TransferDone(rec.Id))
		w.FreeSource(rec.Id)
		took(w, rec, key, rq.Client, rq.Rpc, rq.Form)
		reply.Result = world.ResOK
	}
	if w.Tracing {
		w.Notef("E served a consume of %s: %s", world.Short(rec.Id), world.ResNames[reply.Result])
	}
	w.Send(world.MsgReply, reply.Event())
}

// publishMs is the tick the publish took its clock reading: before the
// write (the first encodeDone, or the start of a slow write; sim/nodes'
// fsync.go).
func publishMs(w *world.World, ev world.Event) int64 {
	if e := world.EncodeDoneOf(ev); e.Resumed {
		return e.StartedMs
	}
	return w.Now
}

// startRemoval removes the storage of an entry the table moved to Removing;
// the removal may be slow, so a consumer's claim can race it.
func startRemoval(w *world.World, id string, cause handoff.RemovalCause, h int, rpc int64) {
	w.Prod.Cleanups++
	d := world.Between(w.DiskRNG, 0, 2)
	if w.Faults.Buggify(world.SiteSlowRemove) {
		d += world.Between(w.DiskRNG, 1, w.Set.LongDelayMaxMs)
	}
	w.After(d, world.RemoveDone{Client: int32(h), Rpc: rpc, Cause: cause, Entry: id}.Event())
}

// observeClaims: entries whose file is gone (shareddir's Dir.Exists, the
// engine store's look too) were claimed (shared directory): the core's
// ProducerTable.ObserveGone makes them CONSUMED.
func observeClaims(w *world.World) {
	if w.Set.Backend != world.BackendSharedDir {
		return
	}
	ids, ver := w.Prod.Published(), w.Prod.Table.Version()
	if w.Sd.LookUnchanged(ver, ids) {
		return // every entry present, as at the last look (see LookUnchanged)
	}
	// (ObserveGone changes the table, not the list: Published lists anew at the next call)
	all := true
	for _, id := range ids {
		if ok, err := w.Sd.Dir.Exists(id); err != nil {
			panic(fmt.Sprintf("sim: Exists(%s): %v", id, err))
		} else if !ok {
			all = false
			w.Prod.Table.ObserveGone(id)
			if w.Tracing {
				w.Notef("observed %s gone", world.Short(id))
			}
		}
	}
	if all {
		w.Sd.LookedAllPresent(ver)
	}
}

// stopProducer closes the store: S-4 says nothing is left in the cache
// directory; only files whose removal failed (X-1, reported) may remain for
// the close to take.
func stopProducer(w *world.World) {
	if err := world.CheckStopped(w); err != nil {
		w.Failf(world.Correctness, "S-2", "%s", err)
	}
	w.Sd.Stop()
	for id, st := range w.Sources {
		if st == world.SourceLive {
			if !w.Ledger.Get(id).RemoveFailed {
				w.Failf(world.Correctness, "S-4", "drained producer left the source of %s registered", world.Short(id))
			}
			w.FreeSource(id)
		}
	}
	w.Prod.Stopped = true
	if w.Tracing {
		w.Notef("producer stopped")
	}
}
