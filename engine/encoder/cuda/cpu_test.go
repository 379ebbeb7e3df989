package cudaenc

import (
	"encoding/binary"
	"errors"
	"image"
	"math"
	"testing"

	"github.com/baton-dev/baton/engine/encoder"
	"github.com/baton-dev/baton/gpu/cuda"
)

func TestNotInitializedAtImport(t *testing.T) {
	if initializedAtStart {
		t.Fatal("CUDA initialized before any encoder was built")
	}
}

func TestConfigRejected(t *testing.T) {
	bad := encoder.Tiny
	bad.InDim++
	for name, cfg := range map[string]Config{
		"invalid preset":    {Preset: bad},
		"unknown precision": {Preset: encoder.Tiny, Precision: 7},
		"negative batch":    {Preset: encoder.Tiny, MaxBatch: -1},
		"huge batch":        {Preset: encoder.Tiny, MaxBatch: maxMaxBatch + 1},
		"negative device":   {Preset: encoder.Tiny, Device: -1},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: New = %v, want ErrBadConfig", name, err)
		}
	}
	if cuda.Initialized() && !initializedAtStart {
		// Only rejected configs so far in this test: none may touch CUDA.
		t.Log("note: CUDA initialized by an earlier test")
	}
	for _, s := range []string{"", "FP32", "fp16", "bf16 "} {
		if _, err := ParsePrecision(s); !errors.Is(err, ErrBadConfig) {
			t.Errorf("ParsePrecision(%q) = %v", s, err)
		}
	}
	for _, p := range []Precision{FP32, BF16} {
		if got, err := ParsePrecision(p.String()); err != nil || got != p {
			t.Errorf("ParsePrecision(%q) = %v, %v", p.String(), got, err)
		}
	}
}

func TestPadTo8(t *testing.T) {
	for in, want := range map[int]int{588: 592, 768: 776, 1024: 1032, 256: 264, 7: 8, 8: 16} {
		if got := padTo8(in); got != want {
			t.Errorf("padTo8(%d) = %d, want %d", in, got, want)
		}
	}
}

// patchValueRef is a Go transcription of the device's patchify
// (kernels/encoder.cu, BATON_PATCHIFY_BODY) for element (row, col), with the
// table as the device sees it (little-endian float32 bytes), so that its
// index arithmetic and the table can be checked against encoder.Preprocess
// on a machine without a GPU.
func patchValueRef(p encoder.Preset, lut, pix []byte, row, col int) float32 {
	if col >= p.InDim {
		if col == p.InDim {
			return 1
		}
		return 0
	}
	grid := p.ImageSize / p.PatchSize
	patches := grid * grid
	img := row / patches
	patch := row - img*patches
	py, px := patch/grid, patch%grid
	pp := p.PatchSize * p.PatchSize
	c := col / pp
	rem := col - c*pp
	dy, dx := rem/p.PatchSize, rem%p.PatchSize
	x, y := px*p.PatchSize+dx, py*p.PatchSize+dy
	off := ((img*p.ImageSize+y)*p.ImageSize+x)*8 + 2*c
	v := int(pix[off])<<8 | int(pix[off+1])
	return math.Float32frombits(binary.LittleEndian.Uint32(lut[4*(c*65536+v):]))
}

// TestPatchLayoutMatchesPreprocess checks on the CPU that resizeInto plus
// the kernel's patch arithmetic reproduce encoder.Preprocess bit for bit,
// for every preset, two images in one batch.
func TestPatchLayoutMatchesPreprocess(t *testing.T) {
	r := newRand(t)
	for _, p := range encoder.Presets() {
		imgs := randomImages(r, 2)
		per := 8 * p.ImageSize * p.ImageSize
		pix := make([]byte, 2*per)
		for i := range pix {
			pix[i] = 0xAB // stale content must not leak into the result
		}
		for i, img := range imgs {
			resizeInto(p, img, pix[i*per:(i+1)*per])
		}
		kp := padTo8(p.InDim)
		lut := make([]byte, 4*3*65536)
		for i, v := range normLUT() {
			binary.LittleEndian.PutUint32(lut[4*i:], math.Float32bits(v))
		}
		for i, img := range imgs {
			want := encoder.Preprocess(p, img)
			for row := range p.Patches() {
				for col := range kp {
					got := patchValueRef(p, lut, pix, i*p.Patches()+row, col)
					switch {
					case col < p.InDim:
						if math.Float32bits(got) != math.Float32bits(want[row*p.InDim+col]) {
							t.Fatalf("%s image %d (%v): X[%d,%d] = %v, Preprocess %v", p.Name, i, img.Bounds(), row, col, got, want[row*p.InDim+col])
						}
					case col == p.InDim && got != 1, col > p.InDim && got != 0:
						t.Fatalf("%s: padding X[%d,%d] = %v", p.Name, row, col, got)
					}
				}
			}
		}
	}
}

// TestFoldedWeights checks that the bias rows make [x, 1, 0...] * W' equal
// x * W + b (float64 arithmetic).
func TestFoldedWeights(t *testing.T) {
	p := encoder.Tiny
	w := encoder.NewWeights(p, encoder.DefaultSeed)
	kp, hp := padTo8(p.InDim), padTo8(p.HiddenDim)
	w1, w2 := foldedWeights(p, w, kp, hp)
	if len(w1) != kp*p.HiddenDim || len(w2) != hp*p.OutDim {
		t.Fatalf("sizes %d %d", len(w1), len(w2))
	}
	r := newRand(t)
	x := make([]float64, kp)
	for i := range p.InDim {
		x[i] = r.NormFloat64()
	}
	x[p.InDim] = 1
	for j := range p.HiddenDim {
		var folded, plain float64
		for i := range kp {
			folded += x[i] * float64(w1[i*p.HiddenDim+j])
		}
		for i := range p.InDim {
			plain += x[i] * float64(w.W1[i*p.HiddenDim+j])
		}
		plain += float64(w.B1[j])
		if math.Abs(folded-plain) > 1e-9 {
			t.Fatalf("hidden %d: folded %v, plain %v", j, folded, plain)
		}
	}
	for i := (p.HiddenDim + 1) * p.OutDim; i < len(w2); i++ {
		if w2[i] != 0 {
			t.Fatalf("W2' padding element %d = %v", i, w2[i])
		}
	}
	for j := range p.OutDim {
		if w2[p.HiddenDim*p.OutDim+j] != w.B2[j] {
			t.Fatalf("W2' bias row element %d = %v, want %v", j, w2[p.HiddenDim*p.OutDim+j], w.B2[j])
		}
	}
}

// TestNoGPU: without a GPU, New fails with an error cuda.NoGPU recognises
// (that is what makes the GPU tests skip rather than fail).
func TestNoGPU(t *testing.T) {
	e, err := New(Config{Preset: encoder.Tiny, Seed: encoder.DefaultSeed})
	if err == nil {
		_ = e.Close()
		t.Skip("this machine has a GPU: the no-GPU path is not exercised")
	}
	if !cuda.NoGPU(err) {
		t.Fatalf("New without a GPU: %v, want an error matching cuda.ErrNoDriver or cuda.ErrNoDevice", err)
	}
	t.Logf("as expected without a GPU: %v", err)
	if _, err := (&Encoder{closed: true}).Encode([]image.Image{nil}); !errors.Is(err, encoder.ErrCorruptMedia) {
		t.Errorf("nil image: %v, want ErrCorruptMedia", err)
	}
}
