package suite

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Lifecycle-level cases of the in-engine encoder -> decoder handoff
// (CONTRACT section 2, "Inside one engine"): batched encoder steps whose
// outputs share one packed storage (C-2, C-3), the first context step that
// consumes the output and computes the cross-attention KV once, and
// preemption with recompute; plus H-2, which needs a producer that
// publishes an item without content hash.
//
// They use baton hooks and observables beyond CONTRACT section 4, which a
// target may not offer: each case finds out from the target's own answers
// (an attribute missing from GetLoad, a hook that changed nothing) and then
// reports `not verifiable`, never `passed`. A wrong answer is `failed`
// whether or not the hook showed.

// Hooks and observables of the reference engine beyond CONTRACT section 4.
const (
	// HookContextDelayMs holds a request between the ready event of its
	// encoder output and its first context step.
	HookContextDelayMs = "baton.context_delay_ms"
	// HookPreemptAfterTokens preempts a request once that many tokens were decided.
	HookPreemptAfterTokens = "baton.preempt_after_tokens"
	// HookPreemptMode is "pause" (pause and resume) or "reset" (full reset).
	HookPreemptMode = "baton.preempt_mode"
	// HookOmitContentHash publishes items without content hash (H-2).
	HookOmitContentHash = "baton.omit_content_hash"

	// ObservableBatchesFormed counts encoder batches formed.
	ObservableBatchesFormed = "executor.batches.formed"
	// ObservableBatchedRequests counts the members of those batches.
	ObservableBatchedRequests = "executor.batches.requests"
	// ObservableAdmissions counts admissions (first ones and re-admissions after a preemption).
	ObservableAdmissions = "executor.admissions"
	// ObservableContextsComputed counts context (cross-attention KV) computations from encoder outputs.
	ObservableContextsComputed = "executor.contexts.computed"
	// ObservablePreemptions counts preemptions.
	ObservablePreemptions = "executor.preemptions"
)

// Bounds of the executor cases.
const (
	// occupyHoldMs holds the batch that keeps the encoder busy while the
	// batch under test gathers its members.
	occupyHoldMs = 700
	// memberHoldMs holds the batch under test, so a member can be cancelled
	// while its encoder step is pending.
	memberHoldMs = 800
	// contextHoldMs holds a request between its ready event and its first
	// context step.
	contextHoldMs = 600
	// preemptAfterTokens is where the R-2 case preempts; r2MaxTokens is the
	// length of its answers (EOS ignored, so the preemption always lands).
	preemptAfterTokens = 5
	r2MaxTokens        = 24
)

// attribute returns e's GetLoad attribute key as a number; ok is false
// when GetLoad fails or the key is missing or not a number.
func (h *harness) attribute(e target.Engine, key string) (float64, bool) {
	info, err := e.GetLoad(h.ctx)
	if err != nil {
		return 0, false
	}
	v, ok := info.GetAttributes().GetFields()[key]
	if !ok {
		return 0, false
	}
	n, isNum := v.GetKind().(*structpb.Value_NumberValue)
	if !isNum {
		return 0, false
	}
	return n.NumberValue, true
}

// mustAttribute is attribute, ending the case `not verifiable` without it
// (an engine without an in-engine executor may omit the executor.* keys:
// CONTRACT section 4; Needs.Discovers says so).
func (h *harness) mustAttribute(who string, e target.Engine, key, what string) float64 {
	h.t.Helper()
	v, ok := h.attribute(e, key)
	if !ok {
		discovered(h.t, fmt.Sprintf("GetLoad(%s) has no number %s: %s", who, key, what))
	}
	return v
}

// heldRun is one request started by inOneBatch.
type heldRun struct {
	name   string
	cancel context.CancelFunc
	done   <-chan *target.GenerateResult
}

// inOneBatch makes e put reqs into one encoder batch: it starts occupy,
// held occupyHoldMs, so the encoder is busy, then reqs while it is, and
// waits until e reports a second batch formed with every one of reqs in it
// (executor.batches.formed +2, executor.batches.requests +1+len(reqs)).
// runs[0] is occupy. A target that does not batch so ends the case `not
// verifiable` (after the runs end).
func (h *harness) inOneBatch(who string, e target.Engine, occupy *pb.GenerateRequest, names []string, reqs ...*pb.GenerateRequest) []heldRun {
	h.t.Helper()
	formed0 := h.mustAttribute(who, e, ObservableBatchesFormed, "the case cannot see which requests share an encoder batch")
	members0 := h.mustAttribute(who, e, ObservableBatchedRequests, "the case cannot see which requests share an encoder batch")
	var runs []heldRun
	cancel, done := h.startHeld(e, withExtra(occupy, map[string]any{HookEncoderDelayMs: occupyHoldMs}))
	runs = append(runs, heldRun{"occupier", cancel, done})
	for i, req := range reqs {
		cancel, done := h.startHeld(e, req)
		runs = append(runs, heldRun{names[i], cancel, done})
	}
	deadline := time.Now().Add(settleTimeout)
	for {
		formed, _ := h.attribute(e, ObservableBatchesFormed)
		members, _ := h.attribute(e, ObservableBatchedRequests)
		if formed >= formed0+2 {
			if formed == formed0+2 && members == members0+1+float64(len(reqs)) {
				return runs
			}
			break
		}
		if time.Now().After(deadline) {
			break
		}
		h.waitMs(pollInterval.Milliseconds(), "for the batch under test to form")
	}
	for _, r := range runs {
		r.cancel()
		<-r.done
	}
	discovered(h.t, fmt.Sprintf("%s did not put %v into one encoder batch while another was held (%s and %s did not move by 2 and %d)",
		who, names, ObservableBatchesFormed, ObservableBatchedRequests, 1+len(reqs)))
	return nil
}

// C2LateCompletionKeepsSiblingSlices holds the encoder with one publish, sends three more that share the next batch, cancels the middle one while its step is pending: the cancelled one gets no EncoderReady, and its siblings' references give their own baseline answers (C-2).
func C2LateCompletionKeepsSiblingSlices(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	occupier := fixture(t, "basn6a08.png")
	a, b, c := fixture(t, "video-001.png"), fixture(t, "basn2c08.png"), fixture(t, "blue-purple-pink.png")
	baseA, okA := h.baseline(prompt, a)
	baseB, okB := h.baseline(prompt, b)
	baseC, okC := h.baseline(prompt, c)
	if !okA || !okB || !okC {
		return
	}
	if sameAnswer(baseB, baseC) {
		discovered(t, fmt.Sprintf("Baseline(image=%s) and Baseline(image=%s) agree on %q: a shifted slice could not be seen", b.Name, c.Name, prompt))
	}

	held := func(img fixtures.Image) *pb.GenerateRequest {
		return withExtra(h.publishRequest(nil, imageItem(img)), map[string]any{HookEncoderDelayMs: memberHoldMs})
	}
	entries0, countsEntries := h.attribute(h.prod, ObservableExportsEntries)
	runs := h.inOneBatch("producer", h.prod, h.publishRequest(nil, imageItem(occupier)), []string{a.Name, b.Name, c.Name}, held(a), held(b), held(c))
	runs[2].cancel() // b, while the batch's encoder step is pending
	results := make([]*target.GenerateResult, len(runs))
	published := 0
	for i, r := range runs {
		results[i] = <-r.done
		if ready := results[i].EncoderReady(); ready != nil && results[i].Status != nil {
			h.track(ready.GetRef())
			published++
		}
	}
	if ready := results[2].EncoderReady(); ready != nil {
		t.Errorf("C-2 Publish(image=%s) cancelled while its batch was pending = %s; want no EncoderReady (a late completion must not revive it)", b.Name, describe(results[2]))
	}
	if countsEntries {
		// Once every publish of the batch ended, the table holds what the
		// clients got and nothing for the cancelled one.
		for deadline := time.Now().Add(settleTimeout); h.running(h.prod) > 0 && time.Now().Before(deadline); {
			h.waitMs(pollInterval.Milliseconds(), "for every publish of the batch to end")
		}
		if got, _ := h.attribute(h.prod, ObservableExportsEntries); got > entries0+float64(published) {
			t.Errorf("C-2 GetLoad(producer) %s = %g once the batch with the cancelled %s ended; want at most %g, the %d entries its clients got (a late completion must not revive the cancelled publish)",
				ObservableExportsEntries, got, b.Name, entries0+float64(published), published)
		}
	}
	for i, want := range map[int]*target.GenerateResult{1: baseA, 3: baseC} {
		ready := results[i].EncoderReady()
		if ready == nil {
			t.Errorf("C-2 Publish(image=%s), a sibling of the cancelled %s = %s; want EncoderReady", runs[i].name, b.Name, describe(results[i]))
			continue
		}
		got, ok := h.consumeOK(prompt, ready.GetRef(), fmt.Sprintf("%s, batched with the cancelled %s", runs[i].name, b.Name))
		if !ok {
			continue
		}
		if !sameAnswer(got, want) && sameAnswer(got, baseB) {
			t.Errorf("C-2 E+PD(image=%s, batched with the cancelled %s) = the cancelled image's answer %s; want its own %s (the completion shifted a sibling's slice)",
				runs[i].name, b.Name, tokensString(got.TokenIDs()), tokensString(want.TokenIDs()))
			continue
		}
		expectSameAnswer(t, fmt.Sprintf("C-2 image=%s, batched with the cancelled %s", runs[i].name, b.Name), got, want)
	}
}

// C3CancelBeforeContextStepFreesStorage holds a baseline request between its encoder output's ready event and its first context step (baton.context_delay_ms), cancels it there, and sees the batch storage freed (C-3).
func C3CancelBeforeContextStepFreesStorage(ctx context.Context, t TB, tg target.Target) {
	h := newHarness(ctx, t, tg)
	defer h.cleanup()
	img := fixture(t, "video-001.png")
	before := h.counters("baseline", h.base)
	req := withExtra(h.baselineRequest(promptText(t, promptMarker), imageItem(img)), map[string]any{HookContextDelayMs: heldEncoderMs})
	cancel, done := h.startHeld(h.base, req)
	deadline := time.Now().Add(settleTimeout)
	for h.counters("baseline", h.base)[ObservableStorageLiveBatches] <= before[ObservableStorageLiveBatches] {
		if time.Now().After(deadline) {
			cancel()
			<-done
			discovered(t, fmt.Sprintf("the baseline never showed the held output's storage in %s (does it honour %s?)", ObservableStorageLiveBatches, HookContextDelayMs))
		}
		h.waitMs(pollInterval.Milliseconds(), "for the output to be published")
	}
	cancel()
	if res := <-done; res.Status != nil && len(res.TokenIDs()) > 0 {
		t.Errorf("C-3 Baseline(image=%s) cancelled before its first context step = %s; want no token", img.Name, describe(res))
	}
	h.expectSettled("C-3", "baseline", h.base, before, "after a request cancelled with its output published and unconsumed", ObservableStorageLiveBatches)
	h.expectReady("baseline", h.base)
}

// C3CancelledPublishLeavesNoEntry holds a publish between its encoder output's ready event and the entry's write (baton.context_delay_ms), cancels it there, and sees the producer's exports and batch storage back to their values before: the unconsumed output is released, never written and kept (C-3; C-7 on the stream).
func C3CancelledPublishLeavesNoEntry(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	img := fixture(t, "video-001.png")
	before := h.counters("producer", h.prod)
	req := withExtra(h.publishRequest(nil, imageItem(img)), map[string]any{HookContextDelayMs: heldEncoderMs})
	cancel, done := h.startHeld(h.prod, req)
	deadline := time.Now().Add(settleTimeout)
	for h.counters("producer", h.prod)[ObservableStorageLiveBatches] <= before[ObservableStorageLiveBatches] {
		if time.Now().After(deadline) {
			cancel()
			<-done
			discovered(t, fmt.Sprintf("the producer never showed the held output's storage in %s (does it honour %s?)", ObservableStorageLiveBatches, HookContextDelayMs))
		}
		h.waitMs(pollInterval.Milliseconds(), "for the output to be ready")
	}
	cancel()
	if res := <-done; res.Status != nil && res.EncoderReady() != nil {
		h.track(res.EncoderReady().GetRef())
		t.Errorf("C-3 Publish(image=%s) cancelled once its output was ready = %s; want no EncoderReady", img.Name, describe(res))
	}
	h.expectSettled("C-3", "producer", h.prod, before, "after a publish cancelled with its output ready and unconsumed", ObservableExportsEntries, ObservableExportsBytes, ObservableStorageLiveBatches)
	h.expectReady("producer", h.prod)
}

// C3SiblingSliceOutlivesOtherReleases puts two baseline requests in one batch; one decodes (releasing after every step) while the other is held before its first context step: the held one still gets its own baseline answer and the storage goes once both ended (C-3, idempotent release).
func C3SiblingSliceOutlivesOtherReleases(ctx context.Context, t TB, tg target.Target) {
	h := newHarness(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	a, b := fixture(t, "video-001.png"), fixture(t, "blue-purple-pink.png")
	baseA, okA := h.baseline(prompt, a)
	baseB, okB := h.baseline(prompt, b)
	if !okA || !okB {
		return
	}
	before := h.counters("baseline", h.base)
	decoding := h.baselineRequest(prompt, imageItem(a))
	heldB := withExtra(h.baselineRequest(prompt, imageItem(b)), map[string]any{HookContextDelayMs: contextHoldMs})
	runs := h.inOneBatch("baseline", h.base, h.baselineRequest(prompt, imageItem(fixture(t, "basn6a08.png"))), []string{a.Name, b.Name}, decoding, heldB)
	results := make([]*target.GenerateResult, len(runs))
	for i, r := range runs {
		results[i] = <-r.done
	}
	expectSameAnswer(t, fmt.Sprintf("C-3 image=%s, batched with %s", a.Name, b.Name), results[1], baseA)
	if !sameAnswer(results[2], baseB) {
		t.Errorf("C-3 Baseline(image=%s, held before its first context step while its batch sibling %s decoded) = %s; want its own answer %s (was the batch's storage freed under its view?)",
			b.Name, a.Name, describe(results[2]), tokensString(baseB.TokenIDs()))
	}
	h.expectSettled("C-3", "baseline", h.base, before, "after every request of the batch ended", ObservableStorageLiveBatches)
}

// R1ContextComputedOncePerAdmission runs a request with an image on the baseline and on E+PD: each admission computes its context (the cross-attention KV) from the output exactly once; a preempted request, admitted twice, twice.
func R1ContextComputedOncePerAdmission(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	img := fixture(t, "video-001.png")
	check := func(who string, e target.Engine, what string, run func() bool) {
		adm0 := h.mustAttribute(who, e, ObservableAdmissions, "admissions cannot be counted")
		ctx0 := h.mustAttribute(who, e, ObservableContextsComputed, "context computations cannot be counted")
		if !run() {
			return
		}
		adm := h.mustAttribute(who, e, ObservableAdmissions, "") - adm0
		computed := h.mustAttribute(who, e, ObservableContextsComputed, "") - ctx0
		if adm < 1 || computed != adm {
			t.Errorf("R-1 %s: %s %g, %s %g; want one context computation per admission", what, ObservableAdmissions, adm, ObservableContextsComputed, computed)
		}
	}
	check("baseline", h.base, fmt.Sprintf("Baseline(image=%s)", img.Name), func() bool {
		_, ok := h.baseline(prompt, img)
		return ok
	})
	check("consumer", h.cons, fmt.Sprintf("Consume(image=%s) on the consumer", img.Name), func() bool {
		_, ok := h.disaggregated(prompt, img)
		return ok
	})
	if !h.profile.TestHooks {
		return
	}
	check("baseline", h.base, fmt.Sprintf("Baseline(image=%s) preempted after %d tokens", img.Name, preemptAfterTokens), func() bool {
		res := h.generate(h.base, r2Request(h, prompt, img, "reset"))
		return expectTokens(t, fmt.Sprintf("Baseline(image=%s, preempted)", img.Name), res)
	})
}

// r2Request is a baseline request of r2MaxTokens tokens (EOS ignored) with
// img, preempted after preemptAfterTokens in mode ("" = not preempted).
func r2Request(h *harness, prompt string, img fixtures.Image, mode string) *pb.GenerateRequest {
	req := h.baselineRequest(prompt, imageItem(img))
	req.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(r2MaxTokens), IgnoreEos: proto.Bool(true)}
	if mode == "" {
		return req
	}
	return withExtra(req, map[string]any{HookPreemptAfterTokens: preemptAfterTokens, HookPreemptMode: mode})
}

// R2PreemptedRequestIsTokenIdentical preempts a baseline request after its output was consumed, as pause-and-resume and as full reset: each recomputes and answers token for token like the uninterrupted run.
func R2PreemptedRequestIsTokenIdentical(ctx context.Context, t TB, tg target.Target) {
	h := newHarness(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	img := fixture(t, "video-001.png")
	want := h.generate(h.base, r2Request(h, prompt, img, ""))
	if !expectTokens(t, fmt.Sprintf("Baseline(image=%s, %d tokens)", img.Name, r2MaxTokens), want) {
		return
	}
	unseen := 0
	for _, mode := range []string{"pause", "reset"} {
		pre, hasPre := h.attribute(h.base, ObservablePreemptions)
		got := h.generate(h.base, r2Request(h, prompt, img, mode))
		call := fmt.Sprintf("Baseline(image=%s) preempted after %d tokens (%s)", img.Name, preemptAfterTokens, mode)
		if !sameAnswer(got, want) {
			t.Errorf("R-2 %s = %s; want the uninterrupted answer %s", call, describe(got), tokensString(want.TokenIDs()))
			continue
		}
		if post, ok := h.attribute(h.base, ObservablePreemptions); !hasPre || !ok || post != pre+1 {
			unseen++
		}
	}
	if unseen > 0 {
		discovered(t, fmt.Sprintf("the answers were right, but %s did not count the preemptions (does the baseline honour %s?)", ObservablePreemptions, HookPreemptAfterTokens))
	}
}

// H2MissingHashDisablesReuse publishes images without content hash (baton.omit_content_hash): with one prompt and a warm consumer cache, each image still gets its own baseline answer (H-2).
func H2MissingHashDisablesReuse(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	a, b, baseA, baseB := h.distinctBaselines(prompt, fixturePairs(t, b2Pairs))
	hashless := func(img fixtures.Image) *pb.EncoderCacheRef {
		req := withExtra(h.publishRequest(nil, imageItem(img)), map[string]any{HookOmitContentHash: true})
		res := h.generate(h.prod, req)
		ready := res.EncoderReady()
		if ready == nil {
			t.Fatalf("Publish(image=%s, %s) = %s; want EncoderReady", img.Name, HookOmitContentHash, describe(res))
		}
		h.track(ready.GetRef())
		if hash := ready.GetItems()[0].GetContentHash(); hash != "" {
			discovered(t, fmt.Sprintf("the producer published a content hash (%.16s..) despite %s: no item without hash reaches the consumer", hash, HookOmitContentHash))
		}
		return ready.GetRef()
	}
	for _, run := range []struct {
		img  fixtures.Image
		want *target.GenerateResult
		note string
	}{{a, baseA, "first"}, {a, baseA, "second (warm cache)"}, {b, baseB, "after " + a.Name + " twice"}} {
		got, ok := h.consumeOK(prompt, hashless(run.img), run.img.Name+" without content hash, "+run.note)
		if !ok {
			continue
		}
		if run.img.Name == b.Name && sameAnswer(got, baseA) {
			t.Errorf("H-2 E+PD(image=%s without content hash, prompt=%q) after %s twice = %s's answer %s; want its own %s (is a missing hash keyed by placeholder tokens alone?)",
				b.Name, prompt, a.Name, a.Name, tokensString(got.TokenIDs()), tokensString(baseB.TokenIDs()))
			continue
		}
		expectSameAnswer(t, fmt.Sprintf("H-2 image=%s without content hash, %s", run.img.Name, run.note), got, run.want)
	}
}
