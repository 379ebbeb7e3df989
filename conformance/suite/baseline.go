package suite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
)

// Baseline-equivalence cases (CONTRACT B-1, B-2).

// b1Images are the B-1 images: one per decoder family (JPEG, PNG with
// alpha, and GIF and WebP lossy for a target that declares them: see
// declaredImages).
var b1Images = []string{"video-001.jpeg", "basn6a08.png", "video-001.gif", "video-001.lossy.webp"}

// b1TwoImages are the images of the two-marker B-1 run, in prompt order.
var b1TwoImages = []string{"video-001.png", "video-005.gray.jpeg"}

// b1RequiredImages are the fixtures of the required formats (CONTRACT "How
// requests look"): PNG of every colour type at every bit depth PNG allows
// for it, Adam7 interlaced PNG, and JPEG baseline and progressive (colour
// and grayscale, 4:2:0 and 4:4:4, restart markers).
var b1RequiredImages = []string{
	"basn0g01.png", "basn0g02.png", "basn0g04.png", "basn0g08.png", "basn0g16.png",
	"basn2c08.png", "basn2c16.png",
	"basn3p01.png", "basn3p02.png", "basn3p04.png", "basn3p08.png",
	"basn4a08.png", "basn4a16.png",
	"basn6a08.png", "basn6a16.png",
	"basn3p04-31i.png", "benchRGB-interlace.png",
	"video-001.jpeg", "video-001.progressive.jpeg", "video-005.gray.jpeg", "video-005.gray.q50.progressive.jpeg",
	"video-001.q50.444.jpeg", "video-001.restart2.jpeg",
}

// baseline runs prompt with imgs on the baseline and reports (Errorf)
// unless it answers with tokens; it returns the result and whether it did.
func (h *harness) baseline(prompt string, imgs ...fixtures.Image) (*target.GenerateResult, bool) {
	h.t.Helper()
	res := h.generate(h.base, h.baselineRequest(prompt, imageItems(imgs...)...))
	return res, expectTokens(h.t, fmt.Sprintf("Baseline(%s, prompt=%q)", imageNames(imgs), prompt), res)
}

// disaggregated publishes imgs on the producer and consumes the reference
// with prompt on the consumer (E+PD); it reports (Errorf) unless the
// consumer answers with tokens.
func (h *harness) disaggregated(prompt string, imgs ...fixtures.Image) (*target.GenerateResult, bool) {
	h.t.Helper()
	ref := h.publish(imgs...).GetRef()
	return h.consumeOK(prompt, ref, fmt.Sprintf("%s, prompt=%q", imageNames(imgs), prompt))
}

func imageNames(imgs []fixtures.Image) string {
	names := make([]string, len(imgs))
	for i, im := range imgs {
		names[i] = im.Name
	}
	return "image=" + strings.Join(names, ",")
}

// expectSameAnswer reports (Errorf) unless got has the token ids of want
// (an answer of another rule's case compared with the baseline: only B-1
// compares usage); what names the run for the message.
func expectSameAnswer(t TB, what string, got, want *target.GenerateResult) bool {
	t.Helper()
	if sameAnswer(got, want) {
		return true
	}
	t.Errorf("E+PD(%s) = tokens %s; want its own baseline answer %s", what, tokensString(got.TokenIDs()), tokensString(want.TokenIDs()))
	return false
}

// expectSameAsBaseline reports (Errorf) unless got (an E+PD answer) has
// the token ids and usage (prompt, completion, total) of want, both
// carrying a Usage: the B-1 comparison.
func expectSameAsBaseline(t TB, what string, got, want *target.GenerateResult) {
	t.Helper()
	expectSameAsBaselineIn(t, target.TopologyEPD, what, got, want)
}

// expectSameAsBaselineIn is expectSameAsBaseline for an answer of topology
// topo ("E+PD", "E+P+D"), named so in messages.
func expectSameAsBaselineIn(t TB, topo, what string, got, want *target.GenerateResult) {
	t.Helper()
	if !sameAnswer(got, want) {
		t.Errorf("%s(%s) = tokens %s; want the baseline's %s", topo, what, tokensString(got.TokenIDs()), tokensString(want.TokenIDs()))
	}
	gu, wu := got.Usage(), want.Usage()
	switch {
	case gu == nil:
		t.Errorf("%s(%s) = no Usage on the final response; want the baseline's %s", topo, what, usageString(wu))
	case wu == nil:
		t.Errorf("Baseline(%s) = no Usage on the final response; want one to compare with", what)
	case !sameUsage(gu, wu):
		t.Errorf("%s(%s) = usage %s; want the baseline's %s (the encoder's usage is not counted)", topo, what, usageString(gu), usageString(wu))
	}
}

// B1DisaggregatedMatchesBaseline runs 2 images (4 when the profile declares GIF and WebP) x 2 prompts (with and without <image>) and one two-image prompt through E+PD and the baseline: equal token ids and usage (B-1).
func B1DisaggregatedMatchesBaseline(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()

	runs := b1Runs(h)

	for _, r := range runs {
		what := fmt.Sprintf("%s, prompt=%q", imageNames(r.imgs), r.prompt)
		want, ok := h.baseline(r.prompt, r.imgs...)
		if !ok {
			continue
		}
		got, ok := h.disaggregated(r.prompt, r.imgs...)
		if !ok {
			continue
		}
		expectSameAsBaseline(t, what, got, want)
	}
}

// B1RequiredFormatsMatchBaseline hands off every b1RequiredImages fixture (PNG of each colour type and bit depth, interlaced; JPEG baseline and progressive) with one prompt through E+PD and the baseline: equal token ids and usage (B-1).
func B1RequiredFormatsMatchBaseline(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	for _, name := range b1RequiredImages {
		img := fixture(t, name)
		want, ok := h.baseline(prompt, img)
		if !ok {
			continue
		}
		got, ok := h.disaggregated(prompt, img)
		if !ok {
			continue
		}
		expectSameAsBaseline(t, fmt.Sprintf("image=%s, prompt=%q", name, prompt), got, want)
	}
}

// b2Pairs are pairs of visibly different PNG and JPEG images; B-2 uses the
// first pair whose baseline answers differ.
var b2Pairs = [][2]string{
	{"video-001.png", "blue-purple-pink.png"},
	{"basn6a08.png", "basn0g08.png"},
	{"video-001.jpeg", "gopher-doc.with-alpha.png"},
}

// discoversBaselinesAgree is the Needs.Discovers of the cases that need
// two images the target's baseline answers differently.
const discoversBaselinesAgree = "whether the target's baseline answers the fixture images of a pair differently (a model may answer two images alike)"

// distinctBaselines returns the first pair of pairs whose baseline answers
// with prompt differ, with those answers; when every pair's agree it ends
// the case `not verifiable` (the rule is about images whose baselines differ).
func (h *harness) distinctBaselines(prompt string, pairs [][2]fixtures.Image) (a, b fixtures.Image, baseA, baseB *target.GenerateResult) {
	h.t.Helper()
	for _, pair := range pairs {
		a, b = pair[0], pair[1]
		var okA, okB bool
		baseA, okA = h.baseline(prompt, a)
		baseB, okB = h.baseline(prompt, b)
		if !okA || !okB {
			h.t.Fatalf("Baseline(image=%s or %s) gave no answer; the case needs both", a.Name, b.Name)
		}
		if !sameAnswer(baseA, baseB) {
			return a, b, baseA, baseB
		}
		h.t.Logf("Baseline(image=%s) and Baseline(image=%s) agree on %q; trying another pair", a.Name, b.Name, prompt)
	}
	discovered(h.t, fmt.Sprintf("the baseline answers every pair of %s alike with prompt %q, so no pair can tell the images apart", pairNames(pairs), prompt))
	return
}

// pairNames lists pairs for messages: "[a/b c/d]".
func pairNames(pairs [][2]fixtures.Image) string {
	names := make([]string, len(pairs))
	for i, p := range pairs {
		names[i] = p[0].Name + "/" + p[1].Name
	}
	return "[" + strings.Join(names, " ") + "]"
}

// fixturePairs resolves pairs of fixture names.
func fixturePairs(t TB, names [][2]string) [][2]fixtures.Image {
	t.Helper()
	out := make([][2]fixtures.Image, len(names))
	for i, p := range names {
		out[i] = [2]fixtures.Image{fixture(t, p[0]), fixture(t, p[1])}
	}
	return out
}

// expectOwnAnswerAfter warms the consumer's prefix cache with image a
// twice, then consumes b with the same prompt, and reports (Errorf) unless
// b's E+PD answer has b's own baseline tokens, not a's (B-2: the check
// that catches cross-image cache reuse; usage is B-1's).
func (h *harness) expectOwnAnswerAfter(prompt string, a, b fixtures.Image, baseA, baseB *target.GenerateResult) {
	h.t.Helper()
	for i := 0; i < 2; i++ {
		if _, ok := h.disaggregated(prompt, a); !ok {
			return
		}
	}
	gotB, ok := h.disaggregated(prompt, b)
	if !ok {
		return
	}
	switch {
	case sameAnswer(gotB, baseA):
		h.t.Errorf("E+PD(image=%s, prompt=%q) after two runs of image=%s = %s's tokens %s; want its own answer %s (is the prefix cache keyed by text alone, or by an identity the two images share?)",
			b.Name, prompt, a.Name, a.Name, tokensString(gotB.TokenIDs()), tokensString(baseB.TokenIDs()))
	case !sameAnswer(gotB, baseB):
		h.t.Errorf("E+PD(image=%s, prompt=%q) after two runs of image=%s = tokens %s; want its own answer %s", b.Name, prompt, a.Name, tokensString(gotB.TokenIDs()), tokensString(baseB.TokenIDs()))
	}
}

// B2DifferentImagesDifferentAnswers warms the consumer's prefix cache with image A twice, then asks about image B with the same prompt: B's E+PD answer is its own baseline's, not A's (B-2).
func B2DifferentImagesDifferentAnswers(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	a, b, baseA, baseB := h.distinctBaselines(prompt, fixturePairs(t, b2Pairs))
	h.expectOwnAnswerAfter(prompt, a, b, baseA, baseB)
}

// B2NearImagesDifferentAnswers does the same for images that differ only in their dimensions (the same pixel bytes as 30x150 and as 150x30) and for images that differ in one pixel (fixtures.B2Pairs), each pair whose baselines differ: B's E+PD answer is its own, not A's (B-2).
func B2NearImagesDifferentAnswers(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	checked := 0
	for _, pair := range fixtures.B2Pairs() {
		a, b := pair[0], pair[1]
		baseA, okA := h.baseline(prompt, a)
		baseB, okB := h.baseline(prompt, b)
		if !okA || !okB {
			continue
		}
		if sameAnswer(baseA, baseB) {
			t.Logf("Baseline(image=%s) and Baseline(image=%s) agree on %q: B-2 asks nothing of this pair", a.Name, b.Name, prompt)
			continue
		}
		checked++
		h.expectOwnAnswerAfter(prompt, a, b, baseA, baseB)
	}
	if checked == 0 && !t.Failed() {
		discovered(t, fmt.Sprintf("the baseline answers every pair of %s alike with prompt %q", pairNames(fixtures.B2Pairs()), prompt))
	}
}

// prefillDecode runs prompt with imgs through E+P+D: publish on the
// producer (skipped for a text-only prompt), prefill on P, decode on D with
// P's KV session and decode preparation. It reports (Errorf) unless P's
// PrefillReady ends the stream with Usage {N, 0, N}, where N is the
// baseline's prompt_tokens (wantPrompt; 0 skips the check), and D answers
// with tokens; it returns D's result and whether it had tokens.
func (h *harness) prefillDecode(prompt string, wantPrompt uint32, imgs ...fixtures.Image) (*target.GenerateResult, bool) {
	h.t.Helper()
	what := fmt.Sprintf("%s, prompt=%q", imageNames(imgs), prompt)
	var ref *pb.EncoderCacheRef
	if len(imgs) > 0 {
		ref = h.publish(imgs...).GetRef()
	}
	req := h.consumeRequest(prompt, ref)
	if ref == nil {
		req.Encoder = nil // text-only: P prefills without a reference (N-2)
	}
	res := h.generate(h.pre, req)
	pr := prefillReady(res)
	if res.Code() != codes.OK || pr == nil || pr.GetKvSession() == nil {
		h.t.Errorf("Prefill(%s) = %s; want OK ending with PrefillReady carrying a KV session", what, describe(res))
		return res, false
	}
	if n := len(res.TokenIDs()); n > 0 {
		h.t.Errorf("Prefill(%s) = %s; want no token (PrefillReady is the terminal success of a prefill-only request)", what, describe(res))
	}
	if u := res.Usage(); u == nil || u.GetCompletionTokens() != 0 || u.GetTotalTokens() != u.GetPromptTokens() || (wantPrompt > 0 && u.GetPromptTokens() != wantPrompt) {
		h.t.Errorf("Prefill(%s) = usage %s; want {prompt %d, completion 0, total %d}", what, usageString(u), wantPrompt, wantPrompt)
	}
	session, prep := pr.GetKvSession(), pr.GetDecodePreparation()
	if v := session.GetAttributesStruct().GetFields()[multimodalAttribute]; len(imgs) > 0 && !v.GetBoolValue() {
		h.t.Errorf("Prefill(%s) = kv_session attributes %v; want %s = true (WIRE.md conventions)", what, session.GetAttributesStruct().AsMap(), multimodalAttribute)
	}
	got := h.generate(h.dec, h.decodeRequest(prompt, session, prep))
	return got, expectTokens(h.t, fmt.Sprintf("Decode(session=%s, %s)", session.GetSessionId(), what), got)
}

// B1EPPDMatchesBaseline runs 2 images (4 with GIF and WebP declared) x 2 prompts (with and without <image>), one two-image prompt and one text-only prompt through E+P+D (publish on E, prefill on P, decode on D) and the baseline: equal token ids and usage, and P's PrefillReady carries the baseline's prompt_tokens with no completion (B-1).
func B1EPPDMatchesBaseline(ctx context.Context, t TB, tg target.Target) {
	h := needEPPD(ctx, t, tg)
	defer h.cleanup()

	runs := append(b1Runs(h), b1Run{promptText(t, promptTextOnly), nil})

	for _, r := range runs {
		what := fmt.Sprintf("%s, prompt=%q", imageNames(r.imgs), r.prompt)
		want, ok := h.baseline(r.prompt, r.imgs...)
		if !ok {
			continue
		}
		got, ok := h.prefillDecode(r.prompt, want.Usage().GetPromptTokens(), r.imgs...)
		if !ok {
			continue
		}
		expectSameAsBaselineIn(t, target.TopologyEPPD, what, got, want)
	}
}

// b1Run is one B-1 comparison: a prompt and its images.
type b1Run struct {
	prompt string
	imgs   []fixtures.Image
}

// b1Runs are the B-1 comparisons of every topology: each b1Images image of
// a format the profile declares, with and without an <image> marker, and
// one two-image prompt.
func b1Runs(h *harness) []b1Run {
	t := h.t
	var runs []b1Run
	for _, img := range h.declaredImages(b1Images...) {
		for _, p := range []string{promptMarker, promptNoMarker} {
			runs = append(runs, b1Run{promptText(t, p), []fixtures.Image{img}})
		}
	}
	two := make([]fixtures.Image, len(b1TwoImages))
	for i, name := range b1TwoImages {
		two[i] = fixture(t, name)
	}
	return append(runs, b1Run{promptText(t, promptTwo), two})
}

// The B-1 volume case: many large images handed off at once.
const (
	// volumeHandoffs is how many 1920x1080 images the volume case hands off.
	volumeHandoffs = 100
	// volumeInFlight is how many of them are in flight at once.
	volumeInFlight = 8
)

// B1LargeImagesUnderLoad hands off 100 images of 1920x1080 (fixtures.FullHDImages, 8 distinct, JPEG and PNG) through E+PD, 8 handoffs in flight at a time: every publish answers one EncoderReady and every consume the token ids and usage of that image's baseline (B-1 under volume; labels slow, volume).
func B1LargeImagesUnderLoad(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	imgs := fixtures.FullHDImages()
	wants := make([]*target.GenerateResult, len(imgs))
	for i, img := range imgs {
		want, ok := h.baseline(prompt, img)
		if !ok {
			return
		}
		wants[i] = want
	}

	type handoff struct {
		img       fixtures.Image
		published *target.GenerateResult
		consumed  *target.GenerateResult
		err       error
	}
	runs := make([]handoff, volumeHandoffs)
	start := time.Now()
	inFlight(volumeHandoffs, volumeInFlight, func(i int) {
		r := &runs[i]
		r.img = imgs[i%len(imgs)]
		if r.published, r.err = h.prod.Generate(ctx, h.publishRequest(nil, imageItem(r.img))); r.err != nil || r.published.Status == nil {
			return
		}
		if ready := r.published.EncoderReady(); r.published.Code() == codes.OK && ready != nil {
			r.consumed, r.err = h.cons.Generate(ctx, h.consumeRequest(prompt, ready.GetRef()))
		}
	})
	t.Logf("B-1 volume: %d handoffs of %dx%d images, %d in flight, in %v", volumeHandoffs, fixtures.FullHDWidth, fixtures.FullHDHeight, volumeInFlight, time.Since(start).Round(time.Millisecond))
	failures := 0
	for i, r := range runs {
		if r.err != nil || r.published == nil || r.published.Status == nil || (r.consumed != nil && r.consumed.Status == nil) {
			HarnessError(t, "handoff %d (image=%s): %v", i, r.img.Name, r.err)
		}
		if ready := r.published.EncoderReady(); ready != nil {
			h.track(ready.GetRef())
		}
		what := fmt.Sprintf("image=%s, handoff %d of %d, %d in flight", r.img.Name, i+1, volumeHandoffs, volumeInFlight)
		if r.consumed == nil {
			failures++
			if failures <= tamperReportMax {
				t.Errorf("Publish(%s) = %s; want OK with one EncoderReady", what, describe(r.published))
			}
			continue
		}
		if !expectTokens(t, consumeCall(r.published.EncoderReady().GetRef(), what), r.consumed) {
			failures++
			continue
		}
		expectSameAsBaseline(t, what, r.consumed, wants[i%len(imgs)])
	}
}
