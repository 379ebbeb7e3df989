package lm

import (
	"errors"
	"math"
	"math/bits"
	"slices"
	"testing"
)

// TestSignatureRobustToNoise: a GPU-like perturbation of relative size 1e-5
// leaves the signature, and so the answer, unchanged for the vast majority of
// random images (package doc estimates ~2e-3 flips per image).
func TestSignatureRobustToNoise(t *testing.T) {
	rng := testRNG(t)
	m := New(Config{})
	const trials, relNoise = 64, 1e-5
	sigChanged, answerChanged, bitsFlipped := 0, 0, 0
	for range trials {
		img := randomImage(rng, 196, 512)
		noisy := img
		noisy.Data = make([]float32, len(img.Data))
		x := rng.Uint64() // inline LCG: uniform u in [-1, 1), cheap under -race
		for i, v := range img.Data {
			x = x*6364136223846793005 + 1442695040888963407
			u := float64(x>>11)/(1<<52) - 1
			noisy.Data[i] = v * float32(1+relNoise*u)
		}
		noisy.ContentHash += "-noisy" // another encoder's bytes: a fresh cache key
		s1, err1 := ImageSignature(img)
		s2, err2 := ImageSignature(noisy)
		if err1 != nil || err2 != nil {
			t.Fatalf("ImageSignature = %v, %v; want no error", err1, err2)
		}
		if s1 != s2 {
			sigChanged++
			for b := range s1 {
				bitsFlipped += bits.OnesCount64(s1[b] ^ s2[b])
			}
		}
		req := Request{Prompt: "Describe the image.", Images: []Image{img}, MaxTokens: 256}
		a := generate(t, m, req)
		req.Images = []Image{noisy}
		if b := generate(t, m, req); !slices.Equal(ids(a.tokens), ids(b.tokens)) {
			answerChanged++
		}
	}
	t.Logf("relative noise %g: %d/%d signatures changed (%d bits), %d/%d answers changed",
		relNoise, sigChanged, trials, bitsFlipped, answerChanged, trials)
	if answerChanged > trials/20 {
		t.Errorf("%d/%d answers changed under relative noise %g, want at most %d", answerChanged, trials, relNoise, trials/20)
	}
}

// TestSignatureSeparatesImages: unrelated images differ in about half of the
// 256 bits, and a constant offset on every value (a shared bias) is ignored.
func TestSignatureSeparatesImages(t *testing.T) {
	rng := testRNG(t)
	a, b := randomImage(rng, 196, 512), randomImage(rng, 196, 512)
	sa, _ := ImageSignature(a)
	sb, _ := ImageSignature(b)
	diff := 0
	for i := range sa {
		diff += bits.OnesCount64(sa[i] ^ sb[i])
	}
	if diff < 64 || diff > 192 {
		t.Errorf("unrelated images differ in %d of 256 signature bits, want about 128", diff)
	}
	shifted := a
	shifted.Data = make([]float32, len(a.Data))
	for i, v := range a.Data {
		shifted.Data[i] = v + 0.5
	}
	if ss, _ := ImageSignature(shifted); ss != sa {
		t.Errorf("adding a constant 0.5 changed the signature: %x vs %x", ss, sa)
	}
	flipped := a // the same rows in reverse order: same mean, other bands
	flipped.Data = make([]float32, len(a.Data))
	for r := range a.Rows {
		copy(flipped.Data[r*a.Cols:(r+1)*a.Cols], a.Data[(a.Rows-1-r)*a.Cols:])
	}
	if sf, _ := ImageSignature(flipped); sf == sa {
		t.Errorf("reversing the rows left the signature unchanged (%x): bands are not read", sf)
	}
}

func TestImageSignatureMalformed(t *testing.T) {
	tests := []struct {
		name string
		img  Image
	}{
		{name: "zero rows", img: Image{Rows: 0, Cols: 4, Data: nil}},
		{name: "negative cols", img: Image{Rows: 2, Cols: -2, Data: make([]float32, 4)}},
		{name: "short data", img: Image{Rows: 2, Cols: 4, Data: make([]float32, 7)}},
		{name: "long data", img: Image{Rows: 2, Cols: 4, Data: make([]float32, 9)}},
		{name: "NaN", img: Image{Rows: 1, Cols: 2, Data: []float32{0, float32(math.NaN())}}},
		{name: "+Inf", img: Image{Rows: 1, Cols: 2, Data: []float32{float32(math.Inf(1)), 0}}},
		{name: "huge shape", img: Image{Rows: 1 << 31, Cols: 1 << 31, Data: make([]float32, 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ImageSignature(tt.img); !errors.Is(err, ErrBadImage) {
				t.Errorf("ImageSignature(%s) = %v, want ErrBadImage", tt.name, err)
			}
		})
	}
	// Fewer rows than bands still works and reads every row.
	one := Image{Rows: 1, Cols: 3, Data: []float32{1, -2, 3}}
	if _, err := ImageSignature(one); err != nil {
		t.Errorf("ImageSignature(1 row) = %v, want no error", err)
	}
}
