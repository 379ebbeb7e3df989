package lm

import (
	"context"
	"math/rand/v2"
	"testing"
)

// BenchmarkGenerate: one image of [196, 64] (tiny preset size) plus a short
// prompt, 64 tokens, with the prefix cache off (cold: tokenize, signature,
// decode) and on (warm: the same image again).
func BenchmarkGenerate(b *testing.B) {
	img := randomImage(rand.New(rand.NewPCG(1, 1)), 196, 64)
	req := Request{Prompt: "Describe the image in detail.", Images: []Image{img}, MaxTokens: 64, IgnoreEOS: true}
	discard := func(Token) error { return nil }
	for _, bc := range []struct {
		name    string
		entries int
	}{{"cold", -1}, {"cached", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			m := New(Config{PrefixCacheEntries: bc.entries})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Generate(context.Background(), req, discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
