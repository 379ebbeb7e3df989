package suite

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Lifecycle-level cases (CONTRACT C-1, C-3, C-5..C-7, H-1, H-4, SU-6,
// They use the CONTRACT section 4 observables and test hooks.
// The cases of the in-engine executor (C-2, C-3 inside one batch, R-1,
// R-2) and H-2 are in executor.go.

// Test hook keys of GenerateRequest.extra (CONTRACT section 4), honoured
// only by a target started with test hooks (Profile.TestHooks).
const (
	// HookEncoderDelayMs holds the request's encoder step this many ms.
	HookEncoderDelayMs = "baton.encoder_delay_ms"
	// HookEncoderFail makes the request's encoder step fail.
	HookEncoderFail = "baton.encoder_fail"
	// HookCleanupFail (a baton hook beyond CONTRACT section 4) makes the
	// first removal of the entry the publish creates report a failure.
	HookCleanupFail = "baton.cleanup_fail"
)

// LabelNeedsObservables marks a case that needs the CONTRACT section 4
// observables (Profile.Observables).
const LabelNeedsObservables = "needs:observables"

// Bounds of the Lifecycle cases.
const (
	// heldEncoderMs is how long a held encoder step would last: far longer
	// than any case waits, so only a cancellation ends it.
	heldEncoderMs = 20_000
	// settleTimeout bounds the wait for observables to return to a value
	// after the request that moved them ended (cleanup runs asynchronously).
	settleTimeout = 5 * time.Second
	// inFlightTimeout bounds the wait for a request to show in running_requests.
	inFlightTimeout = 2 * time.Second
	// pollInterval is how often a case polls GetLoad or Health.
	pollInterval = 20 * time.Millisecond
)

// withExtra sets req.extra to fields and returns req.
func withExtra(req *pb.GenerateRequest, fields map[string]any) *pb.GenerateRequest {
	req.Extra, _ = structpb.NewStruct(fields)
	return req
}

// settle polls e's observables until keys equal their values in want, or
// settleTimeout passes; it returns the last counters and whether they settled.
func (h *harness) settle(who string, e target.Engine, want counters, keys ...string) (counters, bool) {
	h.t.Helper()
	return h.settleWithin(settleTimeout, who, e, want, keys...)
}

// settleWithin is settle with its own bound.
func (h *harness) settleWithin(timeout time.Duration, who string, e target.Engine, want counters, keys ...string) (counters, bool) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c := h.counters(who, e)
		if len(want.diff(c, keys...)) == 0 {
			return c, true
		}
		if time.Now().After(deadline) {
			return c, false
		}
		h.waitMs(pollInterval.Milliseconds(), "polling "+who+"'s observables")
	}
}

// expectSettled reports (Errorf) unless e's observables keys return to
// their values in before within settleTimeout.
func (h *harness) expectSettled(rule, who string, e target.Engine, before counters, after string, keys ...string) bool {
	h.t.Helper()
	c, ok := h.settle(who, e, before, keys...)
	if !ok {
		h.t.Errorf("%s GetLoad(%s) %s: %s; want every one back to its value before (within %v)", rule, who, after, strings.Join(before.diff(c, keys...), ", "), settleTimeout)
	}
	return ok
}

// reservationKeys are the observables a failed or cancelled encoder step
// must give back (C-1, C-6).
var reservationKeys = []string{ObservableExportsEntries, ObservableExportsBytes, ObservableStorageLiveBatches, ObservableCleanupPending}

// running returns e's LoadInfo.running_requests (0 when GetLoad fails).
func (h *harness) running(e target.Engine) uint32 {
	info, err := e.GetLoad(h.ctx)
	if err != nil {
		return 0
	}
	return info.GetRunningRequests()
}

// startHeld starts req on e in the background under a context of its own
// and waits (at most inFlightTimeout) until e's running_requests shows it;
// it returns the cancel of the request and the channel of its result.
func (h *harness) startHeld(e target.Engine, req *pb.GenerateRequest) (context.CancelFunc, <-chan *target.GenerateResult) {
	h.t.Helper()
	base := h.running(e)
	ctx, cancel := context.WithCancel(h.ctx)
	out := make(chan *target.GenerateResult, 1)
	go func() {
		res, err := e.Generate(ctx, req)
		if err != nil || res == nil || res.Status == nil {
			res = &target.GenerateResult{Status: nil}
		}
		out <- res
	}()
	for deadline := time.Now().Add(inFlightTimeout); h.running(e) <= base && time.Now().Before(deadline); {
		h.waitMs(pollInterval.Milliseconds(), "for the held request to be in flight")
	}
	return cancel, out
}

// C1CancelledHeldPublishPublishesNothing cancels a publish while its encoder step is held (baton.encoder_delay_ms): no EncoderReady, exports and live batches back to their values before, the producer READY and the next publish works (C-1).
func C1CancelledHeldPublishPublishesNothing(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	img := fixture(t, "video-001.jpeg")

	before := h.counters("producer", h.prod)
	req := withExtra(h.publishRequest(nil, imageItem(img)), map[string]any{HookEncoderDelayMs: heldEncoderMs})
	start := time.Now()
	cancel, done := h.startHeld(h.prod, req)
	cancel()
	res := <-done
	if res.Status != nil {
		if ready := res.EncoderReady(); ready != nil {
			h.track(ready.GetRef())
			t.Errorf("C-1 Publish(image=%s, held %d ms) cancelled by the client = %s; want no EncoderReady", img.Name, heldEncoderMs, describe(res))
		}
	}
	h.expectSettled("C-1", "producer", h.prod, before, "after a publish cancelled while its encoder step was held", reservationKeys...)
	if waited := time.Since(start); waited > heldEncoderMs*time.Millisecond/2 {
		t.Errorf("C-1 a publish cancelled during its held encoder step released its reservation only after %v; want the hold interrupted", waited.Round(time.Millisecond))
	}
	h.expectReady("producer", h.prod)
	h.handoff(fixture(t, "basn6a08.png"), promptText(t, promptMarker))
}

// C3ReleasedOutputFreesItsStorage publishes a two-image batch, checks the producer's live batch storage is gone once the entry is written, releases the unconsumed entry with Abort and sees exports and storage back to their values before; a baseline request that ended leaves no live batch (C-3). That the released reference no longer consumes is SU-2's.
func C3ReleasedOutputFreesItsStorage(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	a, b := fixture(t, "video-001.png"), fixture(t, "basn2c08.png")

	before := h.counters("producer", h.prod)
	ready := h.publish(a, b)
	during := h.counters("producer", h.prod)
	if during[ObservableExportsEntries] != before[ObservableExportsEntries]+1 || during[ObservableExportsBytes] <= before[ObservableExportsBytes] {
		t.Errorf("C-3 GetLoad(producer) after Publish(image=%s,%s) = %s %g, %s %g; want one more entry holding more bytes than before (%g, %g)",
			a.Name, b.Name, ObservableExportsEntries, during[ObservableExportsEntries], ObservableExportsBytes, during[ObservableExportsBytes], before[ObservableExportsEntries], before[ObservableExportsBytes])
	}
	h.expectSettled("C-3", "producer", h.prod, before, "after the batch's entry was published", ObservableStorageLiveBatches)
	h.expectAbortStatus(ready.GetRef(), "unconsumed", pb.AbortStatus_ABORT_STATUS_ABORTED)
	h.expectSettled("C-3", "producer", h.prod, before, "after the unconsumed output was released", ObservableExportsEntries, ObservableExportsBytes, ObservableStorageLiveBatches, ObservableCleanupPending)

	if h.base != nil {
		baseBefore := h.counters("baseline", h.base)
		h.baseline(promptText(t, promptMarker), a)
		h.expectSettled("C-3", "baseline", h.base, baseBefore, "after a request with media ended", ObservableStorageLiveBatches)
	}
}

// c7CancelOffsetsMs are the C-7 cancellation times, in ms after the held
// publish is in flight, around the end of its c7HoldMs hold.
var c7CancelOffsetsMs = []int64{c7HoldMs / 2, c7HoldMs - 20, c7HoldMs, c7HoldMs + 10, c7HoldMs + 40}

// c7TTLMs is the TTL of the C-7 publishes: an entry whose EncoderReady
// was sent into a buffer its cancelled client never read cannot be told
// apart from a delivered one by the engine, and leaves by expiry.
const c7TTLMs = 1500

// c7HoldMs is the encoder hold of the C-7 publishes.
const c7HoldMs = 300

// C7CancelledAroundPublicationLeavesNothing cancels held publishes at times around the end of the hold: a client that got no EncoderReady leaves nothing published (exports back to before, long before the TTL); one that got it holds a working reference, released by Abort (C-7).
func C7CancelledAroundPublicationLeavesNothing(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	img := fixture(t, "video-001.jpeg")

	var paths []string
	for _, offset := range c7CancelOffsetsMs {
		before := h.counters("producer", h.prod)
		req := withExtra(h.publishRequest(proto.Uint32(c7TTLMs), imageItem(img)), map[string]any{HookEncoderDelayMs: c7HoldMs})
		cancel, done := h.startHeld(h.prod, req)
		h.waitMs(offset, "before cancelling the held publish")
		cancel()
		res := <-done
		note := fmt.Sprintf("cancelled %d ms into a %d ms hold", offset, c7HoldMs)
		if res.Status != nil && res.EncoderReady() != nil {
			// The client got its reference, though it cancelled: E may have
			// released the entry on seeing the cancellation after the send
			// (ALREADY_FINISHED) or kept it (ABORTED now).
			ref := res.EncoderReady().GetRef()
			h.track(ref)
			paths = append(paths, fmt.Sprintf("%d ms: delivered", offset))
			h.expectReleased(ref, note+", EncoderReady delivered")
		} else {
			paths = append(paths, fmt.Sprintf("%d ms: not delivered", offset))
		}
		// Undelivered, the entry is released at once when the engine saw the
		// failed send, or, when its send succeeded into a buffer the client
		// never read, it can only expire: nobody can consume it either
		// way. Allow for the short TTL these publishes carry.
		keys := []string{ObservableExportsEntries, ObservableExportsBytes, ObservableStorageLiveBatches}
		if c, ok := h.settleWithin(settleTimeout+c7TTLMs*time.Millisecond, "producer", h.prod, before, keys...); !ok {
			t.Errorf("C-7 GetLoad(producer) after a publish %s: %s; want every one back to its value before (released, or expired after its %d ms TTL)", note, strings.Join(before.diff(c, keys...), ", "), c7TTLMs)
		}
	}
	t.Logf("C-7 paths: %s", strings.Join(paths, "; "))
	h.expectReady("producer", h.prod)
	h.handoff(fixture(t, "basn6a08.png"), promptText(t, promptMarker))
}

// C5TextOnlyCancelDuringHeldEncoder holds a media request's encoder step on the baseline and cancels a text-only request meanwhile: it returns promptly, the engine stays READY, and after the held request is cancelled the next request gets tokens (C-5).
func C5TextOnlyCancelDuringHeldEncoder(ctx context.Context, t TB, tg target.Target) {
	h := newHarness(ctx, t, tg)
	prompt := promptText(t, promptMarker)

	held := withExtra(h.baselineRequest(prompt, imageItem(fixture(t, "video-001.jpeg"))), map[string]any{HookEncoderDelayMs: heldEncoderMs})
	cancelHeld, heldDone := h.startHeld(h.base, held)
	var once sync.Once
	stopHeld := func() { once.Do(func() { cancelHeld(); <-heldDone }) }
	defer stopHeld()

	tctx, tcancel := context.WithCancel(ctx)
	start := time.Now()
	go tcancel()
	_, _ = h.base.Generate(tctx, h.baselineRequest(promptText(t, promptTextOnly)))
	if waited := time.Since(start); waited > 2*time.Second {
		t.Errorf("C-5 a cancelled text-only request returned after %v while an encoder step was held; want promptly", waited.Round(time.Millisecond))
	}
	h.expectReady("baseline (encoder step held)", h.base)
	expectTokens(t, "Text(prompt) on the baseline while an encoder step is held", h.generateWithin(h.base, h.baselineRequest(promptText(t, promptTextOnly)), 10*time.Second))
	stopHeld()
	h.expectReady("baseline (held request cancelled)", h.base)
	h.baseline(prompt, fixture(t, "basn6a08.png"))
}

// expectOneTerminalFailure reports (Errorf) unless res is one terminal
// failure and nothing else (C-6): either a non-OK status with no
// EncoderReady, token or EngineError event, or an OK stream whose only
// event is one EngineError.
func expectOneTerminalFailure(t TB, call string, res *target.GenerateResult) bool {
	t.Helper()
	if len(res.TokenIDs()) > 0 || res.EncoderReady() != nil || hasPrefillReady(res) || res.Finished() != nil {
		t.Errorf("C-6 %s = %s; want one terminal error and no EncoderReady, token or GenerationFinished", call, describe(res))
		return false
	}
	errs := 0
	for _, r := range res.Responses {
		if r.GetError() != nil {
			errs++
		}
	}
	switch {
	case res.Code() != codes.OK && errs == 0:
		return true
	case res.Code() == codes.OK && errs == 1 && len(res.Responses) == 1:
		return true
	}
	t.Errorf("C-6 %s = %s (%d EngineError events); want exactly one terminal error: a non-OK status, or one EngineError closing OK", call, describe(res), errs)
	return false
}

// C6EncoderFailureEndsOneRequest fails the encoder step (baton.encoder_fail) of a publish and of a baseline request: one terminal error each, no EncoderReady or token, nothing reserved remains, the engine stays READY and the next request works (C-6).
func C6EncoderFailureEndsOneRequest(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	img := fixture(t, "video-001.jpeg")
	prompt := promptText(t, promptMarker)
	fail := map[string]any{HookEncoderFail: true}

	before := h.counters("producer", h.prod)
	res := h.generate(h.prod, withExtra(h.publishRequest(nil, imageItem(img)), fail))
	expectOneTerminalFailure(t, fmt.Sprintf("Publish(image=%s, %s)", img.Name, HookEncoderFail), res)
	h.expectSettled("C-6", "producer", h.prod, before, "after a publish whose encoder step failed", reservationKeys...)
	h.expectReady("producer", h.prod)
	h.handoff(fixture(t, "basn6a08.png"), prompt)

	if h.base == nil {
		return
	}
	baseBefore := h.counters("baseline", h.base)
	res = h.generate(h.base, withExtra(h.baselineRequest(prompt, imageItem(img)), fail))
	expectOneTerminalFailure(t, fmt.Sprintf("Baseline(image=%s, %s)", img.Name, HookEncoderFail), res)
	h.expectSettled("C-6", "baseline", h.base, baseBefore, "after a request whose encoder step failed", ObservableStorageLiveBatches, ObservableCleanupPending)
	h.expectReady("baseline", h.base)
	h.baseline(prompt, img)
}

// h1Images are the H-1 fixtures, PNG only (CONTRACT H-1: "a black-box H-1
// check compares pre-images on PNG fixtures only"; a JPEG's pixels are the
// target's own decode): every colour type at every bit depth and each
// pixel type the hash converts (RGBA, NRGBA with alpha, NRGBA64, RGBA64,
// Gray, Gray16, gray with alpha, paletted with and without transparency),
// interlaced, and both B-2 pairs (the hash must see dimensions and every
// pixel).
var h1Images = []string{
	"video-001.png", "basn6a08.png", "basn6a16.png", "basn2c08.png", "basn2c16.png",
	"basn0g01.png", "basn0g02.png", "basn0g04.png", "basn0g08.png", "basn0g16.png",
	"basn3p01.png", "basn3p04.png", "basn3p08.png", "basn3p08-trns.png", "basn4a08.png", "basn4a16.png",
	"basn3p04-31i.png", "gopher-doc.with-alpha.png",
	"b2-strip-30x150.png", "b2-strip-150x30.png", "b2-dot-a.png", "b2-dot-b.png",
}

// presetKey is the ServerInfo.extra key naming the producer's preprocessing preset (H-1).
const presetKey = "baton.preset"

// H1ContentHashFromDecodedPixels publishes PNG fixtures of every colour type, bit depth and pixel type and checks each content hash equals the suite's own H-1 computation over the decoded pixels and the preset the producer declares in ServerInfo.extra["baton.preset"] (H-1).
func H1ContentHashFromDecodedPixels(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	info, err := h.prod.GetServerInfo(ctx)
	if err != nil {
		t.Fatalf("GetServerInfo(producer) = %s; want ServerInfo", statusString(err))
	}
	preset := info.GetExtra().GetFields()[presetKey].GetStringValue()
	if preset == "" {
		discovered(t, fmt.Sprintf("the producer does not declare its preprocessing preset (ServerInfo.extra[%q]), which the H-1 pre-image includes", presetKey))
	}
	for _, name := range h1Images {
		img := fixture(t, name)
		decoded, err := decodeImage(img.Data)
		if err != nil {
			HarnessError(t, "fixture %s: %v", name, err)
		}
		want := fixtures.ContentHash(preset, decoded)
		ready := h.publish(img)
		if got := ready.GetItems()[0].GetContentHash(); got != want {
			t.Errorf("H-1 Publish(image=%s) = content hash %s; want %s (SHA-256 of the domain tag, preset %q, %dx%d and the NRGBA64 pixels)", name, got, want, preset, decoded.Bounds().Dx(), decoded.Bounds().Dy())
		}
		if st, err := h.abort(h.prod, ready.GetRef()); err != nil || st != pb.AbortStatus_ABORT_STATUS_ABORTED {
			t.Logf("Abort(%s) = %v %v", refLabel(ready.GetRef()), st, err)
		}
	}
}

// dataURI is img's bytes as a base64 data URI.
func dataURI(img fixtures.Image) string {
	return "data:" + mimeOf(img.Format) + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
}

// H4PixelEqualMediaHashEqual publishes the fixtures' pixel-equal pairs (baseline vs progressive JPEG, PNG vs its re-encoding, raw bytes vs data URI, and PNG vs WebP lossless when the profile declares WebP): equal content hashes, and equal answers on the baseline and over E+PD (H-4; that E+PD equals the baseline is B-1's).
func H4PixelEqualMediaHashEqual(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	for _, pair := range fixtures.PixelEqualPairs() {
		a, b := pair[0], pair[1]
		if !h.profile.DeclaresMediaFormat(a.Format) || !h.profile.DeclaresMediaFormat(b.Format) {
			continue
		}
		readyA, readyB := h.publish(a), h.publish(b)
		hashA, hashB := readyA.GetItems()[0].GetContentHash(), readyB.GetItems()[0].GetContentHash()
		if hashA != hashB {
			t.Errorf("H-4 Publish(image=%s) = content hash %s, Publish(image=%s) = %s; want equal (the pixels are equal)", a.Name, hashA, b.Name, hashB)
		}
		uri := &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_DataUri{DataUri: dataURI(a)}}
		readyURI := h.publishItems(nil, "image="+a.Name+" as a data URI", uri)
		if got := readyURI.GetItems()[0].GetContentHash(); got != hashA {
			t.Errorf("H-4 Publish(image=%s as a data URI) = content hash %s; want %s as from its raw bytes", a.Name, got, hashA)
		}
		baseA, okA := h.baseline(prompt, a)
		baseB, okB := h.baseline(prompt, b)
		if okA && okB && !sameAnswer(baseA, baseB) {
			t.Errorf("H-4 Baseline(image=%s) = tokens %s, Baseline(image=%s) = %s; want equal answers for equal pixels", a.Name, tokensString(baseA.TokenIDs()), b.Name, tokensString(baseB.TokenIDs()))
		}
		gotA, okA2 := h.consumeOK(prompt, readyA.GetRef(), "image="+a.Name)
		gotB, okB2 := h.consumeOK(prompt, readyB.GetRef(), "image="+b.Name)
		if okA2 && okB2 && !sameAnswer(gotA, gotB) {
			t.Errorf("H-4 E+PD(image=%s) = tokens %s, E+PD(image=%s) = %s; want equal answers for equal pixels", a.Name, tokensString(gotA.TokenIDs()), b.Name, tokensString(gotB.TokenIDs()))
		}
		if _, err := h.abort(h.prod, readyURI.GetRef()); err != nil {
			t.Logf("Abort(%s) = %s", refLabel(readyURI.GetRef()), statusString(err))
		}
	}
}

// SU6SamePublishedTwiceIndependent publishes one image twice: two independent entries (or one idempotent entry); releasing one leaves the other consumable, and two consumed independently both answer (SU-6).
func SU6SamePublishedTwiceIndependent(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	img := fixture(t, "video-001.jpeg")
	prompt := promptText(t, promptMarker)

	first, second := h.publish(img).GetRef(), h.publish(img).GetRef()
	if string(first.GetOpaqueState()) == string(second.GetOpaqueState()) {
		t.Logf("SU-6 Publish(image=%s) twice = one idempotent reference %s", img.Name, refLabel(first))
		h.consumeOK(prompt, first, "the idempotent entry")
		h.expectReady("producer", h.prod)
		return
	}
	h.expectAbortStatus(first, "the first of two publishes of "+img.Name, pb.AbortStatus_ABORT_STATUS_ABORTED)
	h.consumeOK(prompt, second, "the second publish of "+img.Name+", after the first was released")

	third, fourth := h.publish(img).GetRef(), h.publish(img).GetRef()
	gotThird, ok3 := h.consumeOK(prompt, third, "the third publish of "+img.Name)
	gotFourth, ok4 := h.consumeOK(prompt, fourth, "the fourth publish of "+img.Name+", after the third was consumed")
	if ok3 && ok4 && !sameAnswer(gotThird, gotFourth) {
		t.Errorf("SU-6 E+PD(image=%s) = tokens %s and %s for two publishes of the same media; want equal answers", img.Name, tokensString(gotThird.TokenIDs()), tokensString(gotFourth.TokenIDs()))
	}
	h.expectReady("producer", h.prod)
	h.expectReady("consumer", h.cons)
}

// x2TTLMs is the TTL of the X-2 publish; x2Collect bounds the wait for its
// collection past the TTL (the producer's collector interval is not part of
// the contract; the reference engine collects every 200 ms).
const (
	x2TTLMs   = 500
	x2Collect = 10 * time.Second
)

// X2ExpiredEntryIsCollected publishes with ttl_ms=500 and, without any Abort, sees exports.entries and exports.bytes return to their earlier values after the TTL; the reference is then INVALID_ARGUMENT.
func X2ExpiredEntryIsCollected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	img := fixture(t, "video-001.jpeg")

	before := h.counters("producer", h.prod)
	published := time.Now()
	ref := h.publishItems(proto.Uint32(x2TTLMs), fmt.Sprintf("image=%s, ttl_ms=%d", img.Name, x2TTLMs), imageItem(img)).GetRef()
	keys := []string{ObservableExportsEntries, ObservableExportsBytes}
	var c counters
	for {
		c = h.counters("producer", h.prod)
		if len(before.diff(c, keys...)) == 0 {
			break
		}
		if time.Since(published) > x2TTLMs*time.Millisecond+x2Collect {
			t.Errorf("X-2 GetLoad(producer) %v after a %d ms TTL: %s; want the expired entry collected (back to its value before, no Abort sent)",
				time.Since(published).Round(time.Millisecond), x2TTLMs, strings.Join(before.diff(c, keys...), ", "))
			break
		}
		h.waitMs(pollInterval.Milliseconds()*5, "for the entry to expire and be collected")
	}
	if gone := time.Since(published); gone < x2TTLMs*time.Millisecond && !t.Failed() {
		t.Logf("X-2 the entry left the table %v after publication, before its %d ms TTL", gone.Round(time.Millisecond), x2TTLMs)
	}
	h.consumeRejected(promptText(t, promptMarker), ref, fmt.Sprintf("after its %d ms TTL passed", x2TTLMs), codes.InvalidArgument)
	h.expectReady("producer", h.prod)
}

// X1FailedCleanupIsNotSwallowed publishes with baton.cleanup_fail, releases the entry so its cleanup fails, and expects Health NOT_READY with a reason and a new Generate UNAVAILABLE with a reason; the producer is restarted afterwards.
func X1FailedCleanupIsNotSwallowed(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	rs, ok := tg.(target.Restarter)
	if !ok {
		HarnessError(t, "the case restarts the producer (Needs.Restart) but the target is no target.Restarter: run it through Case.Execute")
	}
	defer func() {
		h.cleanup()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := rs.Restart(rctx, target.RoleProducer); err != nil {
			t.Errorf("harness error: restart the producer after X-1: %v", err)
		}
	}()
	img := fixture(t, "video-001.jpeg")

	res := h.generate(h.prod, withExtra(h.publishRequest(nil, imageItem(img)), map[string]any{HookCleanupFail: true}))
	ready := res.EncoderReady()
	if res.Code() != codes.OK || ready == nil {
		t.Fatalf("Publish(image=%s, %s) = %s; want OK with EncoderReady", img.Name, HookCleanupFail, describe(res))
	}
	st, abortErr := h.abort(h.prod, ready.GetRef())
	health, err := h.prod.Health(ctx)
	if err != nil {
		t.Fatalf("Health(producer) after a failed cleanup = %s; want NOT_READY with a reason", statusString(err))
	}
	if abortErr == nil && health.GetState() == pb.HealthState_HEALTH_STATE_READY {
		next := h.generate(h.prod, h.publishRequest(nil, imageItem(img)))
		if next.Code() == codes.OK {
			// Nothing failed that the wire can see: the hook is a baton
			// extension beyond CONTRACT section 4, so a target may not
			// implement it (or it swallowed the failure: indistinguishable).
			discovered(t, fmt.Sprintf("after Publish(%s) and Abort (= %s) the producer stayed READY and served: it does not act on the %s test hook, or it swallowed the failure", HookCleanupFail, abortName(st), HookCleanupFail))
		}
	}
	t.Logf("Abort(%s) whose cleanup fails = %s", refLabel(ready.GetRef()), abortAnswer(st, abortErr))
	if health.GetState() != pb.HealthState_HEALTH_STATE_NOT_READY || !hasReason(health) {
		t.Errorf("X-1 Health(producer) after a failed cleanup = %s%s; want NOT_READY with a reason", health.GetState(), healthChecks(health))
	}
	next := h.generate(h.prod, h.publishRequest(nil, imageItem(fixture(t, "basn6a08.png"))))
	if next.Code() != codes.Unavailable || next.Status.Message() == "" || next.EncoderReady() != nil {
		t.Errorf("X-1 Publish(image=basn6a08.png) after a failed cleanup = %s; want UNAVAILABLE with a reason", describe(next))
	}
}

// hasReason reports whether a non-READY Health names a check with a message.
func hasReason(resp *pb.HealthResponse) bool {
	for _, c := range resp.GetChecks() {
		if c.GetState() != pb.HealthState_HEALTH_STATE_READY && c.GetMessage() != "" {
			return true
		}
	}
	return false
}

// abortAnswer describes an Abort's answer: its status or its error.
func abortAnswer(st pb.AbortStatus, err error) string {
	if err != nil {
		return statusString(err)
	}
	return abortName(st)
}
