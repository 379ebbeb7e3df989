package lm

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSessionRoundTrip (E+P+D, B-1): prefill on one model, marshal, unmarshal
// and decode on another model with the same seed gives Generate's answer.
func TestSessionRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	img := randomImage(rng, 196, 64)
	tests := []struct {
		name string
		req  Request
	}{
		{name: "text only", req: Request{Prompt: "Tell me."}},
		{name: "image", req: Request{Prompt: "Describe <image> briefly.", Images: []Image{img}}},
		{name: "image with stops", req: Request{Prompt: "Describe.", Images: []Image{img}, MaxTokens: 7, StopTexts: []string{"e"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := generate(t, New(Config{Seed: 3}), tt.req)

			s, err := New(Config{Seed: 3}).Prefill(tt.req) // P
			if err != nil {
				t.Fatalf("Prefill = %v", err)
			}
			b, _ := s.MarshalBinary()
			if len(b) != SessionBytes || len(b) > 1024 {
				t.Fatalf("MarshalBinary = %d bytes, want SessionBytes = %d", len(b), SessionBytes)
			}
			got, err := UnmarshalSession(b) // D
			if err != nil {
				t.Fatalf("UnmarshalSession = %v", err)
			}
			if got.PromptTokens() != s.PromptTokens() || got.ImageCount() != len(tt.req.Images) || got.PrefixCacheHit() {
				t.Errorf("unmarshalled session: %d prompt tokens, %d images, hit %v; want %d, %d, false",
					got.PromptTokens(), got.ImageCount(), got.PrefixCacheHit(), s.PromptTokens(), len(tt.req.Images))
			}
			var a answer
			res, err := New(Config{Seed: 3}).Decode(context.Background(), got, Request{
				MaxTokens: tt.req.MaxTokens, StopTexts: tt.req.StopTexts, // D sees only the stopping options
			}, func(tok Token) error { a.tokens = append(a.tokens, tok); return nil })
			if err != nil || res != want.res || !slices.Equal(a.tokens, want.tokens) {
				t.Errorf("resumed decode = %v %+v %v; Generate = %v %+v", ids(a.tokens), res, err, ids(want.tokens), want.res)
			}
		})
	}
}

func TestSessionMalformed(t *testing.T) {
	s, err := New(Config{Seed: 3}).Prefill(Request{Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := s.MarshalBinary()
	flip := func(i int) []byte { b := slices.Clone(good); b[i] ^= 1; return b }
	tests := []struct {
		name string
		b    []byte
	}{
		{name: "nil", b: nil},
		{name: "truncated", b: good[:len(good)-1]},
		{name: "trailing byte", b: append(slices.Clone(good), 0)},
		{name: "bad magic", b: flip(0)},
		{name: "bad version", b: flip(3)},
		{name: "flipped state bit", b: flip(14)},
		{name: "flipped prompt count", b: flip(20)},
		{name: "flipped checksum", b: flip(len(good) - 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := UnmarshalSession(tt.b); !errors.Is(err, ErrBadSession) {
				t.Errorf("UnmarshalSession(%x) = %v, %v; want ErrBadSession", tt.b, got, err)
			}
		})
	}
	// Well-formed bytes that the decoding model did not make, or no session.
	emit := func(Token) error { t.Error("a token was emitted for a bad session"); return nil }
	decoded, _ := UnmarshalSession(good)
	if _, err := New(Config{Seed: 4}).Decode(context.Background(), decoded, Request{}, emit); !errors.Is(err, ErrBadSession) {
		t.Errorf("Decode of a session from another seed = %v, want ErrBadSession", err)
	}
	if _, err := New(Config{}).Decode(context.Background(), nil, Request{}, emit); !errors.Is(err, ErrBadSession) {
		t.Errorf("Decode(nil session) = %v, want ErrBadSession", err)
	}
	// A session whose prompt fills a smaller decoder's context window.
	big, _ := New(Config{Seed: 3}).Prefill(Request{Prompt: "many words in this prompt"})
	if _, err := New(Config{Seed: 3, MaxContextTokens: 2}).Decode(context.Background(), big, Request{}, emit); !errors.Is(err, ErrContextTooLong) {
		t.Errorf("Decode past the context window = %v, want ErrContextTooLong", err)
	}
	if _, err := New(Config{Seed: 3}).Decode(context.Background(), s, Request{StopTexts: []string{""}}, emit); !errors.Is(err, ErrBadStopping) {
		t.Errorf("Decode with an empty stop text = %v, want ErrBadStopping", err)
	}
}
