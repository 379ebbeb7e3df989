package world

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/xfer"
)

// producerNode is E: the core's ProducerTable and Health, driven in the
// real engine's order over a store: the real engine/cache/shareddir code on
// a simulated disk (shared_disk.go) or source buffers registered with its
// real engine/xfer agent on a simulated transport (transport.go);
// handoff.FailTransfer decides a transfer that failed past the claim
// and handoff's Health.CleanupFailed a failed removal.
type producerNode struct {
	InstanceID string
	// observed and vanishing are observeClaims' and collect's lists of the
	// table's Published ids, reused from pass to pass.
	observed, Vanishing []string
	// Checked is what checkCore last checked of the table.
	Checked CheckedCore
	// key is the instance's HMAC key for reference tags (SU-5), as kept in
	// the shared directory's 0600 key file.
	key    []byte
	Table  *handoff.ProducerTable
	Health *handoff.Health
	// Publishing counts publishes between Reserve and CommitPublish/AbandonPublish.
	Publishing int
	// Cleanups counts removals between the table's decision and RemovalDone.
	Cleanups int
	Stopped  bool
	// agent is the instance's transfer agent (the transfer backend only).
	agent xfer.Agent
	// Quarantines are the sources quarantined until their WRITE ends, by
	// entry, with that WRITE (quarantine.go; ): Health is NOT_READY
	// while one is held.
	Quarantines map[string]*Write
	// Qver counts the changes of quarantines (check_proof.go).
	Qver int
	// releaseWaits are the releases waiting, by entry, for a removal in
	// flight to end: the core's ProducerTable.Release answered
	// handoff.ReleaseWait, and each asks it again once RemovalDone or
	// RemovalFailed ended that removal (the engine's release waits on a
	// channel; the world on its event queue).
	releaseWaits map[string][]releaseWaiter
}

// releaseWaiter is a release call waiting for a removal in flight.
type releaseWaiter struct {
	h   int
	rpc int64
}

func NewProducerNode(w *World) *producerNode {
	p := &producerNode{
		InstanceID: w.NewInstanceID(),
		Table: handoff.NewProducerTable(handoff.ProducerConfig{
			QuotaBytes: w.Set.ProducerQuotaBytes, DefaultTTLMs: w.Set.DefaultTTLMs, MaxTTLMs: w.Set.MaxTTLMs,
		}),
		Health: handoff.NewHealth(),
	}
	p.key = []byte("baton-sim reference key\x00" + p.InstanceID)
	w.Sd.openProducer(p)
	if w.Set.Backend == BackendTransfer {
		p.agent = w.newAgent("E-"+p.InstanceID, false)
	}
	p.Health.Started()
	return p
}

// newEntryID draws 128 bits from the ids stream (SU-5 shape: 32 lowercase hex).
func (w *World) newEntryID() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(w.idRNG.Uint32())
	}
	var x [32]byte
	hex.Encode(x[:], b[:])
	return string(x[:]) // one allocation (EncodeToString makes two)
}

// NewInstanceID draws a lowercase UUID from the ids stream.
func (w *World) NewInstanceID() string {
	h := w.newEntryID()
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Codes carried in reply events (field b).
const (
	ResOK int64 = iota + 1
	resSpent
	ResUnavailable
	resExhausted
	resInternal
	ResAborted
	ResAlreadyFinished
	ResBeforeWrite
	resCancelled
	// Rejections of a presented reference (CONTRACT precedence L-4, L-1,
	// SU-4, N-1, SU-5): the gRPC code and the rule its message names.
	resTooLarge     // INVALID_ARGUMENT, L-1
	resMalformed    // INVALID_ARGUMENT, SU-4 (H-3)
	resForeign      // INVALID_ARGUMENT, SU-5
	resBackend      // FAILED_PRECONDITION, N-1
	resWrongRole    // FAILED_PRECONDITION, L-4
	ResPlainInvalid // INVALID_ARGUMENT without the before-write trailer (Q-2: uncertain)
	resUnimplemented
	// ResUnavailableBeforeWrite: UNAVAILABLE with the before-write trailer,
	// a producer that refused for its health (S-2, X-1, Q-4) before
	// looking at the reference: definite, relayed as UNAVAILABLE.
	ResUnavailableBeforeWrite
)

var ResNames = map[int64]string{ResOK: "OK", resSpent: "INVALID_ARGUMENT(SU-2)", ResUnavailable: "UNAVAILABLE",
	resExhausted: "RESOURCE_EXHAUSTED", resInternal: "INTERNAL", ResAborted: "ABORTED", ResAlreadyFinished: "ALREADY_FINISHED",
	ResBeforeWrite: "INVALID_ARGUMENT+before-write", resCancelled: "CANCELLED",
	resTooLarge: "INVALID_ARGUMENT(L-1)", resMalformed: "INVALID_ARGUMENT(SU-4)", resForeign: "INVALID_ARGUMENT(SU-5)",
	resBackend: "FAILED_PRECONDITION(N-1)", resWrongRole: "FAILED_PRECONDITION(L-4)", ResPlainInvalid: "INVALID_ARGUMENT(no trailer)", resUnimplemented: "UNIMPLEMENTED",
	ResUnavailableBeforeWrite: "UNAVAILABLE+before-write"}

// ResOf maps a core rejection to a reply code through handoff.Classify.
func ResOf(err error) int64 {
	rule, code := handoff.Classify(err)
	switch code {
	case handoff.CodeInvalidArgument:
		switch rule {
		case "L-1":
			return resTooLarge
		case "SU-4", "H-3":
			return resMalformed
		case "SU-5":
			return resForeign
		}
		return resSpent
	case handoff.CodeFailedPrecondition:
		if rule == "N-1" {
			return resBackend
		}
		return resWrongRole
	case handoff.CodeResourceExhausted:
		return resExhausted
	case handoff.CodeUnavailable:
		return ResUnavailable
	}
	return resInternal
}

// publishArrive: E's Generate(encoder.publish): admit, Reserve (L-5) BEFORE
// anything is written, then the encoder step.
func (w *World) publishArrive(ev Event) {
	call := ClientCallOf(ev)
	p := w.Prod
	reply := CallReply{Client: call.Client, Rpc: call.Rpc}
	if p.Stopped {
		reply.Result = ResUnavailable
		w.Send(MsgReply, reply.Event(EvPublishFailArrive))
		return
	}
	if err := p.Health.Admit(); err != nil {
		reply.Result = ResOf(err)
		if w.Tracing {
			w.Notef("admit: %v", err)
		}
		w.Send(MsgReply, reply.Event(EvPublishFailArrive))
		return
	}
	cl := w.Clients[call.Client]
	if why := w.modalityError(&cl.Plan.Media); why != "" {
		reply.Result = resUnimplemented // L-3: before execution, nothing reserved
		if w.Tracing {
			w.Notef("%s", why)
		}
		w.Send(MsgReply, reply.Event(EvPublishFailArrive))
		return
	}
	id := w.newEntryID()
	if w.Decisions.EntryIDFromContent {
		id = handoff.EntryID(id, fmt.Sprint(cl.Plan.content), w.Decisions) // the SU-6 mutant's id
	}
	if err := p.Table.Reserve(id, cl.Plan.payloadBytes); err != nil {
		reply.Result = ResOf(err)
		if w.Tracing {
			w.Notef("reserve: %v", err)
		}
		w.Send(MsgReply, reply.Event(EvPublishFailArrive))
		return
	}
	p.Publishing++
	w.Ledger.Add(id, int(call.Client), cl.Plan.payloadBytes).Instance = p.InstanceID
	d := Between(w.workRNG, 1, w.Set.EncodeMsMax)
	if w.Faults.Buggify(SiteEncoderLate) {
		d += Between(w.workRNG, 1, w.Set.LongDelayMaxMs)
	}
	if w.Tracing {
		w.Notef("reserved %s (%d bytes)", Short(id), cl.Plan.payloadBytes)
	}
	w.After(d, EncodeDone{Client: call.Client, Rpc: call.Rpc, Entry: id}.Event())
}

// encodeDone: the encoder step ended. Cancelled or failed before publication
// -> AbandonPublish (C-1, C-6); otherwise write the storage, CommitPublish,
// then send EncoderReady; a failed send releases the entry (C-7).
func (w *World) encodeDone(ev Event) {
	e := EncodeDoneOf(ev)
	p := w.Prod
	id := e.Entry
	rec := w.Ledger.Get(id)
	cl := w.Clients[e.Client]
	pubMs := w.publishMs(ev) // the clock reading before the write (sim/nodes/fsync.go)
	p.Publishing--
	abandon := func(res int64, rule, why string) {
		w.Ledger.Unpublished = append(w.Ledger.Unpublished, unpublished{Rec: rec, Rule: rule, Why: why})
		abandoned := true
		if rule == "C-6" {
			abandoned = p.Table.EncoderFailed(id, w.Decisions) // the C-6 mutant keeps it
		} else {
			p.Table.AbandonPublish(id)
		}
		if !abandoned {
			if w.Tracing {
				w.Notef("encoder failed; %s keeps its reservation", Short(id))
			}
		} else {
			rec.Abandoned = true
			if w.Tracing {
				w.Notef("abandoned %s: %s", Short(id), why)
			}
		}
		if res != 0 {
			w.Send(MsgReply, CallReply{Client: e.Client, Rpc: e.Rpc, Result: res}.Event(EvPublishFailArrive))
		}
	}
	if w.behaviour.FsyncWritten(w, ev) {
		goto committed // a slow write's fsync returned and it is renamed into place (sim/nodes/fsync.go)
	}
	switch {
	case w.Faults.Buggify(SiteEncoderFail):
		abandon(resInternal, "C-6", "encoder failed")
		return
	case cl.streamCancelled(e.Rpc) && handoff.DecidePublishStep(handoff.CancelledDuringStep, w.Decisions) == handoff.PublishAbandon:
		// The step completed after its client cancelled: the core decides
		// (C-1, C-2; the C-2 mutant writes it).
		abandon(0, "C-1", "cancelled before publication")
		return
	case p.Health.Draining():
		abandon(ResUnavailable, "S-2", "draining")
		return
	case w.Faults.Buggify(SiteENOSPC):
		if w.Set.Backend == BackendSharedDir {
			w.Sd.writeENOSPC(rec) // the real Dir.Write, its write failing with ENOSPC
		}
		abandon(resInternal, "L-5", "ENOSPC writing the entry")
		return
	}
	if w.Set.Backend == BackendSharedDir {
		if w.behaviour.SlowFsync(w, ev) {
			return // the fsync returns later (sim/nodes/fsync.go)
		}
		w.Sd.Publish(rec)
	} else {
		w.registerSource(id) // with E's xfer agent (transport.go)
	}
committed:
	w.publishMedia(rec, &cl.Plan.Media)
	ttl := p.Table.TTL(cl.Plan.ttlMs)
	if err := p.Table.CommitPublish(id, pubMs+ttl); err != nil {
		panic(err)
	}
	rec.Published = true
	rec.ExpiresMs = pubMs + ttl
	rec.CommittedMs = w.Now
	cancelled := cl.streamCancelled(e.Rpc)
	if cancelled {
		rec.CancelledBeforeReady = true // C-2: the late completion of a cancelled publish
		w.Ledger.Cancelled = append(w.Ledger.Cancelled, rec)
	}
	// The EncoderReady send: a fault may fail it on a live stream. The
	// core decides the entry's end (C-7; the C-2 mutant answers a
	// cancelled stream, the C-3 mutant keeps what never reached its client).
	sent := handoff.ReadySent{Cancelled: cancelled}
	if !cancelled {
		sent.SendFailed = w.Faults.Buggify(SiteSendFails)
	}
	if act := handoff.DecideReadySent(sent, w.Decisions); act != handoff.PublishAnswered {
		rec.ReadyUndelivered = true
		if !rec.CancelledBeforeReady {
			w.Ledger.Cancelled = append(w.Ledger.Cancelled, rec)
		}
		if act == handoff.PublishKeep {
			if w.Tracing {
				w.Notef("EncoderReady send failed; %s kept", Short(id))
			}
			return
		}
		if w.Tracing {
			w.Notef("C-7 EncoderReady send failed; releasing %s", Short(id))
		}
		w.producerRelease(id, -1, 0)
		return
	}
	if w.Tracing {
		w.Notef("published %s ttl %d", Short(id), ttl)
	}
	w.Send(MsgReply, ReadyReply{Client: e.Client, Rpc: e.Rpc, Entry: id, ExpiresMs: rec.ExpiresMs}.Event())
}

// releaseArrive: Abort(encoder_cache=ref) on E (SU-3).
func (w *World) releaseArrive(ev Event) {
	rq := releaseRequestOf(ev)
	if w.Prod.Stopped {
		w.Send(MsgReply, CallReply{Client: rq.client, Rpc: rq.rpc, Result: ResUnavailable}.Event(EvReleaseReplyArrive))
		return
	}
	w.ObserveClaims() // the producer looks before it answers (CONTRACT: collection, GetLoad, Abort)
	if rec, ok := w.Ledger.Entries[rq.entry]; ok {
		// SU-3: an expired entry is ALREADY_FINISHED, and is collected now:
		// the core's ProducerTable.ExpireBeforeRelease decides, before its
		// Release (the engine's Abort(encoder_cache) calls it too). Found
		// by the history check: the driver answered ABORTED for an entry a
		// consumer had already rejected as expired.
		for _, id := range w.Prod.Table.ExpireBeforeRelease(rec.ExpiresMs, w.Now) {
			w.StartRemoval(id, handoff.CauseExpiry, -1, 0)
		}
	}
	w.producerRelease(rq.entry, int(rq.client), rq.rpc)
}

// producerRelease decides a release; h < 0 means nobody waits for the answer (C-7).
func (w *World) producerRelease(id string, h int, rpc int64) {
	switch w.Prod.Table.Release(id) {
	case handoff.ReleaseRemove:
		w.StartRemoval(id, handoff.CauseRelease, h, rpc)
	case handoff.ReleaseWait:
		// Its removal is in flight: a consumer may still win the claim, or
		// the removal may fail; the answer waits for the outcome
		// (seeds 576264, 954255). Nobody waits for an internal one (h < 0):
		// the removal in flight ends the entry.
		if w.Tracing {
			w.Notef("release %s waits for its removal in flight", Short(id))
		}
		if h >= 0 {
			p := w.Prod
			if p.releaseWaits == nil {
				p.releaseWaits = map[string][]releaseWaiter{}
			}
			p.releaseWaits[id] = append(p.releaseWaits[id], releaseWaiter{h: h, rpc: rpc})
		}
	case handoff.ReleaseCleanupFailed:
		if w.Tracing {
			w.Notef("release %s: UNAVAILABLE (X-1 its removal failed)", Short(id))
		}
		if h >= 0 {
			w.Send(MsgReply, CallReply{Client: int32(h), Rpc: rpc, Result: ResUnavailable}.Event(EvReleaseReplyArrive))
		}
	default:
		if w.Tracing {
			w.Notef("release %s: ALREADY_FINISHED", Short(id))
		}
		if h >= 0 {
			w.releaseReply(int32(h), rpc, id, ResAlreadyFinished)
		}
	}
}

// releaseReply answers an Abort(encoder_cache) call with the status the
// producer decided (the SU-3 mutant turns every ALREADY_FINISHED into
// ABORTED); the ledger counts the ABORTED answers given.
func (w *World) releaseReply(h int32, rpc int64, id string, res int64) {
	if res == ResAlreadyFinished && handoff.AnswerRelease(handoff.ReleaseAlreadyFinished, w.Decisions) == handoff.ReleaseAborted {
		res = ResAborted // the SU-3 mutant (handoff.Mutants.ReleaseAlwaysAborted)
	}
	if res == ResAborted {
		w.Ledger.Get(id).Aborted++
	}
	w.Send(MsgReply, CallReply{Client: h, Rpc: rpc, Result: res}.Event(EvReleaseReplyArrive))
}

// StartRemoval removes the storage of an entry the table moved to Removing;
// the removal may be slow, so a consumer's claim can race it.
func (w *World) StartRemoval(id string, cause handoff.RemovalCause, h int, rpc int64) {
	w.Prod.Cleanups++
	d := Between(w.diskRNG, 0, 2)
	if w.Faults.Buggify(SiteSlowRemove) {
		d += Between(w.diskRNG, 1, w.Set.LongDelayMaxMs)
	}
	w.After(d, removeDone{client: int32(h), rpc: rpc, cause: cause, Entry: id}.event())
}

var CauseNames = map[handoff.RemovalCause]string{handoff.CauseRelease: "released", handoff.CauseExpiry: "expired", handoff.CauseDrain: "drained"}

// removeDone: the removal syscall returned; report it with RemovalDone (or
// RemovalFailed + health NOT_READY on an I/O error, X-1).
func (w *World) removeDone(ev Event) {
	rd := RemoveDoneOf(ev)
	p := w.Prod
	id := rd.Entry
	cause := rd.cause
	rec := w.Ledger.Get(id)
	p.Cleanups--
	reply := func(res int64) {
		if cause == handoff.CauseRelease && rd.client >= 0 {
			if res == ResUnavailable {
				w.Send(MsgReply, CallReply{Client: rd.client, Rpc: rd.rpc, Result: res}.Event(EvReleaseReplyArrive))
				return
			}
			w.releaseReply(rd.client, rd.rpc, id, res)
		}
	}
	early, landedEarly := w.Sd.takeEarly(id) // removed inside a consumer's Claim (shared_disk.go)
	if !landedEarly && w.Faults.Buggify(SiteRemoveError) {
		if w.Set.Backend == BackendSharedDir {
			w.Sd.remove(id, true) // the real Dir.Remove, its rename failing with EIO: ErrCleanup, the entry stays
		}
		p.Table.RemovalFailed(id)
		p.Health.CleanupFailed(fmt.Sprintf("X-1 remove entry %s: I/O error", Short(id)), w.Decisions) // handoff decides
		rec.removeFailed = true
		w.Ledger.RemoveFailures++
		if p.Health.Draining() {
			w.Reach(stCleanupFailureInDrain)
		}
		if w.Tracing {
			w.Notef("X-1 removal of %s failed", Short(id))
		}
		reply(ResUnavailable)
		w.decideWaitingReleases(id)
		return
	}
	won := false
	if landedEarly {
		won = early
	} else if w.Set.Backend == BackendSharedDir {
		won = w.Sd.remove(id, false)
	} else if w.Sources[id] == SourceLive {
		w.freeSource(id)
		won = true
	}
	if won {
		rec.RemovedCause = CauseNames[cause]
	}
	out := p.Table.RemovalDone(id, won)
	if w.Tracing {
		w.Notef("removal of %s won=%v -> %v", Short(id), won, out)
	}
	switch out {
	case handoff.ReleaseAborted:
		reply(ResAborted)
	default:
		reply(ResAlreadyFinished)
	}
	w.decideWaitingReleases(id)
}

// decideWaitingReleases: the removal of id ended; every release that
// waited for it is decided again (ALREADY_FINISHED, or UNAVAILABLE after
// a failed removal, X-1).
func (w *World) decideWaitingReleases(id string) {
	p := w.Prod
	waits := p.releaseWaits[id]
	if len(waits) == 0 {
		return
	}
	delete(p.releaseWaits, id)
	for _, r := range waits {
		w.producerRelease(id, r.h, r.rpc)
	}
}

// ObserveClaims: entries whose file is gone (shareddir's Dir.Exists, the
// engine store's look too) were claimed (shared directory): the core's
// ProducerTable.ObserveGone makes them CONSUMED.
func (w *World) ObserveClaims() {
	if w.Set.Backend != BackendSharedDir {
		return
	}
	ids := w.Prod.Table.AppendPublished(w.Prod.observed[:0])
	w.Prod.observed = ids
	for _, id := range ids {
		if ok, err := w.Sd.dir.Exists(id); err != nil {
			panic(fmt.Sprintf("sim: Exists(%s): %v", id, err))
		} else if !ok {
			w.Prod.Table.ObserveGone(id)
			if w.Tracing {
				w.Notef("observed %s gone", Short(id))
			}
		}
	}
}

// DecideShutdown is E's S-1 decision for Shutdown(expected); the S-1
// mutant accepts any non-empty id as its own.
func (w *World) DecideShutdown(expected string) (handoff.ShutdownStatus, error) {
	return w.Prod.Health.DecideShutdownWith(expected, w.Prod.InstanceID, w.Decisions)
}

// StopProducer closes the store: S-4 says nothing is left in the cache
// directory; only files whose removal failed (X-1, reported) may remain for
// the close to take.
func (w *World) StopProducer() {
	if err := checkStopped(w); err != nil {
		w.Failf(Correctness, "S-2", "%s", err)
	}
	w.Sd.stop()
	for id, st := range w.Sources {
		if st == SourceLive {
			if !w.Ledger.Get(id).removeFailed {
				w.Failf(Correctness, "S-4", "drained producer left the source of %s registered", Short(id))
			}
			w.freeSource(id)
		}
	}
	w.Prod.Stopped = true
	if w.Tracing {
		w.Notef("producer stopped")
	}
}

// ---- transfer backend, producer side (the core decides Q-3: handoff.FailTransfer) ----

// transferArrive: TransferEncoderCache on E: rejections up to the claim are
// before-write; ClaimForTransfer takes the entry out of the table
// BEFORE the WRITE is posted.
func (w *World) transferArrive(ev Event) {
	tr := transferRequestOf(ev)
	p := w.Prod
	rq := &w.Xreqs[tr.recv-1]
	w.directArrive(tr.recv)
	reply := transferReply{consumer: int32(rq.c), recv: tr.recv, result: ResBeforeWrite}
	if p.Stopped {
		reply.result = ResUnavailable // connection refused: no trailer, so uncertain for the consumer
		w.Send(MsgReply, reply.event())
		return
	}
	rec := w.Ledger.Get(rq.entry)
	err := w.producerCheckRef(rec, rq.form)
	if errors.Is(err, handoff.ErrSpentReference) {
		w.Reach(stClaimRacesExpiry)
		for _, id := range p.Table.Expire(w.Now) {
			w.StartRemoval(id, handoff.CauseExpiry, -1, 0)
		}
		if w.Tracing {
			w.Notef("SU-2 %s expired: before-write", Short(rq.entry))
		}
		w.Send(MsgReply, reply.event())
		return
	}
	if err != nil {
		reply.result = beforeWriteAnswer(err)
		if w.Tracing {
			w.Notef("%v: before-write", err)
		}
		w.Send(MsgReply, reply.event())
		return
	}
	// The consumer's agent metadata and descriptors, checked before the
	// claim as the engine's producer does (xfer.ParseMetadata,
	// xfer.CheckRemote): a bad one is a definite pre-write rejection.
	if _, err := xfer.ParseMetadata(rq.md); err != nil {
		reply.result = ResBeforeWrite
		w.Send(MsgReply, reply.event())
		return
	}
	if err := xfer.CheckRemote(rq.targets); err != nil {
		reply.result = ResBeforeWrite
		w.Send(MsgReply, reply.event())
		return
	}
	if err := p.Table.ClaimForTransfer(rq.entry); err != nil {
		reply.result = beforeWriteAnswer(err)
		if w.Tracing {
			w.Notef("claim: %v: before-write", err)
		}
		w.Send(MsgReply, reply.event())
		return
	}
	// ---- the entry is out of the table: from here a failure quarantines (Q-3) ----
	rq.Claimed = true
	if w.Sources[rq.entry] != SourceLive {
		panic(fmt.Sprintf("sim: transfer source of %s is %d", rq.entry, w.Sources[rq.entry]))
	}
	wr := &Write{Num: int64(len(w.Writes) + 1), Entry: rq.entry, recv: tr.recv, C: rq.c, Inc: rq.inc, Buf: rq.buf}
	var fault xfer.Fault // SiteWriteError: the WRITE fails before a byte lands, or lands and loses its acknowledgement
	if w.Faults.Buggify(SiteWriteError) {
		fault.Kind = xfer.FaultFailAfter
		if w.netRNG.IntN(2) == 0 {
			fault.Kind = xfer.FaultLoseAck
		}
	}
	w.Writes = append(w.Writes, wr)
	Must(w.postWrite(wr, rq, fault)) // CreateWriteTo + Post on E's agent (transport.go)
	d := Between(w.netRNG, 1, w.Set.WriteMsMax)
	if w.Faults.Buggify(SiteSlowWrite) {
		d += Between(w.netRNG, 1, w.Set.LongDelayMaxMs)
	}
	if w.Tracing {
		w.Notef("WRITE #%d of %s posted, lands in %d", wr.Num, Short(rq.entry), d)
	}
	w.After(d, WriteStep{Write: wr.Num}.Event(EvWriteLand))
	w.After(w.Set.ProducerTimeoutMs, WriteStep{Write: wr.Num}.Event(EvWriteDeadline))
}

// beforeWriteAnswer is the producer's answer to a rejection made before the
// claim: handoff.BeforeWrite decides whether it carries the before-write
// trailer; one that does not is UNAVAILABLE without it, an uncertain
// outcome for the consumer.
func beforeWriteAnswer(err error) int64 {
	if handoff.BeforeWrite(err) {
		if _, code := handoff.Classify(err); code == handoff.CodeUnavailable {
			return ResUnavailableBeforeWrite
		}
		return ResBeforeWrite
	}
	return ResUnavailable
}

// writeLand: the WRITE's bytes reach the consumer (xfer's Deliver): they
// land in its registered buffer, or the WRITE fails (the injected fault,
// the consumer's agent refused it or is gone with its process).
func (w *World) writeLand(ev Event) {
	wr := w.Writes[WriteStepOf(ev).Write-1]
	err := w.DeliverWrite(wr, false)
	c := w.Cons[wr.C]
	switch {
	case !wr.landed && (!c.Up || c.Inc != wr.Inc):
		if w.Tracing {
			w.Notef("WRITE #%d failed: PD%d incarnation %d is gone", wr.Num, wr.C, wr.Inc)
		}
	case !wr.landed:
		if w.Tracing {
			w.Notef("WRITE #%d failed before landing: %v", wr.Num, err)
		}
	case !c.Up || c.Inc != wr.Inc:
		w.Failf(Correctness, "Q-1", "WRITE #%d of %s landed in PD%d incarnation %d, whose agent was closed", wr.Num, Short(wr.Entry), wr.C, wr.Inc)
	default:
		if _, open := c.Recvs[wr.recv]; !open {
			w.Reach(stWriteLandedAfterGiveUp)
		}
		b := &c.Bufs[wr.Buf]
		w.checkLanding(wr, b)
		if string(b.mem) != wr.Entry {
			w.Failf(Correctness, "Q-4", "xfer reported WRITE #%d of %s landed, but PD%d buffer %d holds %q", wr.Num, Short(wr.Entry), wr.C, wr.Buf, b.mem)
		}
		rq := &w.Xreqs[wr.recv-1]
		w.took(w.Ledger.Get(wr.Entry), rq.Key, int32(rq.h), rq.rpc, rq.form)
		if w.Tracing {
			w.Notef("WRITE #%d of %s landed in PD%d buffer %d", wr.Num, Short(wr.Entry), wr.C, wr.Buf)
		}
	}
	w.After(1, WriteStep{Write: wr.Num}.Event(EvWriteComplete))
}

// writeComplete: the producer learns the WRITE's status (xfer's Complete,
// then Status and Release): TransferDone and deregister the source, or
// fail the transfer.
func (w *World) writeComplete(ev Event) {
	wr := w.Writes[WriteStepOf(ev).Write-1]
	if wr.Orphan {
		return // its producer process crashed: the agent's Close ended it
	}
	err := w.completeWrite(wr)
	w.writeEndedProof(wr) // ends its source's quarantine, if any
	if wr.ProducerDone || w.Prod.Stopped {
		return
	}
	wr.ProducerDone = true
	reply := transferReply{consumer: int32(wr.C), recv: wr.recv}
	if err != nil {
		reply.result = w.failTransfer(wr, "WRITE failed")
	} else {
		if err := w.Prod.Table.TransferDone(wr.Entry); err != nil {
			panic(err)
		}
		w.freeSource(wr.Entry)
		reply.result = ResOK
		if w.Tracing {
			w.Notef("transfer of %s done", Short(wr.Entry))
		}
	}
	w.Send(MsgReply, reply.event())
}

// writeDeadline: the producer's own deadline on its WRITE passed: the WRITE
// may still land, so the source is quarantined, never freed.
func (w *World) writeDeadline(ev Event) {
	wr := w.Writes[WriteStepOf(ev).Write-1]
	if wr.ProducerDone || w.Prod.Stopped {
		return
	}
	wr.ProducerDone = true
	res := w.failTransfer(wr, "deadline passed")
	w.Send(MsgReply, transferReply{consumer: int32(wr.C), recv: wr.recv, result: res}.event())
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
func (w *World) failTransfer(wr *Write, why string) int64 {
	d, err := w.Prod.Table.FailTransfer(handoff.TransferFailure{
		EntryID:    wr.Entry,
		HasSource:  true,
		WriteEnded: wr.Released,
		Provable:   true, // E's xfer request tells when it ended (Complete, Release)
		Reason:     fmt.Sprintf("Q-3 source of entry %s quarantined after a failed WRITE: %s", Short(wr.Entry), why),
	}, w.Decisions)
	Must(err)
	w.Ledger.Get(wr.Entry).quarantined = true
	if d.Source == handoff.FreeSource {
		w.freeSource(wr.Entry)
	} else {
		w.Sources[wr.Entry] = SourceQuarantined
	}
	if d.Health != nil {
		w.Prod.Health.Fail(d.Health.Check, d.Health.Reason)
		w.quarantineSource(wr) // until the WRITE ends; the mutant's early free keeps Health NOT_READY as long
	}
	if w.Tracing {
		w.Notef("Q-3 transfer of %s failed (%s); source %s", Short(wr.Entry), why, map[bool]string{true: "freed", false: "quarantined"}[d.Source == handoff.FreeSource])
	}
	if d.Code == handoff.CodeInvalidArgument {
		return ResPlainInvalid
	}
	return ResUnavailable
}

// producerConsume: a consume sent to E, which does not serve it: L-4
// decides first, FAILED_PRECONDITION. The L-4 mutant serves it from its
// own store (a read of its own file, or a local copy of the source) and
// answers OK. While E is down the call never arrives (staleProducerEvent:
// connection refused), so only a live process serves it.
func (w *World) producerConsume(ev Event) {
	p := w.Prod
	if p.Stopped {
		return // no process: the client's deadline ends the call
	}
	rq := consumeRequestOf(ev)
	reply := consumeReply{Client: rq.client, Consumer: -1, Rpc: rq.rpc, Entry: rq.entry}
	if err := handoff.AdmitRole(fmt.Errorf("%w: L-4 only a consumer consumes an encoder output", handoff.ErrWrongRole), w.Decisions); err != nil {
		reply.Result = ResOf(err)
		w.Ledger.rejectCall(CallKey{rq.client, rq.rpc}, reply.Result)
		w.Send(MsgReply, reply.event())
		return
	}
	rec := w.Ledger.Get(rq.entry)
	reply.Result = resSpent
	key := fmt.Sprintf("E/%d/%d", rq.client, rq.rpc)
	if w.Set.Backend == BackendSharedDir {
		if w.Sd.claim(w.Sd.prod, -1, rec, false) == claimWon {
			w.took(rec, key, rq.client, rq.rpc, rq.form)
			reply.Result = ResOK
		}
	} else if w.Now < rec.ExpiresMs && p.Table.ClaimForTransfer(rec.Id) == nil {
		Must(p.Table.TransferDone(rec.Id))
		w.freeSource(rec.Id)
		w.took(rec, key, rq.client, rq.rpc, rq.form)
		reply.Result = ResOK
	}
	if w.Tracing {
		w.Notef("E served a consume of %s: %s", Short(rec.Id), ResNames[reply.Result])
	}
	w.Send(MsgReply, reply.event())
}

// Short abbreviates an id for notes.
func Short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// publishMs is the tick the publish took its clock reading: before the
// write (the first encodeDone, or the start of a slow write; sim/nodes'
// fsync.go).
func (w *World) publishMs(ev Event) int64 {
	if e := EncodeDoneOf(ev); e.Resumed {
		return e.StartedMs
	}
	return w.Now
}
