package suite

import (
	"context"
	"fmt"
	"strings"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
)

// Baseline-equivalence cases (CONTRACT B-1, B-2).

// b1Images are the B-1 images: one per decoder family (JPEG, PNG with
// alpha, GIF, WebP lossy).
var b1Images = []string{"video-001.jpeg", "basn6a08.png", "video-001.gif", "video-001.lossy.webp"}

// b1TwoImages are the images of the two-marker B-1 run, in prompt order.
var b1TwoImages = []string{"video-001.png", "triangle-001.gif"}

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

// expectSameAsBaseline reports (Errorf) unless got (an E+PD answer) has
// the token ids and usage (prompt, completion, total) of want, both
// carrying a Usage.
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

// B1DisaggregatedMatchesBaseline runs 4 images x 2 prompts (with and without <image>) and one two-image prompt through E+PD and the baseline: equal token ids and usage (B-1).
func B1DisaggregatedMatchesBaseline(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	h.needBaseline()
	defer h.cleanup()

	runs := b1Runs(t)

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

// b2Pairs are pairs of visibly different images; B-2 uses the first pair
// whose baseline answers differ.
var b2Pairs = [][2]string{
	{"video-001.png", "triangle-001.gif"},
	{"basn6a08.png", "basn0g08.png"},
	{"blue-purple-pink.png", "gopher-doc.with-alpha.png"},
}

// B2DifferentImagesDifferentAnswers warms the consumer's prefix cache with image A twice, then asks about image B with the same prompt: each E+PD answer equals its own baseline, and B's differs from A's (B-2).
func B2DifferentImagesDifferentAnswers(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	h.needBaseline()
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	var a, b fixtures.Image
	var baseA, baseB *target.GenerateResult
	for _, pair := range b2Pairs {
		a, b = fixture(t, pair[0]), fixture(t, pair[1])
		var okA, okB bool
		baseA, okA = h.baseline(prompt, a)
		baseB, okB = h.baseline(prompt, b)
		if !okA || !okB {
			return
		}
		if !sameAnswer(baseA, baseB) {
			break
		}
		t.Logf("Baseline(image=%s) and Baseline(image=%s) agree on %q; trying another pair", a.Name, b.Name, prompt)
		baseA = nil
	}
	if baseA == nil {
		t.Fatalf("Baseline answers equal for every pair %v with prompt %q; want different images to get their own baseline answers (H-2), else B-2 cannot be checked", b2Pairs, prompt)
	}

	gotA1, ok1 := h.disaggregated(prompt, a)
	gotA2, ok2 := h.disaggregated(prompt, a) // the consumer's prefix cache now holds A
	gotB, ok3 := h.disaggregated(prompt, b)
	if !ok1 || !ok2 || !ok3 {
		return
	}
	expectSameAsBaseline(t, fmt.Sprintf("image=%s, prompt=%q, first", a.Name, prompt), gotA1, baseA)
	expectSameAsBaseline(t, fmt.Sprintf("image=%s, prompt=%q, second (warm cache)", a.Name, prompt), gotA2, baseA)
	if sameAnswer(gotB, gotA1) {
		t.Errorf("E+PD(image=%s, prompt=%q) after two runs of image=%s = A's tokens %s; want its own answer %s (is the prefix cache keyed by text alone?)",
			b.Name, prompt, a.Name, tokensString(gotB.TokenIDs()), tokensString(baseB.TokenIDs()))
	}
	expectSameAsBaseline(t, fmt.Sprintf("image=%s, prompt=%q, after image=%s twice", b.Name, prompt, a.Name), gotB, baseB)
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

// B1EPPDMatchesBaseline runs 4 images x 2 prompts (with and without <image>), one two-image prompt and one text-only prompt through E+P+D (publish on E, prefill on P, decode on D) and the baseline: equal token ids and usage, and P's PrefillReady carries the baseline's prompt_tokens with no completion (B-1).
func B1EPPDMatchesBaseline(ctx context.Context, t TB, tg target.Target) {
	h := needEPPD(ctx, t, tg)
	h.needBaseline()
	defer h.cleanup()

	runs := append(b1Runs(t), b1Run{promptText(t, promptTextOnly), nil})

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

// b1Runs are the B-1 comparisons of every topology: each b1Images image with
// and without an <image> marker, and one two-image prompt.
func b1Runs(t TB) []b1Run {
	var runs []b1Run
	for _, name := range b1Images {
		for _, p := range []string{promptMarker, promptNoMarker} {
			runs = append(runs, b1Run{promptText(t, p), []fixtures.Image{fixture(t, name)}})
		}
	}
	two := make([]fixtures.Image, len(b1TwoImages))
	for i, name := range b1TwoImages {
		two[i] = fixture(t, name)
	}
	return append(runs, b1Run{promptText(t, promptTwo), two})
}
