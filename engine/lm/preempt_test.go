package lm

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// decodeAll runs a decode preempted after preemptAfter decided ids and
// resumed in the given way, and returns every emitted token and the result.
func decodeAll(t *testing.T, m *Model, req Request, preemptAfter uint32, recompute bool, resumeImages []Image) ([]Token, Result, error) {
	t.Helper()
	var toks []Token
	emit := func(tk Token) error { toks = append(toks, tk); return nil }
	s, err := m.Prefill(req)
	if err != nil {
		t.Fatal(err)
	}
	res, decided, err := m.DecodeWith(context.Background(), s, req, DecodeOptions{PreemptAfter: preemptAfter}, emit)
	if !errors.Is(err, ErrPreempted) {
		return toks, res, err
	}
	again := req
	again.Images = resumeImages
	s2, err := m.Prefill(again) // the recompute: a new context from a new encoder output
	if err != nil {
		t.Fatal(err)
	}
	res, _, err = m.DecodeWith(context.Background(), s2, again, DecodeOptions{Decided: decided, Recompute: recompute, Emitted: res.CompletionTokens}, emit)
	return toks, res, err
}

func TestR2PreemptedDecodeIsTokenIdentical(t *testing.T) {
	rng := testRNG(t)
	for _, arch := range []Architecture{DecoderOnly, EncoderDecoder} {
		m := New(Config{Seed: 3, Architecture: arch, PrefixCacheEntries: -1})
		img := randomImage(rng, 16, 32)
		req := Request{Prompt: "<image> describe the picture", Images: []Image{img}, MaxTokens: 40, IgnoreEOS: true}
		want := generate(t, m, req)
		for _, recompute := range []bool{false, true} {
			for _, after := range []uint32{1, 7, 39} {
				toks, res, err := decodeAll(t, m, req, after, recompute, []Image{img})
				if err != nil {
					t.Fatalf("%s recompute=%v after %d: %v", arch, recompute, after, err)
				}
				if !reflect.DeepEqual(toks, want.tokens) || res != want.res {
					t.Errorf("R-2 %s preempted after %d (recompute=%v) = %d tokens %+v; want %d tokens %+v", arch, after, recompute, len(toks), res, len(want.tokens), want.res)
				}
			}
		}
	}
}

func TestR2RecomputeFromAnotherOutputDiverges(t *testing.T) {
	rng := testRNG(t)
	m := New(Config{Seed: 3, Architecture: EncoderDecoder, PrefixCacheEntries: -1})
	img, other := randomImage(rng, 16, 32), randomImage(rng, 16, 32)
	req := Request{Prompt: "<image> what is it", Images: []Image{img}, MaxTokens: 30, IgnoreEOS: true}
	_, _, err := decodeAll(t, m, req, 10, true, []Image{other})
	if !errors.Is(err, ErrRecomputeDiverged) {
		t.Errorf("a full reset recomputed from another encoder output = %v; want ErrRecomputeDiverged", err)
	}
}

func TestEncoderDecoderReadsTheImageThroughCrossAttention(t *testing.T) {
	rng := testRNG(t)
	enc := New(Config{Seed: 3, Architecture: EncoderDecoder})
	dec := New(Config{Seed: 3})
	a, b := randomImage(rng, 16, 32), randomImage(rng, 16, 32)
	req := func(img Image) Request {
		return Request{Prompt: "<image> name it", Images: []Image{img}, MaxTokens: 20, IgnoreEOS: true}
	}
	ea, eb := generate(t, enc, req(a)), generate(t, enc, req(b))
	if ea.text == eb.text {
		t.Errorf("encoder-decoder: two images gave the same answer %q", ea.text)
	}
	if da := generate(t, dec, req(a)); da.text == ea.text {
		t.Errorf("the two architectures gave the same answer %q", da.text)
	}
	if again := generate(t, enc, req(a)); again.text != ea.text {
		t.Errorf("encoder-decoder is not deterministic: %q then %q", ea.text, again.text)
	}
	if _, err := ArchitectureByName("transformer"); !errors.Is(err, ErrUnknownArchitecture) {
		t.Errorf("ArchitectureByName(transformer) = %v", err)
	}
}
