package suite

import (
	"context"
	"fmt"
	"strings"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
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

// expectSameAsBaseline reports (Errorf) unless got has the token ids and
// usage (prompt, completion, total) of want, both carrying a Usage.
func expectSameAsBaseline(t TB, what string, got, want *target.GenerateResult) {
	t.Helper()
	if !sameAnswer(got, want) {
		t.Errorf("E+PD(%s) = tokens %s; want the baseline's %s", what, tokensString(got.TokenIDs()), tokensString(want.TokenIDs()))
	}
	gu, wu := got.Usage(), want.Usage()
	switch {
	case gu == nil:
		t.Errorf("E+PD(%s) = no Usage on the final response; want the baseline's %s", what, usageString(wu))
	case wu == nil:
		t.Errorf("Baseline(%s) = no Usage on the final response; want one to compare with", what)
	case !sameUsage(gu, wu):
		t.Errorf("E+PD(%s) = usage %s; want the baseline's %s (the encoder's usage is not counted)", what, usageString(gu), usageString(wu))
	}
}

// B1DisaggregatedMatchesBaseline runs 4 images x 2 prompts (with and without <image>) and one two-image prompt through E+PD and the baseline: equal token ids and usage (B-1).
func B1DisaggregatedMatchesBaseline(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	h.needBaseline()
	defer h.cleanup()

	type run struct {
		prompt string
		imgs   []fixtures.Image
	}
	var runs []run
	for _, name := range b1Images {
		for _, p := range []string{promptMarker, promptNoMarker} {
			runs = append(runs, run{promptText(t, p), []fixtures.Image{fixture(t, name)}})
		}
	}
	two := make([]fixtures.Image, len(b1TwoImages))
	for i, name := range b1TwoImages {
		two[i] = fixture(t, name)
	}
	runs = append(runs, run{promptText(t, promptTwo), two})

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
