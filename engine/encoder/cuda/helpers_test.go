package cudaenc

import (
	"context"
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/baton-dev/baton/engine/encoder"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/gpu/cuda"
)

// initializedAtStart: importing the package must not initialize CUDA.
var initializedAtStart bool

func TestMain(m *testing.M) {
	initializedAtStart = cuda.Initialized()
	os.Exit(m.Run())
}

// requireGPU skips the test, before any expensive setup, on a machine where
// CUDA cannot run (saying why).
func requireGPU(t testing.TB) {
	t.Helper()
	c, err := cuda.Open(0)
	if cuda.NoGPU(err) {
		t.Skipf("no GPU here, skipping: %v", err)
	}
	if err != nil {
		t.Fatalf("cuda.Open(0): %v", err)
	}
	_ = c.Close()
}

// newOrSkip builds an encoder, or skips the test on a machine without a GPU
// (saying why).
func newOrSkip(t testing.TB, cfg Config) *Encoder {
	t.Helper()
	e, err := New(cfg)
	if cuda.NoGPU(err) {
		t.Skipf("no GPU here, skipping: %v", err)
	}
	if err != nil {
		t.Fatalf("New(%s %v): %v", cfg.Preset.Name, cfg.Precision, err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// randomImages draws n images of random sizes (16..600 px a side) with
// random non-premultiplied RGBA pixels (some transparent), from r.
func randomImages(r *rand.Rand, n int) []image.Image {
	out := make([]image.Image, n)
	for i := range out {
		w, h := 16+r.IntN(585), 16+r.IntN(585)
		img := image.NewNRGBA(image.Rect(0, 0, w, h))
		for j := range img.Pix {
			img.Pix[j] = uint8(r.Uint32())
		}
		// A smooth gradient over part of the image, so that neighbouring
		// patches are correlated as in real pictures.
		for y := range h / 2 {
			for x := range w {
				img.SetNRGBA(x, y, color.NRGBA{R: uint8(x), G: uint8(y), B: uint8(x + y), A: 255})
			}
		}
		out[i] = img
	}
	return out
}

// newRand returns a generator with a fresh seed, logged so a failure can be
// replayed.
func newRand(t testing.TB) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %#x", seed)
	return rand.New(rand.NewPCG(seed, 0x6375646165))
}

// relErr is ||got-ref|| / ||ref|| in float64; NaN when got has a NaN.
func relErr(got, ref []float32) float64 {
	var num, den float64
	for i := range ref {
		d := float64(got[i]) - float64(ref[i])
		num += d * d
		den += float64(ref[i]) * float64(ref[i])
	}
	return math.Sqrt(num / den)
}

func allFinite(x []float32) (int, bool) {
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return i, false
		}
	}
	return 0, true
}

// lmSeed is the demo model's seed ("baton").
const lmSeed = 0x6261746f6e

// answer generates with a fresh model (no shared prefix cache) for one
// image embedding carrying the image's content hash.
func answer(t testing.TB, hash string, emb encoder.Embedding) []uint32 {
	t.Helper()
	m := lm.New(lm.Config{Seed: lmSeed, PrefixCacheEntries: -1})
	req := lm.Request{Prompt: "<image> Describe the picture in detail.",
		Images: []lm.Image{{ContentHash: hash, Rows: emb.Rows, Cols: emb.Cols, Data: emb.Data}}}
	var ids []uint32
	if _, err := m.Generate(context.Background(), req, func(tok lm.Token) error {
		ids = append(ids, tok.ID)
		return nil
	}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return ids
}
