package props

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"pgregory.net/rapid"
)

// The lifecycle actions drive what only a target with the baton.* test
// hooks (CONTRACT section 4, README) and the observables can show: an
// encoder step that fails (C-6), an entry left to expire, a publish
// cancelled while its batch is pending (C-2) or once its output is ready
// (C-3, C-7), the counters of the in-engine executor, a preempted
// request, items without content hash (H-2), and, with a fresh
// target per check (Config.Shutdown), a cleanup that fails and the
// references left after a producer's drain (S-2).
func init() { actionSets = append(actionSets, lifecycleActions) }

// Test hook keys of GenerateRequest.extra (CONTRACT section 4, README).
const (
	hookEncoderDelayMs     = "baton.encoder_delay_ms"
	hookEncoderFail        = "baton.encoder_fail"
	hookContextDelayMs     = "baton.context_delay_ms"
	hookPreemptAfterTokens = "baton.preempt_after_tokens"
	hookPreemptMode        = "baton.preempt_mode"
	hookOmitContentHash    = "baton.omit_content_hash"
	hookCleanupFail        = "baton.cleanup_fail"
)

// Observables beyond the three the core invariants read.
const (
	obsBytes          = "encoder.exports.bytes"
	obsCleanupPending = "encoder.cleanup.pending"
	obsLiveBatches    = "encoder.storage.live_batches"
	obsBatchesFormed  = "executor.batches.formed"
	obsBatchedReqs    = "executor.batches.requests"
	obsAdmissions     = "executor.admissions"
	obsContexts       = "executor.contexts.computed"
	obsPreemptions    = "executor.preemptions"
)

// Holds of the lifecycle actions, ms: short, so a check stays fast.
const (
	// occupyHoldMs keeps the encoder busy while the batch under test gathers.
	occupyHoldMs = 100
	// memberHoldMs holds the batch under test; a cancellation sent more
	// than cancelMarginMs before the hold's end certainly lands while its
	// step is pending.
	memberHoldMs   = 300
	cancelMarginMs = 120
	// readyHoldMs holds a publish between its output's ready event and the
	// entry's write; the action cancels it there as soon as it shows, and
	// counts on the cancellation only when sent cancelMarginMs before the
	// hold could have ended (an engine that ignores the cancellation holds
	// it to the end, in every replay while shrinking: keep it short).
	readyHoldMs = 600
	// siblingHoldMs holds a baseline request before its first context step
	// while its batch sibling decodes.
	siblingHoldMs = 200
	// expireTTLMs is the TTL of the expire action's publish.
	expireTTLMs = 100
	// r2Tokens is the length of the preempt action's answers (EOS ignored,
	// so the preemption always lands).
	r2Tokens = 12
)

// lifecycle is the state the lifecycle actions keep beside the model.
type lifecycle struct {
	mc   *machine
	base target.Engine // the aggregated baseline (B-1), nil without one
	// poisoned: a cleanup failed on the producer (X-1, sticky until restart).
	poisoned bool
	// excess0 holds, per role, how far context computations exceeded
	// admissions when the check began (0 on a conforming engine; an
	// earlier check's excess is not this check's failure).
	excess0 map[string]float64
}

// lifecycleActions returns the lifecycle actions a target with test hooks
// and observables can run: two actions that each draw one of their
// scenarios, "lifecycle" the quick ones and "lifecycleHeld" those that hold
// an encoder step or wait for the collector (the baseline's only with a
// baseline engine), so the slow scenarios stay a small share of a check and
// of its replays while shrinking; and, only with a fresh target per check
// (Config.Shutdown), the X-1 and S-2 ones.
func lifecycleActions(mc *machine) map[string]func(*rapid.T) {
	if !mc.profile.TestHooks || !mc.profile.Observables {
		return nil
	}
	if _, faults := mc.tg.(target.FaultInjector); faults {
		// A fault-injecting target's checks belong to its own fault
		// actions: the held scenarios would only slow them down.
		return nil
	}
	lc := &lifecycle{mc: mc, excess0: map[string]float64{}}
	if base, ok := mc.tg.Engine(target.RoleBaseline); ok {
		lc.base = base
	}
	quick := map[string]func(*rapid.T){
		"encoderFail":    lc.encoderFail,
		"consumeCounted": lc.consumeCounted,
		"hashless":       lc.hashless,
	}
	held := map[string]func(*rapid.T){
		"expire":              lc.expire,
		"cancelInBatch":       lc.cancelInBatch,
		"cancelBeforeContext": lc.cancelBeforeContext,
	}
	if lc.base != nil {
		quick["preempt"] = lc.preempt
		held["baselineBatch"] = lc.baselineBatch
	}
	acts := map[string]func(*rapid.T){
		"":              lc.contextsInvariant,
		"lifecycle":     drawScenario(quick),
		"lifecycleHeld": drawScenario(held),
	}
	if mc.cfg.Shutdown {
		acts["cleanupFail"] = lc.cleanupFail
		acts["drainReleases"] = lc.drainReleases
	}
	return acts
}

// contextsInvariant: on every engine that decodes and counts them, the
// context computations from encoder outputs never outnumber the
// admissions (R-1: exactly once per admission; an admission that ends
// before its first context step computes none).
func (lc *lifecycle) contextsInvariant(t *rapid.T) {
	mc := lc.mc
	for _, e := range []struct {
		role string
		e    target.Engine
	}{{"consumer", mc.cons}, {"baseline", lc.base}} {
		if e.e == nil || mc.m.down[e.role] {
			continue
		}
		ctx, cancel := mc.ctx()
		info, err := e.e.GetLoad(ctx)
		cancel()
		if err != nil {
			t.Fatalf("GetLoad(%s) = %s; want the observables the profile declares", e.role, statusString(err))
		}
		f := info.GetAttributes().GetFields()
		adm, ok1 := f[obsAdmissions]
		computed, ok2 := f[obsContexts]
		if !ok1 || !ok2 {
			continue
		}
		excess := computed.GetNumberValue() - adm.GetNumberValue()
		x0, seen := lc.excess0[e.role]
		if !seen {
			lc.excess0[e.role], x0 = max(excess, 0), max(excess, 0)
		}
		if excess > x0 {
			t.Fatalf("GetLoad(%s) %s grew past %s in this check; want at most one context computation per admission (R-1)", e.role, obsContexts, obsAdmissions)
		}
	}
}

// drawScenario returns an action that draws one of scenarios and runs it.
func drawScenario(scenarios map[string]func(*rapid.T)) func(*rapid.T) {
	names := make([]string, 0, len(scenarios))
	for n := range scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	return func(t *rapid.T) { scenarios[rapid.SampledFrom(names).Draw(t, "scenario")](t) }
}

// baselineAnswers caches, per baseline engine, its answer for each image
// (Config.Images index, the consume's prompt and stopping): the baseline
// is deterministic, and asking it again in every check would make each
// check, and each replay while shrinking, slower.
// r2Answers holds, the same way, the uninterrupted answer of the preempt
// scenario's request (r2Tokens tokens, EOS ignored).
var (
	baselineMu      sync.Mutex
	baselineAnswers = map[target.Engine]map[int][]uint32{}
	r2Answers       = map[target.Engine]map[int]*target.GenerateResult{}
)

// --- helpers --------------------------------------------------------------------

// withHooks sets req's test hooks.
func withHooks(req *pb.GenerateRequest, hooks map[string]any) *pb.GenerateRequest {
	s, err := structpb.NewStruct(hooks)
	if err != nil {
		panic(err)
	}
	req.Extra = s
	return req
}

// load reads e's GetLoad attributes keys; a missing one skips the action
// (a target with test hooks need not count what the reference engine
// counts), so call it before the action changes anything.
func (lc *lifecycle) load(t *rapid.T, role string, e target.Engine, keys ...string) map[string]float64 {
	t.Helper()
	ctx, cancel := lc.mc.ctx()
	defer cancel()
	info, err := e.GetLoad(ctx)
	if err != nil {
		t.Fatalf("GetLoad(%s) = %s; want the observables the profile declares", role, statusString(err))
	}
	out := map[string]float64{"running": float64(info.GetRunningRequests())}
	for _, k := range keys {
		v, ok := info.GetAttributes().GetFields()[k]
		if !ok {
			t.Skipf("GetLoad(%s) has no %s", role, k)
		}
		out[k] = v.GetNumberValue()
	}
	return out
}

// mustLoad is load once the action started: a missing key fails.
func (lc *lifecycle) mustLoad(t *rapid.T, role string, e target.Engine, keys ...string) map[string]float64 {
	t.Helper()
	ctx, cancel := lc.mc.ctx()
	defer cancel()
	info, err := e.GetLoad(ctx)
	if err != nil {
		t.Fatalf("GetLoad(%s) = %s; want the observables the profile declares", role, statusString(err))
	}
	out := map[string]float64{"running": float64(info.GetRunningRequests())}
	for _, k := range keys {
		v, ok := info.GetAttributes().GetFields()[k]
		if !ok {
			t.Fatalf("GetLoad(%s) lacks %s, which it reported before", role, k)
		}
		out[k] = v.GetNumberValue()
	}
	return out
}

// quiesce waits (bounded by SettleTimeout) until neither role runs a
// request (a publish or consume cancelled in flight may still be ending),
// then lets the producer look at every claim it has not seen (an Abort of
// each consumed reference, SU-3), so its table only shrinks from here on
// (entries of uncertain outcomes leaving) unless the engine adds one.
func (lc *lifecycle) quiesce(t *rapid.T) {
	t.Helper()
	mc := lc.mc
	deadline := time.Now().Add(mc.cfg.SettleTimeout)
	for _, role := range []string{"producer", "consumer"} {
		if mc.m.down[role] {
			continue
		}
		for {
			n := lc.load(t, role, mc.engine(role))["running"]
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GetLoad(%s) running_requests = %v %v after every call returned; want 0 (C-1, C-4: a cancelled request ends)", role, n, mc.cfg.SettleTimeout)
			}
			waitPoll()
		}
	}
	if mc.m.down["producer"] {
		return
	}
	for _, r := range mc.m.refs {
		if r.unobserved && r.state == stateConsumed {
			mc.releaseRef(t, r, "so the producer sees its claim")
		}
	}
	mc.m.uncertainConsumes = 0
}

// promptWithin bounds how long a counter may lag behind once e runs no
// request: what a request gives back it gives back before it ends.
const promptWithin = 100 * time.Millisecond

// settleAtMost waits (bounded by SettleTimeout) until e runs no request,
// then polls it until every key is at most its value in want, or
// promptWithin passes; it returns the last values and whether they settled.
func (lc *lifecycle) settleAtMost(t *rapid.T, role string, e target.Engine, want map[string]float64, keys ...string) (map[string]float64, bool) {
	t.Helper()
	idle := time.Now().Add(lc.mc.cfg.SettleTimeout)
	for lc.mustLoad(t, role, e)["running"] > 0 && time.Now().Before(idle) {
		waitPoll()
	}
	deadline := time.Now().Add(promptWithin)
	for {
		got := lc.mustLoad(t, role, e, keys...)
		ok := true
		for _, k := range keys {
			ok = ok && got[k] <= want[k]
		}
		if ok || time.Now().After(deadline) {
			return got, ok
		}
		waitPoll()
	}
}

// diff renders the keys whose values in got exceed want, as increases:
// a failure's message must be the same in every replay of a shrinking
// check (rapid compares them), and a shared target's absolute counters
// move from one check to the next.
func diff(want, got map[string]float64, keys ...string) string {
	s := ""
	for _, k := range keys {
		if got[k] > want[k] {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%s +%v", k, got[k]-want[k])
		}
	}
	return s
}

// refCall names a call on r by its image, not its opaque state (random in
// every replay: see diff).
func (lc *lifecycle) refCall(what string, r *refRecord, note string) string {
	return fmt.Sprintf("%s(reference to %s, %s)", what, lc.mc.cfg.Images[r.image].Name, note)
}

// baselineRequest is the consume's question asked of the baseline with img
// as media: the same prompt and stopping (B-1).
func (lc *lifecycle) baselineRequest(img int) *pb.GenerateRequest {
	mc := lc.mc
	im := mc.cfg.Images[img]
	return &pb.GenerateRequest{
		RequestId: newRequestID("props-baseline"),
		Model:     mc.profile.Model,
		Input:     &pb.GenerateRequest_Prompt{Prompt: mc.cfg.Prompt},
		Stopping:  &pb.StoppingOptions{MaxTokens: proto.Uint32(maxTokens)},
		Media:     []*pb.MediaItem{{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: im.Data}, MimeType: "image/" + im.Format}},
	}
}

// expected returns the answer the model expects for img: the first answer
// a consume of img got, else the baseline's (B-1), which becomes the
// model's; ok is false without either.
func (lc *lifecycle) expected(t *rapid.T, img int) (ids []uint32, from string, ok bool) {
	t.Helper()
	mc := lc.mc
	if ids, ok := mc.m.answers[img]; ok {
		return ids, "an earlier consume of " + mc.cfg.Images[img].Name, true
	}
	if lc.base == nil {
		return nil, "", false
	}
	from = "the baseline's answer for " + mc.cfg.Images[img].Name
	baselineMu.Lock()
	ids, ok = baselineAnswers[lc.base][img]
	baselineMu.Unlock()
	if ok {
		mc.m.answers[img] = ids
		return ids, from, true
	}
	ctx, cancel := mc.ctx()
	defer cancel()
	res := mc.generate(t, ctx, lc.base, lc.baselineRequest(img))
	if res.Code() != codes.OK || len(res.TokenIDs()) == 0 {
		t.Fatalf("Baseline(image=%s) = %s; want tokens (B-1)", mc.cfg.Images[img].Name, brief(res))
	}
	mc.m.answers[img] = res.TokenIDs()
	baselineMu.Lock()
	if baselineAnswers[lc.base] == nil {
		baselineAnswers[lc.base] = map[int][]uint32{}
	}
	baselineAnswers[lc.base][img] = res.TokenIDs()
	baselineMu.Unlock()
	return res.TokenIDs(), from, true
}

// consumeChecked consumes the live reference r: tokens (SU-1), the answer
// the model expects for its image (rule names what would shift it), and on
// the consumer one context computation per admission. Call it with
// no other request running on the consumer (quiesce).
func (lc *lifecycle) consumeChecked(t *rapid.T, r *refRecord, rule, note string) {
	t.Helper()
	mc := lc.mc
	want, from, haveWant := lc.expected(t, r.image)
	before := lc.load(t, "consumer", mc.cons, obsAdmissions, obsContexts)
	ctx, cancel := mc.ctx()
	defer cancel()
	res := mc.generate(t, ctx, mc.cons, mc.consumeRequest(r.ref))
	call := lc.refCall("Consume", r, note)
	if res.Code() != codes.OK || len(res.TokenIDs()) == 0 {
		t.Fatalf("%s = %s; want tokens (a live reference, SU-1)", call, brief(res))
	}
	r.state, r.unobserved = stateConsumed, true
	ids := res.TokenIDs()
	if haveWant && !equalIDs(ids, want) {
		// Where the expected answer came from is logged, not part of the
		// message: rapid shrinks only while a replay fails with the same
		// message, and a shorter sequence takes it from the baseline.
		t.Logf("detail: the expected answer is %s", from)
		t.Fatalf("%s = tokens %v; want %v, the answer of its image (%s)", call, ids, want, rule)
	}
	mc.m.answers[r.image] = ids
	after := lc.mustLoad(t, "consumer", mc.cons, obsAdmissions, obsContexts)
	adm, computed := after[obsAdmissions]-before[obsAdmissions], after[obsContexts]-before[obsContexts]
	if adm < 1 || computed != adm {
		t.Fatalf("%s: GetLoad(consumer) %s +%v, %s +%v; want one context computation per admission (R-1)", call, obsAdmissions, adm, obsContexts, computed)
	}
}

// expectHashless checks the answer to a publish with
// baton.omit_content_hash (OK, one EncoderReady of one item, no token) and
// records its reference for img.
func (lc *lifecycle) expectHashless(t *rapid.T, call string, res *target.GenerateResult, img int) *refRecord {
	t.Helper()
	ready := res.EncoderReady()
	if res.Code() != codes.OK || ready == nil || len(ready.GetItems()) != 1 || len(res.TokenIDs()) > 0 {
		t.Fatalf("%s = %s; want OK with one EncoderReady of one item and no tokens", call, brief(res))
	}
	r := &refRecord{ref: ready.GetRef(), image: img, state: stateLive}
	lc.mc.m.refs = append(lc.mc.m.refs, r)
	return r
}

// heldCall is one request started in the background.
type heldCall struct {
	cancel   context.CancelFunc
	done     chan *target.GenerateResult
	finished atomic.Bool
	err      error
}

// start sends req to e in the background and waits (bounded by
// SettleTimeout) until e's running_requests shows it or it ended.
func (lc *lifecycle) start(t *rapid.T, role string, e target.Engine, req *pb.GenerateRequest) *heldCall {
	t.Helper()
	base := lc.mustLoad(t, role, e)["running"]
	ctx, cancel := lc.mc.ctx()
	c := &heldCall{cancel: cancel, done: make(chan *target.GenerateResult, 1)}
	go func() {
		res, err := e.Generate(ctx, req)
		c.err = err
		c.finished.Store(true)
		c.done <- res
	}()
	deadline := time.Now().Add(lc.mc.cfg.SettleTimeout)
	for !c.finished.Load() && lc.mustLoad(t, role, e)["running"] <= base && time.Now().Before(deadline) {
		waitPoll()
	}
	return c
}

// wait returns c's result; a harness failure fails the check.
func (c *heldCall) wait(t *rapid.T, call string) *target.GenerateResult {
	t.Helper()
	res := <-c.done
	c.cancel()
	if c.err != nil || res == nil || res.Status == nil {
		t.Fatalf("%s: harness error %v", call, c.err)
	}
	return res
}

// inOneBatch starts occupy, held occupyHoldMs so the encoder is busy, then,
// once its batch formed, reqs while it is, and waits until e reports the batch of reqs formed
// behind occupy's. together is true when that batch holds exactly reqs
// (executor.batches.formed +2, executor.batches.requests +1+len(reqs));
// notBefore is a time the batch certainly formed after (the occupier's
// hold from its sending, or the sending of the last GetLoad that showed
// it not formed yet).
func (lc *lifecycle) inOneBatch(t *rapid.T, role string, e target.Engine, occupy *pb.GenerateRequest, reqs ...*pb.GenerateRequest) (calls []*heldCall, together bool, notBefore time.Time) {
	t.Helper()
	before := lc.load(t, role, e, obsBatchesFormed, obsBatchedReqs)
	notBefore = time.Now().Add(occupyHoldMs * time.Millisecond)
	calls = append(calls, lc.start(t, role, e, withHooks(occupy, map[string]any{hookEncoderDelayMs: occupyHoldMs})))
	deadline := time.Now().Add(lc.mc.cfg.SettleTimeout)
	// The occupier's batch first, alone, so reqs queue behind it.
	for lc.mustLoad(t, role, e, obsBatchesFormed)[obsBatchesFormed] < before[obsBatchesFormed]+1 && !calls[0].finished.Load() && time.Now().Before(deadline) {
		waitPoll()
	}
	for _, req := range reqs {
		calls = append(calls, lc.start(t, role, e, req))
	}
	for {
		sent := time.Now()
		c := lc.mustLoad(t, role, e, obsBatchesFormed, obsBatchedReqs)
		if c[obsBatchesFormed] >= before[obsBatchesFormed]+2 {
			return calls, c[obsBatchesFormed] == before[obsBatchesFormed]+2 && c[obsBatchedReqs] == before[obsBatchedReqs]+1+float64(len(reqs)), notBefore
		}
		if sent.After(notBefore) {
			notBefore = sent
		}
		if time.Now().After(deadline) {
			return calls, false, notBefore
		}
		waitPoll()
	}
}

// --- actions ----------------------------------------------------------------------

// encoderFail publishes with baton.encoder_fail: one terminal error, no
// EncoderReady or token, and everything the publish reserved given back
// (entries, bytes, batch storage, cleanup tasks); the producer stays READY
// (C-6, checked by the invariants after the action).
func (lc *lifecycle) encoderFail(t *rapid.T) {
	mc := lc.mc
	if mc.m.down["producer"] {
		t.SkipNow()
	}
	img := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "image")
	keys := []string{obsEntries, obsBytes, obsLiveBatches, obsCleanupPending}
	lc.load(t, "producer", mc.prod, keys...)
	mc.step(t, "publish %s whose encoder step fails", mc.cfg.Images[img].Name)
	lc.quiesce(t)
	before := lc.mustLoad(t, "producer", mc.prod, keys...)
	ctx, cancel := mc.ctx()
	defer cancel()
	res := mc.generate(t, ctx, mc.prod, withHooks(mc.publishRequest(img), map[string]any{hookEncoderFail: true}))
	call := fmt.Sprintf("Publish(image=%s, %s)", mc.cfg.Images[img].Name, hookEncoderFail)
	if res.Code() == codes.OK || res.EncoderReady() != nil || len(res.TokenIDs()) > 0 {
		t.Fatalf("%s = %s; want one terminal error and no EncoderReady or token (C-6)", call, brief(res))
	}
	if got, ok := lc.settleAtMost(t, "producer", mc.prod, before, keys...); !ok {
		t.Fatalf("%s failed, yet GetLoad(producer) %s %v after it ended; want everything it reserved given back (C-6)", call, diff(before, got, keys...), promptWithin)
	}
}

// expire publishes with a short TTL and sends nothing more: the entry
// leaves the producer's table within CollectWithin of its TTL without any
// Abort; the reference is then spent (a consume INVALID_ARGUMENT,
// SU-2; an Abort ALREADY_FINISHED, SU-3).
func (lc *lifecycle) expire(t *rapid.T) {
	mc := lc.mc
	if mc.m.down["producer"] || mc.m.count(stateLive) >= mc.cfg.MaxLive {
		t.SkipNow()
	}
	img := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "image")
	mc.step(t, "publish %s with ttl_ms %d and let it expire", mc.cfg.Images[img].Name, expireTTLMs)
	lc.quiesce(t)
	before := lc.mustLoad(t, "producer", mc.prod, obsEntries)
	req := mc.publishRequest(img)
	req.GetEncoder().GetPublish().TtlMs = proto.Uint32(expireTTLMs)
	ctx, cancel := mc.ctx()
	defer cancel()
	published := time.Now()
	res := mc.generate(t, ctx, mc.prod, req)
	call := fmt.Sprintf("Publish(image=%s, ttl_ms=%d)", mc.cfg.Images[img].Name, expireTTLMs)
	mc.expectPublished(t, call, res, img)
	r := mc.m.refs[len(mc.m.refs)-1]
	bound := expireTTLMs*time.Millisecond + mc.cfg.CollectWithin
	for {
		got := lc.mustLoad(t, "producer", mc.prod, obsEntries)
		if got[obsEntries] <= before[obsEntries] {
			break
		}
		if time.Since(published) > bound {
			t.Fatalf("%s: GetLoad(producer) %s still +%v %v past the TTL, no Abort sent; want the expired entry collected (X-2)",
				call, obsEntries, got[obsEntries]-before[obsEntries], mc.cfg.CollectWithin)
		}
		waitPoll()
	}
	r.state = stateReleased // expired and collected: spent
}

// cancelInBatch publishes two or three images in one encoder batch behind
// an occupying publish and cancels one of them while the batch's step is
// pending: the cancelled one gets no EncoderReady and leaves no entry (a
// late completion does not revive it), its siblings' references give the
// answers their images give without the cancellation, and the batch's
// storage is freed once every view is gone (C-2, C-3).
func (lc *lifecycle) cancelInBatch(t *rapid.T) {
	mc := lc.mc
	n := rapid.IntRange(2, 3).Draw(t, "members")
	if mc.m.down["producer"] || mc.m.down["consumer"] || mc.m.count(stateLive)+n+1 > mc.cfg.MaxLive {
		t.SkipNow()
	}
	occ := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "occupier")
	imgs := make([]int, n)
	names := make([]string, n)
	for i := range imgs {
		imgs[i] = rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "image")
		names[i] = mc.cfg.Images[imgs[i]].Name
	}
	victim := rapid.IntRange(0, n-1).Draw(t, "cancelled")
	keys := []string{obsEntries, obsLiveBatches}
	lc.load(t, "producer", mc.prod, append(keys, obsBatchesFormed, obsBatchedReqs)...)
	lc.load(t, "consumer", mc.cons, obsAdmissions, obsContexts)
	mc.step(t, "publish %v in one batch, cancel %s while its step is pending", names, names[victim])
	for _, img := range imgs {
		lc.expected(t, img) // before the batch: the baseline runs alone
	}
	lc.quiesce(t)
	before := lc.mustLoad(t, "producer", mc.prod, keys...)
	// The members publish without content hash: the consumer then gives
	// each item a fresh identity (H-2), so its answer comes from the
	// embeddings the batch scattered, never from a prefix cache keyed by
	// the image's hash.
	reqs := make([]*pb.GenerateRequest, n)
	for i, img := range imgs {
		reqs[i] = withHooks(mc.publishRequest(img), map[string]any{hookEncoderDelayMs: memberHoldMs, hookOmitContentHash: true})
	}
	calls, together, notBefore := lc.inOneBatch(t, "producer", mc.prod, mc.publishRequest(occ), reqs...)
	calls[1+victim].cancel()
	// Certain only when the cancellation was sent well inside the step's
	// hold, which began when the batch formed.
	certain := together && time.Since(notBefore) < (memberHoldMs-cancelMarginMs)*time.Millisecond
	res := make([]*target.GenerateResult, len(calls))
	for i, c := range calls {
		res[i] = c.wait(t, "publish in one batch")
	}
	defer func() {
		// A failure below leaves the batch's other entries out of the
		// model: release them too, so replays do not fill the quota (L-5).
		if t.Failed() {
			ctx, cancel := mc.ctx()
			defer cancel()
			for _, r := range res {
				if ready := r.EncoderReady(); ready != nil {
					_, _ = mc.prod.Abort(ctx, abortRequest(ready.GetRef()))
				}
			}
		}
	}()
	mc.expectPublished(t, fmt.Sprintf("Publish(image=%s) occupying the encoder", mc.cfg.Images[occ].Name), res[0], occ)
	vcall := fmt.Sprintf("Publish(image=%s) cancelled while its batch with %v was pending", names[victim], names)
	switch {
	case res[1+victim].Code() == codes.OK && !certain:
		lc.expectHashless(t, vcall, res[1+victim], imgs[victim]) // the cancellation came too late
	case res[1+victim].EncoderReady() != nil:
		t.Fatalf("%s = %s; want no EncoderReady (C-2: a late completion must not revive it)", vcall, brief(res[1+victim]))
	case res[1+victim].Code() != codes.Canceled && res[1+victim].Code() != codes.DeadlineExceeded:
		t.Fatalf("%s = %s; want CANCELED (C-2)", vcall, brief(res[1+victim]))
	case !certain:
		mc.m.orphans++ // it may have been answered as the cancellation arrived
	}
	var siblings []*refRecord
	for i := range imgs {
		if i == victim {
			continue
		}
		call := fmt.Sprintf("Publish(image=%s), batched with the cancelled %s", names[i], names[victim])
		siblings = append(siblings, lc.expectHashless(t, call, res[1+i], imgs[i]))
	}
	lc.quiesce(t)
	if certain {
		// Every publish of the batch has ended: the table holds the
		// occupier and the siblings, nothing for the cancelled one.
		want := map[string]float64{obsEntries: before[obsEntries] + float64(1+len(siblings))}
		if got := lc.mustLoad(t, "producer", mc.prod, obsEntries); got[obsEntries] > want[obsEntries] {
			t.Fatalf("%s: GetLoad(producer) %s +%v once every publish ended; want at most +%d, the occupier and the %d siblings (C-2: a late completion must not revive the cancelled publish)",
				vcall, obsEntries, got[obsEntries]-before[obsEntries], 1+len(siblings), len(siblings))
		}
	}
	for _, r := range siblings {
		lc.consumeChecked(t, r, "C-2: siblings produce exactly what they produce without the cancellation",
			fmt.Sprintf("%s, batched with the cancelled %s", mc.cfg.Images[r.image].Name, names[victim]))
	}
	if got, ok := lc.settleAtMost(t, "producer", mc.prod, before, obsLiveBatches); !ok {
		t.Fatalf("after the batch of %v (one cancelled) ended: GetLoad(producer) %s %v later; want the batch's storage freed once its last view is gone (C-3)",
			names, diff(before, got, obsLiveBatches), promptWithin)
	}
}

// cancelBeforeContext holds a publish between its output's ready event and
// the entry's write (baton.context_delay_ms) and cancels it there: no
// EncoderReady, no entry, the batch storage freed (C-3; C-7, the client
// never got EncoderReady).
func (lc *lifecycle) cancelBeforeContext(t *rapid.T) {
	mc := lc.mc
	if mc.m.down["producer"] {
		t.SkipNow()
	}
	img := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "image")
	keys := []string{obsEntries, obsBytes, obsLiveBatches}
	lc.load(t, "producer", mc.prod, keys...)
	mc.step(t, "publish %s, cancel it once its output is ready", mc.cfg.Images[img].Name)
	lc.quiesce(t)
	before := lc.mustLoad(t, "producer", mc.prod, keys...)
	call := fmt.Sprintf("Publish(image=%s, %s=%d) cancelled once its output showed", mc.cfg.Images[img].Name, hookContextDelayMs, readyHoldMs)
	sent := time.Now()
	c := lc.start(t, "producer", mc.prod, withHooks(mc.publishRequest(img), map[string]any{hookContextDelayMs: readyHoldMs}))
	deadline := time.Now().Add(mc.cfg.SettleTimeout)
	for lc.mustLoad(t, "producer", mc.prod, obsLiveBatches)[obsLiveBatches] <= before[obsLiveBatches] && !c.finished.Load() {
		if time.Now().After(deadline) {
			c.cancel()
			t.Fatalf("%s: GetLoad(producer) %s never rose within %v; want the held output's storage to show (the profile declares test hooks)", call, obsLiveBatches, mc.cfg.SettleTimeout)
		}
		waitPoll()
	}
	c.cancel()
	certain := time.Since(sent) < (readyHoldMs-cancelMarginMs)*time.Millisecond
	res := c.wait(t, call)
	switch {
	case !certain && res.Code() == codes.OK:
		mc.expectPublished(t, call, res, img) // the cancellation came too late
		return
	case !certain:
		mc.m.orphans++ // it may have been answered as the cancellation arrived
		return
	case res.Code() != codes.Canceled || res.EncoderReady() != nil:
		t.Fatalf("%s = %s; want CANCELED without EncoderReady (C-3, C-7)", call, brief(res))
	}
	lc.quiesce(t)
	if got, ok := lc.settleAtMost(t, "producer", mc.prod, before, keys...); !ok {
		t.Fatalf("%s: GetLoad(producer) %s %v after it ended; want the unconsumed output released and its storage freed (C-3; C-7: nobody can consume it)",
			call, diff(before, got, keys...), promptWithin)
	}
}

// consumeCounted consumes a live reference with the lifecycle checks: the
// model's answer for its image and one context computation per admission
//
func (lc *lifecycle) consumeCounted(t *rapid.T) {
	mc := lc.mc
	if mc.m.down["consumer"] {
		t.SkipNow()
	}
	r := mc.pick(t, "ref", stateLive)
	lc.load(t, "consumer", mc.cons, obsAdmissions, obsContexts)
	mc.step(t, "consume %s counting context computations", refLabel(r.ref))
	lc.quiesce(t)
	lc.consumeChecked(t, r, "B-1: the same image with the same prompt", "counted")
}

// hashless publishes an image without content hash
// (baton.omit_content_hash) and consumes it at once: the consumer gives
// the item a fresh identity, so the answer is the image's own, never one
// the prefix cache kept for the same placeholder tokens (H-2).
func (lc *lifecycle) hashless(t *rapid.T) {
	mc := lc.mc
	if mc.m.down["producer"] || mc.m.down["consumer"] {
		t.SkipNow()
	}
	img := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "image")
	lc.load(t, "consumer", mc.cons, obsAdmissions, obsContexts)
	mc.step(t, "publish %s without content hash and consume it", mc.cfg.Images[img].Name)
	lc.expected(t, img)
	lc.quiesce(t)
	ctx, cancel := mc.ctx()
	defer cancel()
	res := mc.generate(t, ctx, mc.prod, withHooks(mc.publishRequest(img), map[string]any{hookOmitContentHash: true}))
	call := fmt.Sprintf("Publish(image=%s, %s)", mc.cfg.Images[img].Name, hookOmitContentHash)
	ready := res.EncoderReady()
	r := lc.expectHashless(t, call, res, img)
	note := "without content hash"
	if h := ready.GetItems()[0].GetContentHash(); h != "" {
		note = "content hash published despite " + hookOmitContentHash
	}
	lc.consumeChecked(t, r, "H-2: an item without content hash gets a fresh identity, never a cache entry keyed by its placeholder tokens", note)
}

// preempt asks the baseline for an image's answer preempted after a drawn
// number of tokens, as pause-and-resume or as full reset: token for token
// the uninterrupted answer with equal usage, one preemption, and one
// context computation per admission.
func (lc *lifecycle) preempt(t *rapid.T) {
	mc := lc.mc
	img := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "image")
	after := rapid.IntRange(1, r2Tokens-2).Draw(t, "after tokens")
	mode := rapid.SampledFrom([]string{"pause", "reset"}).Draw(t, "mode")
	keys := []string{obsAdmissions, obsContexts, obsPreemptions}
	lc.load(t, "baseline", lc.base, keys...)
	mc.step(t, "baseline %s preempted after %d tokens (%s)", mc.cfg.Images[img].Name, after, mode)
	request := func() *pb.GenerateRequest {
		req := lc.baselineRequest(img)
		req.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(r2Tokens), IgnoreEos: proto.Bool(true)}
		return req
	}
	ctx, cancel := mc.ctx()
	defer cancel()
	baselineMu.Lock()
	uninterrupted, ok := r2Answers[lc.base][img]
	baselineMu.Unlock()
	if !ok {
		uninterrupted = mc.generate(t, ctx, lc.base, request())
		if uninterrupted.Code() != codes.OK || len(uninterrupted.TokenIDs()) != r2Tokens {
			t.Fatalf("Baseline(image=%s, %d tokens, EOS ignored) = %s; want %d tokens", mc.cfg.Images[img].Name, r2Tokens, brief(uninterrupted), r2Tokens)
		}
		baselineMu.Lock()
		if r2Answers[lc.base] == nil {
			r2Answers[lc.base] = map[int]*target.GenerateResult{}
		}
		r2Answers[lc.base][img] = uninterrupted
		baselineMu.Unlock()
	}
	want, wantUsage := uninterrupted.TokenIDs(), uninterrupted.Usage()
	before := lc.mustLoad(t, "baseline", lc.base, keys...)
	res := mc.generate(t, ctx, lc.base, withHooks(request(), map[string]any{hookPreemptAfterTokens: after, hookPreemptMode: mode}))
	call := fmt.Sprintf("Baseline(image=%s) preempted after %d tokens (%s)", mc.cfg.Images[img].Name, after, mode)
	if res.Code() != codes.OK || !equalIDs(res.TokenIDs(), want) {
		t.Fatalf("%s = %s, tokens %v; want the uninterrupted answer %v (R-2)", call, brief(res), res.TokenIDs(), want)
	}
	if !proto.Equal(res.Usage(), wantUsage) {
		t.Fatalf("%s: usage %v; want the uninterrupted run's %v (R-2)", call, res.Usage(), wantUsage)
	}
	got := lc.mustLoad(t, "baseline", lc.base, keys...)
	adm, computed, pre := got[obsAdmissions]-before[obsAdmissions], got[obsContexts]-before[obsContexts], got[obsPreemptions]-before[obsPreemptions]
	if pre != 1 {
		t.Fatalf("%s: GetLoad(baseline) %s +%v; want +1 (the profile declares test hooks: %s)", call, obsPreemptions, pre, hookPreemptAfterTokens)
	}
	if adm < 1 || computed != adm {
		t.Fatalf("%s: GetLoad(baseline) %s +%v, %s +%v; want one context computation per admission (R-1)", call, obsAdmissions, adm, obsContexts, computed)
	}
}

// baselineBatch puts two baseline requests in one encoder batch: one
// decodes (releasing its view after every step) while the other is held
// before its first context step; each gets its image's answer and the
// batch's storage is freed once both ended (C-3: release is idempotent,
// and the storage goes only with its last view).
func (lc *lifecycle) baselineBatch(t *rapid.T) {
	mc := lc.mc
	a := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "decoding")
	b := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "held")
	occ := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "occupier")
	lc.load(t, "baseline", lc.base, obsLiveBatches, obsBatchesFormed, obsBatchedReqs)
	mc.step(t, "baseline %s and %s in one batch, %s held before its first context step", mc.cfg.Images[a].Name, mc.cfg.Images[b].Name, mc.cfg.Images[b].Name)
	for _, img := range []int{a, b, occ} {
		lc.expected(t, img)
	}
	before := lc.mustLoad(t, "baseline", lc.base, obsLiveBatches)
	held := withHooks(lc.baselineRequest(b), map[string]any{hookContextDelayMs: siblingHoldMs})
	calls, _, _ := lc.inOneBatch(t, "baseline", lc.base, lc.baselineRequest(occ), lc.baselineRequest(a), held)
	for i, img := range []int{occ, a, b} {
		what := []string{"occupying the encoder", "decoding beside " + mc.cfg.Images[b].Name, "held before its first context step while " + mc.cfg.Images[a].Name + " decoded"}[i]
		call := fmt.Sprintf("Baseline(image=%s, %s)", mc.cfg.Images[img].Name, what)
		res := calls[i].wait(t, call)
		want, from, _ := lc.expected(t, img)
		if res.Code() != codes.OK || !equalIDs(res.TokenIDs(), want) {
			t.Fatalf("%s = %s, tokens %v; want %v, %s (C-3: the batch's storage stays until its last view is gone)", call, brief(res), res.TokenIDs(), want, from)
		}
	}
	if got, ok := lc.settleAtMost(t, "baseline", lc.base, before, obsLiveBatches); !ok {
		t.Fatalf("after a batch of two baseline requests ended: GetLoad(baseline) %s %v later; want its storage freed (C-3)", diff(before, got, obsLiveBatches), promptWithin)
	}
}

// cleanupFail publishes with baton.cleanup_fail and releases the entry, so
// its removal fails: Health NOT_READY with a reason and a new publish
// UNAVAILABLE with a reason, sticky. The producer then counts as
// down for the rest of the check.
func (lc *lifecycle) cleanupFail(t *rapid.T) {
	mc := lc.mc
	if mc.m.down["producer"] {
		t.SkipNow()
	}
	img := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "image")
	mc.step(t, "publish %s whose cleanup fails, release it", mc.cfg.Images[img].Name)
	ctx, cancel := mc.ctx()
	defer cancel()
	call := fmt.Sprintf("Publish(image=%s, %s)", mc.cfg.Images[img].Name, hookCleanupFail)
	res := mc.generate(t, ctx, mc.prod, withHooks(mc.publishRequest(img), map[string]any{hookCleanupFail: true}))
	mc.expectPublished(t, call, res, img)
	r := mc.m.refs[len(mc.m.refs)-1]
	_, abortErr := mc.prod.Abort(ctx, abortRequest(r.ref))
	r.state, r.unobserved = stateReleased, false
	t.Logf("Abort(%s) whose cleanup fails = %s", refLabel(r.ref), statusString(abortErr))
	health, err := mc.prod.Health(ctx)
	if err != nil {
		t.Fatalf("Health(producer) after a failed cleanup = %s; want NOT_READY with a reason (X-1)", statusString(err))
	}
	reason := false
	for _, c := range health.GetChecks() {
		reason = reason || (c.GetState() != pb.HealthState_HEALTH_STATE_READY && c.GetMessage() != "")
	}
	if health.GetState() != pb.HealthState_HEALTH_STATE_NOT_READY || !reason {
		t.Fatalf("Health(producer) after a failed cleanup = %s (a failing check with a reason: %v); want NOT_READY with a reason (X-1: a failed cleanup is never swallowed)", health.GetState(), reason)
	}
	next := mc.generate(t, ctx, mc.prod, mc.publishRequest(img))
	if next.Code() != codes.Unavailable || next.Status.Message() == "" || next.EncoderReady() != nil {
		t.Fatalf("Publish(image=%s) after a failed cleanup = %s; want UNAVAILABLE with a reason (X-1)", mc.cfg.Images[img].Name, brief(next))
	}
	lc.poisoned = true
	mc.m.down["producer"] = true // refuses every Generate until restart
}

// drainReleases publishes an image, shuts the producer down with its own
// instance id (ACCEPTED, S-1), waits until the drain ended (the producer
// stopped answering) and consumes every reference of the check: whatever
// its state was, it is spent now (S-2: unconsumed outputs are released and
// every pending cleanup completes before exit), so INVALID_ARGUMENT (or,
// for a transfer backend, UNAVAILABLE) before any token.
func (lc *lifecycle) drainReleases(t *rapid.T) {
	mc := lc.mc
	if mc.m.down["producer"] || mc.m.down["consumer"] || mc.m.count(stateLive) >= mc.cfg.MaxLive {
		t.SkipNow()
	}
	img := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "image")
	mc.step(t, "publish %s, shut the producer down, consume every reference once it drained", mc.cfg.Images[img].Name)
	ctx, cancel := mc.ctx()
	defer cancel()
	res := mc.generate(t, ctx, mc.prod, mc.publishRequest(img))
	mc.expectPublished(t, fmt.Sprintf("Publish(image=%s)", mc.cfg.Images[img].Name), res, img)
	info, err := mc.prod.GetServerInfo(ctx)
	if err != nil || info.GetInstanceId() == "" {
		t.Fatalf("GetServerInfo(producer) = %s; want an instance_id", statusString(err))
	}
	resp, err := mc.prod.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: info.GetInstanceId()})
	if err != nil || resp.GetStatus() != pb.ShutdownStatus_SHUTDOWN_STATUS_ACCEPTED {
		t.Fatalf("Shutdown(producer, its own id) = %v, %s; want ACCEPTED (S-1)", resp.GetStatus(), statusString(err))
	}
	mc.m.down["producer"] = true
	deadline := time.Now().Add(mc.cfg.SettleTimeout)
	for {
		hctx, hcancel := mc.ctx()
		_, err := mc.prod.Health(hctx)
		hcancel()
		if err != nil {
			break // the drain ended and the producer stopped serving
		}
		if time.Now().After(deadline) {
			t.Fatalf("Health(producer) still answers %v after an accepted Shutdown; want the drain to end (S-2, S-4)", mc.cfg.SettleTimeout)
		}
		waitPoll()
	}
	for _, r := range mc.m.refs {
		res := mc.generate(t, ctx, mc.cons, mc.consumeRequest(r.ref))
		call := lc.refCall("Consume", r, r.state.String()+" before its producer drained")
		want := "INVALID_ARGUMENT (or UNAVAILABLE: a transfer backend asks the producer, which is gone)"
		ok := res.Code() == codes.InvalidArgument || res.Code() == codes.Unavailable
		if r.ref.GetBackend() == "shared_dir" {
			// The consumer claims shared-directory entries itself: the
			// drain must have removed the entry, a definite rejection.
			want, ok = "INVALID_ARGUMENT", res.Code() == codes.InvalidArgument
		}
		if !ok || len(res.TokenIDs()) > 0 {
			t.Fatalf("%s = %s; want %s before any token (S-2: the drain released every unconsumed output and finished its cleanup before exit)", call, brief(res), want)
		}
		if !r.state.spent() {
			r.state = stateReleased
		}
		r.unobserved = false
	}
}
