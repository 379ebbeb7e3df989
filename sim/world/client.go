package world

// cancelPoint is where a client's plan cancels it (CONTRACT C-1, C-3, C-4).
type cancelPoint int

const (
	cancelNone cancelPoint = iota
	// CancelEncoding: the publish stream is cancelled while the encoder runs (C-1, C-7).
	CancelEncoding
	// cancelAfterReady: the client got its reference and cancels: it releases it (C-3).
	cancelAfterReady
)

// plan is what a client will do, drawn from the workload stream when it is made.
type plan struct {
	startTick    int64
	consumer     int
	PayloadBytes int64       // the publish's payload size, bytes
	TTLMs        int64       // the TTL the publish asks, ms (0: the default)
	Cancel       cancelPoint // where the plan cancels the client (C-1, C-3, C-4)
	CancelMs     int64       // with CancelEncoding, how long after the publish starts, ms
	consume      bool
	replay       bool
	releases     int // Abort calls after consuming (0, 1 or 2: release twice)
	race         raceKind
	// Probe is a call the harness makes with the live reference before
	// consuming it, one the contract says is rejected and changes nothing.
	Probe probeKind
	// Content names the media published (one of contentKinds): two
	// clients with the same content publish the same media (SU-6).
	Content int
	// Media is what the publish carries and the consumes ask (media.go; its own stream).
	Media MediaPlan
}

// probeKind is an altered call a client makes with its live reference
// (CONTRACT SU-5, L-1, N-1, L-4), as the conformance harness does.
type probeKind uint8

const (
	// ProbeNone: no probe (the plan makes none).
	ProbeNone probeKind = iota
	// probeForged consumes with a reference whose tag the producer never made (SU-5).
	probeForged
	// probeOversize consumes with the reference padded past 64 KiB (L-1).
	probeOversize
	// probeRelabelled consumes with the reference relabelled to an unlisted backend (N-1).
	probeRelabelled
	// probeWrongRole sends the consume to E, a producer (L-4).
	probeWrongRole
)

// ProbeRules is the rule each probe checks and the answer the contract
// gives it (0: any answer but OK).
var ProbeRules = [...]struct {
	Rule string
	Want int64
}{probeForged: {"SU-5", 0}, probeOversize: {"L-1", resTooLarge}, probeRelabelled: {"N-1", resBackend}, probeWrongRole: {"L-4", resWrongRole}}

// probeForms is the reference form each probe presents.
var probeForms = [...]RefForm{probeForged: formForged, probeOversize: FormOversize, probeRelabelled: formRelabelled, probeWrongRole: FormIssued}

var ProbeNames = [...]string{probeForged: "forged reference", probeOversize: "oversize reference", probeRelabelled: "relabelled reference", probeWrongRole: "consume sent to E"}

// contentKinds is the number of distinct media clients publish.
const contentKinds = 6

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
	StageIdle       clientStage = iota
	StagePublishing             // a publish call is out
	StageConsuming
	StageReplaying // the replayed consume is out (to the next consumer)
	stageReleasing
	stageProbing
	stageDone
)

// Client is one handoff's client: publish on E, consume on a PD, maybe replay
// the spent reference, release once or twice, cancel at its plan's point.
type Client struct {
	Idx   int
	Plan  plan
	Stage clientStage
	// Rpc numbers the client's calls; an answer for another number is stale.
	Rpc int64
	// CancelledRPC is the publish call whose stream the client cancelled.
	CancelledRPC int64
	entry        string
	ReleasesLeft int // Abort calls the client still makes
	replayed     bool
	// CallPD is the consumer of the current consume call; ProbeRPC the
	// number of the probe call.
	CallPD   int
	ProbeRPC int64
	Done     bool
	Outcome  string
	// manual clients (Driver) make one call and stop at its answer:
	// answered, lastRes and lastEntry hold it; nothing follows by itself.
	manual, answered bool
	lastRes          int64
	lastEntry        string
}

// drawPlan draws a seeded client's plan from the workload stream.
func drawPlan(w *World) plan {
	r := w.WorkRNG
	p := plan{
		startTick:    Between(r, 0, w.Set.SafetyTicks/2),
		consumer:     r.IntN(w.Set.Consumers),
		PayloadBytes: Between(r, 1, w.Set.PayloadBytesMax),
		consume:      Chance(r, 0.85),
		replay:       Chance(r, 0.25),
	}
	if Chance(r, 0.5) {
		p.TTLMs = Between(r, 1, w.Set.MaxTTLMs*2)
	}
	switch x := r.Float64(); {
	case x < 0.08:
		p.Cancel, p.CancelMs = CancelEncoding, Between(r, 0, w.Set.EncodeMsMax+w.Set.NetDelayMaxMs)
	case x < 0.16:
		p.Cancel = cancelAfterReady
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
	p.Content = r.IntN(contentKinds)
	switch x := r.Float64(); {
	case x < 0.02:
		p.Probe = probeForged
	case x < 0.04:
		p.Probe = probeOversize
	case x < 0.06:
		p.Probe = probeRelabelled
	case x < 0.08:
		p.Probe = probeWrongRole
	}
	p.Media = w.drawMedia()
	return p
}

// StreamCancelled reports whether the client cancelled its publish call rpc.
func (c *Client) StreamCancelled(rpc int64) bool { return c.CancelledRPC == rpc && rpc != 0 }

// Call starts a client RPC: a new number, the request on the network, and the client's deadline.
func (w *World) Call(c *Client, stage clientStage, class msgClass, ev Event) {
	c.Rpc++
	c.Stage = stage
	call := ClientCall{Client: int32(c.Idx), Rpc: c.Rpc}
	ev.setCaller(call)
	w.histCall(c.Idx, c.Rpc, stageOps[stage], requestEntryOf(ev))
	w.Send(class, ev)
	w.After(w.Set.ClientTimeoutMs, call.Event(EvClientDeadline))
}

// stageOps is the history operation each calling stage makes.
var stageOps = [...]OpKind{StagePublishing: OpPublish, StageConsuming: OpConsume, StageReplaying: OpConsume, stageReleasing: OpRelease, stageProbing: OpConsume, stageDone: 0}

// Finish ends client c with outcome, a line for the trace and the report.
func (w *World) Finish(c *Client, outcome string) {
	c.Stage, c.Done, c.Outcome = stageDone, true, outcome
	if w.Tracing {
		w.Notef("client %d done: %s", c.Idx, outcome)
	}
}

// Current reports whether an answer to call rpc answers the client's outstanding call.
func (w *World) Current(c *Client, rpc int64) bool {
	if c.Done || rpc != c.Rpc || c.Stage == StageIdle {
		if w.Tracing {
			w.Notef("stale answer for client %d ignored", c.Idx)
		}
		return false
	}
	return true
}

// Answer moves a client on after its current call ended with res.
func (w *World) Answer(c *Client, res int64, entry string) {
	if w.Tracing {
		w.Notef("client %d got %s", c.Idx, ResNames[res])
	}
	if c.manual {
		c.answered, c.lastRes, c.lastEntry = true, res, entry
		c.Stage, c.Done, c.Outcome = stageDone, true, ResNames[res]
		return
	}
	if w.Set.eppd() && w.behaviour.DecodeAnswer(w, c, res) {
		return // E+P+D: PrefillReady, decode, KV session release (sim/nodes/prefill_decode.go)
	}
	switch c.Stage {
	case StagePublishing:
		if res != ResOK {
			w.Finish(c, publishFailed(res))
			return
		}
		c.entry = entry
		c.ReleasesLeft = c.Plan.releases
		if c.Plan.Probe != ProbeNone {
			w.probe(c)
			return
		}
		w.afterPublish(c)
		return
	case stageProbing:
		w.afterPublish(c)
		return
	case StageConsuming:
		if res != ResOK {
			c.ReleasesLeft = max(c.ReleasesLeft, 1) // hygiene: release what may still be live
		}
	case StageReplaying:
		c.replayed = true
	case stageReleasing:
		c.ReleasesLeft--
	}
	c.Stage = StageIdle
	w.Next(c)
}

// afterPublish is what a client does with its new reference: release it
// at once (cancelled), consume it, or go on to its releases.
func (w *World) afterPublish(c *Client) {
	if c.Plan.Cancel == cancelAfterReady {
		c.ReleasesLeft = max(c.ReleasesLeft, 1)
		c.Stage = StageIdle
		w.Next(c)
		return
	}
	if c.Plan.consume {
		w.consume(c, c.Plan.consumer, StageConsuming)
		return
	}
	c.Stage = StageIdle
	w.Next(c)
}

// probe makes the client's probe call with its live reference: an altered
// reference to its consumer, or the consume to E (history: a probe op).
func (w *World) probe(c *Client) {
	kind := EvConsumeArrive
	if c.Plan.Probe == probeWrongRole {
		kind = EvProducerConsume
	}
	ev := consumeRequest{Consumer: int32(c.Plan.consumer), Entry: c.entry, Form: probeForms[c.Plan.Probe]}.Event(kind)
	c.CallPD = c.Plan.consumer
	w.Call(c, stageProbing, MsgRequest, ev)
	c.ProbeRPC = c.Rpc
	w.Hist.ops[len(w.Hist.ops)-1].Probe = true
	if w.Tracing {
		w.Notef("client %d probes with a %s", c.Idx, ProbeNames[c.Plan.Probe])
	}
}

// Next picks the client's next call, or finishes it.
func (w *World) Next(c *Client) {
	switch {
	case c.Plan.replay && !c.replayed && c.Plan.Cancel == cancelNone && c.Plan.consume && c.ReleasesLeft == c.Plan.releases:
		c.replayed = true
		w.consume(c, (c.Plan.consumer+1)%w.Set.Consumers, StageReplaying)
	case c.ReleasesLeft > 0:
		w.Call(c, stageReleasing, MsgRelease, releaseRequest{Entry: c.entry}.event())
	default:
		w.Finish(c, "finished")
	}
}

// consume sends the reference to consumer pd (and, per plan, a racing
// call nobody waits for: call number 0); the late-cancel fault may cancel it.
func (w *World) consume(c *Client, pd int, stage clientStage) {
	c.CallPD = pd
	w.Call(c, stage, MsgRequest, consumeRequest{Consumer: int32(pd), Entry: c.entry}.Event(EvConsumeArrive))
	if stage == StageConsuming {
		switch c.Plan.race {
		case raceConsume:
			w.histCall(c.Idx, 0, OpConsume, c.entry)
			w.Send(MsgRequest, consumeRequest{Client: int32(c.Idx), Consumer: int32((pd + 1) % w.Set.Consumers), Entry: c.entry}.Event(EvConsumeArrive))
		case raceRelease:
			w.histCall(c.Idx, 0, OpRelease, c.entry)
			w.Send(MsgRelease, releaseRequest{Client: int32(c.Idx), Entry: c.entry}.event())
		}
	}
	if w.Faults.Buggify(SiteLateCancel) {
		w.After(Between(w.WorkRNG, 0, w.Set.ConsumerTimeoutMs), ClientCall{Client: int32(c.Idx), Rpc: c.Rpc}.Event(EvClientCancel))
	}
}
