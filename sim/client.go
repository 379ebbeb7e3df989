package sim

import "slices"

// cancelPoint is where a client's plan cancels it (CONTRACT C-1, C-3, C-4).
type cancelPoint int

const (
	cancelNone cancelPoint = iota
	// cancelEncoding: the publish stream is cancelled while the encoder runs (C-1, C-7).
	cancelEncoding
	// cancelAfterReady: the client got its reference and cancels: it releases it (C-3).
	cancelAfterReady
)

// plan is what a client will do, drawn from the workload stream when it is made.
type plan struct {
	startTick    int64
	consumer     int
	payloadBytes int64
	ttlMs        int64
	cancel       cancelPoint
	cancelMs     int64
	consume      bool
	replay       bool
	releases     int // Abort calls after consuming (0, 1 or 2: release twice)
	race         raceKind
}

// raceKind is a fire-and-forget call a client sends alongside its consume,
// so claims and releases race (SU-1 holds "whatever the interleaving of
// consumers, retries and releases").
type raceKind int

const (
	raceNone raceKind = iota
	// raceConsume sends the same reference to a second consumer at once.
	raceConsume
	// raceRelease sends Abort(encoder_cache) at once.
	raceRelease
)

// clientStage is what a client waits for.
type clientStage int

const (
	stageIdle clientStage = iota
	stagePublishing
	stageConsuming
	stageReplaying
	stageReleasing
	stageDone
)

// client is one handoff's client: publish on E, consume on a PD, maybe replay
// the spent reference, release once or twice, cancel at its plan's point.
type client struct {
	idx   int
	plan  plan
	stage clientStage
	// rpc numbers the client's calls; an answer for another number is stale.
	rpc int64
	// cancelledRPC is the publish call whose stream the client cancelled.
	cancelledRPC int64
	entry        string
	releasesLeft int
	replayed     bool
	done         bool
	outcome      string
	// manual clients (Driver) make one call and stop at its answer:
	// answered, lastRes and lastEntry hold it; nothing follows by itself.
	manual, answered bool
	lastRes          int64
	lastEntry        string
}

func newClient(w *World, idx int) *client {
	r := w.workRNG
	p := plan{
		startTick:    between(r, 0, w.set.SafetyTicks/2),
		consumer:     r.IntN(w.set.Consumers),
		payloadBytes: between(r, 1, w.set.PayloadBytesMax),
		consume:      chance(r, 0.85),
		replay:       chance(r, 0.25),
	}
	if chance(r, 0.5) {
		p.ttlMs = between(r, 1, w.set.MaxTTLMs*2)
	}
	switch x := r.Float64(); {
	case x < 0.08:
		p.cancel, p.cancelMs = cancelEncoding, between(r, 0, w.set.EncodeMsMax+w.set.NetDelayMaxMs)
	case x < 0.16:
		p.cancel = cancelAfterReady
	}
	switch x := r.Float64(); {
	case x < 0.12:
		p.race = raceConsume
	case x < 0.24:
		p.race = raceRelease
	}
	switch x := r.Float64(); {
	case x < 0.15:
		p.releases = 2
	case x < 0.45:
		p.releases = 1
	}
	return &client{idx: idx, plan: p}
}

// streamCancelled reports whether the client cancelled its publish call rpc.
func (c *client) streamCancelled(rpc int64) bool { return c.cancelledRPC == rpc && rpc != 0 }

// call starts a client RPC: a new number, the request on the network, and the client's deadline.
func (w *World) call(c *client, stage clientStage, class msgClass, ev event) {
	c.rpc++
	c.stage = stage
	ev.h, ev.a = int32(c.idx), c.rpc
	w.histCall(c.idx, c.rpc, stageOps[stage], ev.s)
	w.send(class, ev)
	w.after(w.set.ClientTimeoutMs, event{kind: evClientDeadline, h: int32(c.idx), a: c.rpc})
}

// stageOps is the history operation each calling stage makes.
var stageOps = [...]OpKind{stagePublishing: OpPublish, stageConsuming: OpConsume, stageReplaying: OpConsume, stageReleasing: OpRelease, stageDone: 0}

func (w *World) finish(c *client, outcome string) {
	c.stage, c.done, c.outcome = stageDone, true, outcome
	w.notef("client %d done: %s", c.idx, outcome)
}

// clientStart publishes.
func (w *World) clientStart(ev event) {
	c := w.clients[ev.h]
	w.call(c, stagePublishing, msgRequest, event{kind: evPublishArrive})
	if c.plan.cancel == cancelEncoding {
		w.after(c.plan.cancelMs, event{kind: evClientCancel, h: ev.h, a: c.rpc})
	}
}

// current reports whether ev answers the client's outstanding call.
func (w *World) current(c *client, ev event) bool {
	if c.done || ev.a != c.rpc || c.stage == stageIdle {
		w.notef("stale answer for client %d ignored", c.idx)
		return false
	}
	return true
}

// clientDeadline: the call's answer did not come in time (lost, or a node down).
func (w *World) clientDeadline(ev event) {
	c := w.clients[ev.h]
	if c.done || ev.a != c.rpc || c.stage == stageIdle {
		return
	}
	w.notef("client %d call %d deadline", c.idx, ev.a)
	w.answer(c, resUnavailable, "")
}

// clientCancel cancels the client's current call: the publish stream (C-1,
// C-7) or, injected, a consume in flight (C-4: the consumer keeps its
// buffers until the outcome is known; the client then releases).
func (w *World) clientCancel(ev event) {
	c := w.clients[ev.h]
	if c.done || ev.a != c.rpc {
		return
	}
	switch c.stage {
	case stagePublishing:
		c.cancelledRPC = c.rpc
		c.rpc++ // answers to the cancelled call are stale now
		w.finish(c, "cancelled while publishing")
	case stageConsuming, stageReplaying:
		c.rpc++
		w.notef("client %d cancelled its consume", c.idx)
		c.releasesLeft = max(c.releasesLeft, 1)
		w.next(c)
	}
}

func (w *World) readyArrive(ev event) {
	w.histReturn(ev.h, ev.a, OpPublish, resOK, ev.s)
	c := w.clients[ev.h]
	if !w.current(c, ev) {
		return
	}
	w.answer(c, resOK, ev.s)
}

func (w *World) publishFailArrive(ev event) {
	w.histReturn(ev.h, ev.a, OpPublish, ev.b, "")
	c := w.clients[ev.h]
	if !w.current(c, ev) {
		return
	}
	w.answer(c, ev.b, "")
}

// consumeReplyArrive: the PD's answer; an OK is the client-visible consumption SU-1 counts.
func (w *World) consumeReplyArrive(ev event) {
	w.histReturn(ev.h, ev.a, OpConsume, ev.b, ev.s)
	c := w.clients[ev.h]
	if ev.b == resOK {
		// Counted even if the client stopped waiting: the PD served it. A
		// duplicated reply is the same answer, counted once.
		rec := w.ledger.get(ev.s)
		if !slices.Contains(rec.okCalls, [2]int64{int64(ev.h), ev.a}) {
			rec.okCalls = append(rec.okCalls, [2]int64{int64(ev.h), ev.a})
		}
	}
	if !w.current(c, ev) {
		return
	}
	w.answer(c, ev.b, "")
}

func (w *World) releaseReplyArrive(ev event) {
	w.histReturn(ev.h, ev.a, OpRelease, ev.b, "")
	c := w.clients[ev.h]
	if !w.current(c, ev) {
		return
	}
	w.answer(c, ev.b, "")
}

// answer moves a client on after its current call ended with res.
func (w *World) answer(c *client, res int64, entry string) {
	w.notef("client %d got %s", c.idx, resNames[res])
	if c.manual {
		c.answered, c.lastRes, c.lastEntry = true, res, entry
		c.stage, c.done, c.outcome = stageDone, true, resNames[res]
		return
	}
	if w.set.eppd() && w.decodeAnswer(c, res) {
		return // E+P+D: PrefillReady, decode, KV session release (prefill_decode.go)
	}
	switch c.stage {
	case stagePublishing:
		if res != resOK {
			w.finish(c, "publish failed: "+resNames[res])
			return
		}
		c.entry = entry
		c.releasesLeft = c.plan.releases
		if c.plan.cancel == cancelAfterReady {
			c.releasesLeft = max(c.releasesLeft, 1)
			c.stage = stageIdle
			w.next(c)
			return
		}
		if c.plan.consume {
			w.consume(c, c.plan.consumer, stageConsuming)
			return
		}
	case stageConsuming:
		if res != resOK {
			c.releasesLeft = max(c.releasesLeft, 1) // hygiene: release what may still be live
		}
	case stageReplaying:
		c.replayed = true
	case stageReleasing:
		c.releasesLeft--
	}
	c.stage = stageIdle
	w.next(c)
}

// next picks the client's next call, or finishes it.
func (w *World) next(c *client) {
	switch {
	case c.plan.replay && !c.replayed && c.plan.cancel == cancelNone && c.plan.consume && c.releasesLeft == c.plan.releases:
		c.replayed = true
		w.consume(c, (c.plan.consumer+1)%w.set.Consumers, stageReplaying)
	case c.releasesLeft > 0:
		w.call(c, stageReleasing, msgRelease, event{kind: evReleaseArrive, s: c.entry})
	default:
		w.finish(c, "finished")
	}
}

// consume sends the reference to consumer pd (and, per plan, a racing
// call nobody waits for: call number 0); the late-cancel fault may cancel it.
func (w *World) consume(c *client, pd int, stage clientStage) {
	w.call(c, stage, msgRequest, event{kind: evConsumeArrive, c: int32(pd), s: c.entry})
	if stage == stageConsuming {
		switch c.plan.race {
		case raceConsume:
			w.histCall(c.idx, 0, OpConsume, c.entry)
			w.send(msgRequest, event{kind: evConsumeArrive, h: int32(c.idx), c: int32((pd + 1) % w.set.Consumers), s: c.entry})
		case raceRelease:
			w.histCall(c.idx, 0, OpRelease, c.entry)
			w.send(msgRelease, event{kind: evReleaseArrive, h: int32(c.idx), s: c.entry})
		}
	}
	if w.faults.buggify(SiteLateCancel) {
		w.after(between(w.workRNG, 0, w.set.ConsumerTimeoutMs), event{kind: evClientCancel, h: int32(c.idx), a: c.rpc})
	}
}
