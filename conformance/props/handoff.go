package props

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// Maker returns the target one check runs against and a function that ends
// it (the error is the target's drain result, checked as S-2/S-4). Shared
// returns the same target for every check.
type Maker func() (tg target.Target, stop func() error, err error)

// Shared is a Maker that hands out tg for every check and never stops it.
func Shared(tg target.Target) Maker {
	return func() (target.Target, func() error, error) { return tg, func() error { return nil }, nil }
}

// Config tunes the handoff property.
type Config struct {
	// Images are the media the publishes draw from (default: four small
	// fixture images).
	Images []fixtures.Image
	// Prompt is the consumers' prompt (default fixtures "dominant-colour").
	Prompt string
	// MaxLive bounds the live references of one check (default 6), so a
	// check stays within the producer's L-5 quota.
	MaxLive int
	// Shutdown adds the shutdown action. Shutdown is destructive: the
	// Maker must then give every check a fresh target.
	Shutdown bool
	// CallTimeout bounds one call (default 30 s).
	CallTimeout time.Duration
	// SettleTimeout bounds the wait for observables at the end of a check
	// (default 5 s).
	SettleTimeout time.Duration
	// CollectWithin bounds how long an unconsumed entry may stay in the
	// producer's table past its TTL (X-2, the lifecycle actions; default
	// 1 s: the reference engine's collector runs every 200 ms).
	CollectWithin time.Duration
}

func (c Config) withDefaults() Config {
	if len(c.Images) == 0 {
		for _, n := range []string{"basn6a08.png", "basn0g08.png", "one-pixel.png", "basn3p08.png"} {
			if im, err := fixtures.ImageByName(n); err == nil {
				c.Images = append(c.Images, im)
			}
		}
	}
	if c.Prompt == "" {
		for _, p := range fixtures.Prompts() {
			if p.Name == "dominant-colour" {
				c.Prompt = p.Text
			}
		}
	}
	if c.MaxLive == 0 {
		c.MaxLive = 6
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 30 * time.Second
	}
	if c.SettleTimeout == 0 {
		c.SettleTimeout = 5 * time.Second
	}
	if c.CollectWithin == 0 {
		c.CollectWithin = time.Second
	}
	return c
}

// Handoff returns the property: every check gets a target from mk, runs a
// rapid-drawn sequence of actions against its producer and consumer with
// the model's expectations and the invariants after each, then releases
// everything and checks nothing leaked. A target without both roles fails
// the check (a props run needs E+PD).
func Handoff(mk Maker, cfg Config) func(*rapid.T) {
	cfg = cfg.withDefaults()
	// lingering counts, per target, the entries earlier checks left behind
	// that may still leave the table (publishes cancelled in flight).
	var mu sync.Mutex
	lingering := map[target.Target]int{}
	return func(t *rapid.T) {
		tg, stop, err := mk()
		if err != nil {
			t.Fatalf("start target: %v", err)
		}
		m := newMachine(t, tg, cfg)
		mu.Lock()
		m.inherited = lingering[tg]
		mu.Unlock()
		defer func() {
			mu.Lock()
			lingering[tg] = m.lingering
			mu.Unlock()
		}()
		defer func() {
			if err := stop(); err != nil {
				t.Errorf("stop target: %v", err)
			}
		}()
		m.begin(t)
		defer m.releaseLeftovers()
		actions := map[string]func(*rapid.T){
			"":             m.check,
			"publish":      m.publish,
			"consume":      m.consume,
			"replay":       m.replay,
			"release":      m.release,
			"releaseTwice": m.releaseTwice,
			"malformed":    m.malformed,
			"cancel":       m.cancel,
		}
		if cfg.Shutdown {
			actions["shutdown"] = m.shutdown
		}
		for _, set := range actionSets {
			for name, a := range set(m) {
				if name == "" { // an invariant of the set, checked after every action too
					check := actions[""]
					actions[""] = func(t *rapid.T) { check(t); a(t) }
					continue
				}
				if _, dup := actions[name]; dup {
					panic("props: action " + name + " registered twice")
				}
				actions[name] = a
			}
		}
		t.Repeat(actions)
		m.finish(t)
	}
}

// actionSets add actions to the handoff property beyond the core ones, each
// from its own file (an init appends to it); an action named "" is an
// invariant, checked after every action with the core ones. A set looks at the machine's
// target (its Profile, the interfaces it implements) and returns only the
// actions that target can run, so the one property adapts to what each
// target offers: fault injection, test hooks, a baseline engine.
var actionSets []func(mc *machine) map[string]func(*rapid.T)

// machine runs one check: the target's engines and the model.
type machine struct {
	// tg is the check's target (action sets look for the interfaces it
	// implements: target.FaultInjector, target.Restarter).
	tg         target.Target
	cfg        Config
	profile    target.Profile
	prod, cons target.Engine
	m          *model
	// entries0 is the producer's encoder.exports.entries when the check
	// began; inherited of them may still leave (an earlier check's
	// cancelled publishes), and lingering is how many this check leaves.
	entries0, inherited, lingering int
	// released: finish released every reference of the check.
	released bool
}

func newMachine(t *rapid.T, tg target.Target, cfg Config) *machine {
	prod, ok1 := tg.Engine(target.RoleProducer)
	cons, ok2 := tg.Engine(target.RoleConsumer)
	if !ok1 || !ok2 {
		t.Fatalf("target %q lacks a producer or a consumer endpoint; the handoff property needs E+PD", tg.Profile().Name)
	}
	return &machine{tg: tg, cfg: cfg, profile: tg.Profile(), prod: prod, cons: cons, m: newModel()}
}

// ctx is one call's context.
func (mc *machine) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), mc.cfg.CallTimeout)
}

// begin records where the producer's table starts.
func (mc *machine) begin(t *rapid.T) {
	if c, ok := mc.counters(t, "producer", mc.prod); ok {
		mc.entries0 = int(c[obsEntries])
	}
}

// releaseLeftovers releases, without judging the answers, the references
// a failed check left live: rapid replays a failing check many times while
// it shrinks, and on a shared target their entries would otherwise fill
// the producer's quota (L-5) and change the failure.
func (mc *machine) releaseLeftovers() {
	if mc.released || mc.m.down["producer"] {
		return
	}
	for _, r := range mc.m.refs {
		if r.state == stateLive || r.state == stateUnknown {
			ctx, cancel := mc.ctx()
			_, _ = mc.prod.Abort(ctx, abortRequest(r.ref))
			cancel()
		}
	}
}

// --- requests -----------------------------------------------------------------

func (mc *machine) publishRequest(img int) *pb.GenerateRequest {
	im := mc.cfg.Images[img]
	return &pb.GenerateRequest{
		RequestId: newRequestID("props-publish"),
		Model:     mc.profile.Model,
		Media:     []*pb.MediaItem{{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: im.Data}, MimeType: "image/" + im.Format}},
		Encoder:   &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}},
	}
}

func (mc *machine) consumeRequest(ref *pb.EncoderCacheRef) *pb.GenerateRequest {
	return &pb.GenerateRequest{
		RequestId: newRequestID("props-consume"),
		Model:     mc.profile.Model,
		Input:     &pb.GenerateRequest_Prompt{Prompt: mc.cfg.Prompt},
		Stopping:  &pb.StoppingOptions{MaxTokens: proto.Uint32(maxTokens)},
		Encoder:   &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}},
	}
}

func abortRequest(ref *pb.EncoderCacheRef) *pb.AbortRequest {
	return &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}}
}

// generate runs req on e under ctx; a harness failure (no status) fails the check.
func (mc *machine) generate(t *rapid.T, ctx context.Context, e target.Engine, req *pb.GenerateRequest) *target.GenerateResult {
	t.Helper()
	res, err := e.Generate(ctx, req)
	if err != nil || res == nil || res.Status == nil {
		t.Fatalf("Generate(request_id=%s): harness error %v", req.GetRequestId(), err)
	}
	return res
}

// --- actions ------------------------------------------------------------------

// publish publishes one drawn image: EncoderReady with one item, no tokens,
// a zero Usage, stream OK (WIRE "How requests look"); UNAVAILABLE once the
// producer shut down (S-2).
func (mc *machine) publish(t *rapid.T) {
	if mc.m.count(stateLive) >= mc.cfg.MaxLive {
		t.SkipNow() // enough live references
	}
	img := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "image")
	mc.step(t, "publish %s", mc.cfg.Images[img].Name)
	ctx, cancel := mc.ctx()
	defer cancel()
	res := mc.generate(t, ctx, mc.prod, mc.publishRequest(img))
	call := fmt.Sprintf("Publish(image=%s)", mc.cfg.Images[img].Name)
	if mc.m.down["producer"] {
		if res.Code() != codes.Unavailable {
			t.Fatalf("%s after the producer accepted Shutdown = %s; want UNAVAILABLE (S-2)", call, describe(res))
		}
		return
	}
	mc.expectPublished(t, call, res, img)
}

// expectPublished checks an OK publish and adds its reference to the model.
func (mc *machine) expectPublished(t *rapid.T, call string, res *target.GenerateResult, img int) {
	t.Helper()
	ready := res.EncoderReady()
	if res.Code() != codes.OK || ready == nil || len(res.TokenIDs()) > 0 {
		t.Fatalf("%s = %s; want OK with one EncoderReady and no tokens", call, describe(res))
	}
	if n := len(ready.GetItems()); n != 1 {
		t.Fatalf("%s: EncoderReady has %d items; want 1 (one per media item)", call, n)
	}
	if h := ready.GetItems()[0].GetContentHash(); !isHexSHA256(h) {
		t.Fatalf("%s: content_hash %q; want 64 lowercase hex digits (H-1)", call, h)
	}
	if u := res.Usage(); u != nil && (u.GetPromptTokens() != 0 || u.GetCompletionTokens() != 0 || u.GetTotalTokens() != 0) {
		t.Fatalf("%s: Usage %v; want zero (the encoder's usage is not counted)", call, u)
	}
	for _, r := range mc.m.refs {
		if string(r.ref.GetOpaqueState()) == string(ready.GetRef().GetOpaqueState()) {
			t.Fatalf("%s returned the reference of an earlier publish (%s); want an independent entry (SU-6)", call, refLabel(r.ref))
		}
	}
	mc.m.refs = append(mc.m.refs, &refRecord{ref: ready.GetRef(), image: img, state: stateLive})
}

// pick draws one reference among those in states, or skips the action.
func (mc *machine) pick(t *rapid.T, label string, states ...refState) *refRecord {
	idx := mc.m.in(states...)
	if len(idx) == 0 {
		t.SkipNow() // no reference in the wanted state
	}
	return mc.m.refs[rapid.SampledFrom(idx).Draw(t, label)]
}

// consume consumes a live reference: tokens, the same as every earlier
// answer for that image (SU-1 the first time).
func (mc *machine) consume(t *rapid.T) {
	r := mc.pick(t, "ref", stateLive, stateUnknown)
	mc.step(t, "consume %s (%s)", refLabel(r.ref), r.state)
	mc.consumeRef(t, r, "")
}

// replay presents a spent reference: INVALID_ARGUMENT before any token (SU-2).
func (mc *machine) replay(t *rapid.T) {
	r := mc.pick(t, "spent", stateConsumed, stateReleased)
	mc.step(t, "replay %s (%s)", refLabel(r.ref), r.state)
	mc.consumeRef(t, r, "replay of a "+r.state.String()+" reference")
}

// consumeRef consumes r and checks the answer against r's state.
func (mc *machine) consumeRef(t *rapid.T, r *refRecord, note string) {
	t.Helper()
	ctx, cancel := mc.ctx()
	defer cancel()
	res := mc.generate(t, ctx, mc.cons, mc.consumeRequest(r.ref))
	call := consumeCall(r.ref, note)
	if mc.m.down["consumer"] {
		if res.Code() != codes.Unavailable || len(res.TokenIDs()) > 0 {
			t.Fatalf("%s after the consumer accepted Shutdown = %s; want UNAVAILABLE (S-2)", call, describe(res))
		}
		return
	}
	gotTokens := res.Code() == codes.OK && len(res.TokenIDs()) > 0
	rejected := res.Code() == codes.InvalidArgument && len(res.TokenIDs()) == 0
	switch r.state {
	case stateLive:
		if !gotTokens {
			t.Fatalf("%s = %s; want tokens (a live reference, SU-1)", call, describe(res))
		}
	case stateConsumed, stateReleased:
		if !rejected {
			t.Fatalf("%s = %s; want INVALID_ARGUMENT before any token (SU-2: the reference is %s)", call, describe(res), r.state)
		}
		return
	case stateUnknown:
		if !gotTokens && !rejected {
			t.Fatalf("%s = %s; want tokens or INVALID_ARGUMENT before any token (an uncertain earlier outcome)", call, describe(res))
		}
		if rejected {
			r.state = stateConsumed // spent one way or the other; Abort now answers ALREADY_FINISHED
			return
		}
	}
	r.state, r.unobserved = stateConsumed, true
	ids := res.TokenIDs()
	if want, ok := mc.m.answers[r.image]; ok && !equalIDs(ids, want) {
		t.Fatalf("%s = tokens %v; want %v, the answer an earlier reference to %s got (same image, same prompt)",
			call, ids, want, mc.cfg.Images[r.image].Name)
	}
	mc.m.answers[r.image] = ids
}

// release releases any reference: ABORTED for a live one, ALREADY_FINISHED
// for a spent one (SU-3).
func (mc *machine) release(t *rapid.T) {
	r := mc.pick(t, "ref", stateLive, stateConsumed, stateReleased, stateUnknown)
	mc.step(t, "release %s (%s)", refLabel(r.ref), r.state)
	mc.releaseRef(t, r, "")
}

// releaseTwice releases a reference twice in a row: the second answer is
// ALREADY_FINISHED whatever the first was (SU-3).
func (mc *machine) releaseTwice(t *rapid.T) {
	r := mc.pick(t, "ref", stateLive, stateConsumed, stateReleased, stateUnknown)
	mc.step(t, "release twice %s (%s)", refLabel(r.ref), r.state)
	mc.releaseRef(t, r, "first of two")
	mc.releaseRef(t, r, "second of two")
}

// releaseRef aborts r and checks the answer against r's state.
func (mc *machine) releaseRef(t *rapid.T, r *refRecord, note string) {
	t.Helper()
	ctx, cancel := mc.ctx()
	defer cancel()
	resp, err := mc.prod.Abort(ctx, abortRequest(r.ref))
	call := abortCall(r.ref, note)
	if mc.m.down["producer"] {
		if err != nil && status.Code(err) != codes.Unavailable {
			t.Fatalf("%s after the producer accepted Shutdown = %s; want ABORTED, ALREADY_FINISHED or UNAVAILABLE", call, statusString(err))
		}
		r.state, r.unobserved = stateReleased, false
		return
	}
	if err != nil {
		t.Fatalf("%s = %s; want ABORTED or ALREADY_FINISHED (SU-3)", call, statusString(err))
	}
	got := resp.GetStatus()
	switch r.state {
	case stateLive:
		if got != pb.AbortStatus_ABORT_STATUS_ABORTED {
			t.Fatalf("%s = %s; want ABORTED (SU-3: the first release of a live reference)", call, got)
		}
		r.state = stateReleased
	case stateConsumed, stateReleased:
		if got != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
			t.Fatalf("%s = %s; want ALREADY_FINISHED (SU-3: the reference is %s)", call, got, r.state)
		}
	case stateUnknown:
		switch got {
		case pb.AbortStatus_ABORT_STATUS_ABORTED:
			r.state = stateReleased
		case pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED:
			r.state = stateConsumed
		default:
			t.Fatalf("%s = %s; want ABORTED or ALREADY_FINISHED (SU-3)", call, got)
		}
	}
	r.unobserved = false // an Abort makes the producer look (CONTRACT "Shared-directory backend")
}

// cancel cancels a publish or a consume at a drawn point: before
// submission (nothing happens, C-1) or in flight (either outcome, and the
// engine cleans up after itself: C-4, C-7).
func (mc *machine) cancel(t *rapid.T) {
	what := rapid.SampledFrom([]string{"publish", "consume"}).Draw(t, "what")
	point := rapid.SampledFrom([]string{"before-submit", "in-flight"}).Draw(t, "point")
	if (what == "publish" && (mc.m.down["producer"] || mc.m.count(stateLive) >= mc.cfg.MaxLive)) || (what == "consume" && mc.m.down["consumer"]) {
		t.SkipNow() // role down or table full
	}
	var r *refRecord
	if what == "consume" {
		r = mc.pick(t, "ref", stateLive)
	}
	img := 0
	if what == "publish" {
		img = rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "image")
	}
	mc.step(t, "cancel %s %s", what, point)
	ctx, cancel := mc.ctx()
	defer cancel()
	if point == "before-submit" {
		cancel()
	} else {
		go cancel() // races the call: it may land before, during or after it
	}
	var res *target.GenerateResult
	var call string
	if what == "publish" {
		res = mc.generate(t, ctx, mc.prod, mc.publishRequest(img))
		call = fmt.Sprintf("Publish(image=%s) cancelled %s", mc.cfg.Images[img].Name, point)
	} else {
		res = mc.generate(t, ctx, mc.cons, mc.consumeRequest(r.ref))
		call = consumeCall(r.ref, "cancelled "+point)
	}
	switch {
	case res.Code() == codes.Canceled || (point == "in-flight" && res.Code() == codes.DeadlineExceeded):
		if len(res.TokenIDs()) > 0 && point == "before-submit" {
			t.Fatalf("%s = %s; want CANCELED before any token (C-1)", call, describe(res))
		}
		if point == "in-flight" {
			if what == "publish" {
				mc.m.orphans++
			} else {
				r.state, mc.m.uncertainConsumes = stateUnknown, mc.m.uncertainConsumes+1
			}
		}
	case point == "in-flight" && res.Code() == codes.OK && what == "publish":
		mc.expectPublished(t, call, res, img)
	case point == "in-flight" && res.Code() == codes.OK && what == "consume":
		if len(res.TokenIDs()) == 0 {
			t.Fatalf("%s = %s; want CANCELED or tokens", call, describe(res))
		}
		r.state, r.unobserved = stateConsumed, true
	default:
		t.Fatalf("%s = %s; want CANCELED (or, in flight, the call's own answer)", call, describe(res))
	}
}

// shutdown shuts the producer or the consumer down: an empty id is
// INVALID_ARGUMENT, a wrong one FAILED_PRECONDITION, the instance's own
// ACCEPTED, a repeat ALREADY_SHUTTING_DOWN (S-1); then every later call to
// that role is checked against S-2.
func (mc *machine) shutdown(t *rapid.T) {
	role := rapid.SampledFrom([]string{"producer", "consumer"}).Draw(t, "role")
	if mc.m.down[role] {
		t.SkipNow() // already down
	}
	mc.step(t, "shutdown %s", role)
	e := mc.engine(role)
	ctx, cancel := mc.ctx()
	defer cancel()
	info, err := e.GetServerInfo(ctx)
	if err != nil || info.GetInstanceId() == "" {
		t.Fatalf("GetServerInfo(%s) = %v, %s; want an instance_id", role, info, statusString(err))
	}
	if _, err := e.Shutdown(ctx, &pb.ShutdownRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Shutdown(%s, expected_instance_id=\"\") = %s; want INVALID_ARGUMENT (S-1)", role, statusString(err))
	}
	if _, err := e.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: info.GetInstanceId() + "-other"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Shutdown(%s, another instance's id) = %s; want FAILED_PRECONDITION (S-1)", role, statusString(err))
	}
	resp, err := e.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: info.GetInstanceId()})
	if err != nil || resp.GetStatus() != pb.ShutdownStatus_SHUTDOWN_STATUS_ACCEPTED {
		t.Fatalf("Shutdown(%s, its own id) = %v, %s; want ACCEPTED (S-1)", role, resp.GetStatus(), statusString(err))
	}
	resp, err = e.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: info.GetInstanceId()})
	if err == nil && resp.GetStatus() != pb.ShutdownStatus_SHUTDOWN_STATUS_ALREADY_SHUTTING_DOWN {
		t.Fatalf("repeated Shutdown(%s) = %s; want ALREADY_SHUTTING_DOWN (S-1)", role, resp.GetStatus())
	} else if err != nil && status.Code(err) != codes.Unavailable {
		t.Fatalf("repeated Shutdown(%s) = %s; want ALREADY_SHUTTING_DOWN (or UNAVAILABLE once the instance stopped listening)", role, statusString(err))
	}
	mc.m.down[role] = true
	if role == "producer" {
		// S-2: the drain releases unconsumed outputs, racing any consume
		// the client sends now.
		for _, r := range mc.m.refs {
			if r.state == stateLive {
				r.state = stateUnknown
			}
		}
	}
}

// stepPrefix starts the log line of every action that ran (not skipped);
// Run counts them as the length of a shrunk failing sequence.
const stepPrefix = "[props] step: "

// step logs one action that runs.
func (mc *machine) step(t *rapid.T, format string, args ...any) {
	t.Helper()
	t.Logf(stepPrefix+format, args...)
}
