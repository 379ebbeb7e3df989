package cudaenc

import (
	"errors"
	"fmt"
	"image"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/baton-dev/baton/engine/encoder"
	"github.com/baton-dev/baton/gpu/cuda"
)

// Tests in this file need a GPU; each skips (saying why) without one.

// TestPatchifyKernelBitExact: the device's X (fp32) equals
// encoder.Preprocess bit for bit, with the bias column and padding.
func TestPatchifyKernelBitExact(t *testing.T) {
	p := encoder.Base
	e := newOrSkip(t, Config{Preset: p, Seed: encoder.DefaultSeed})
	imgs := randomImages(newRand(t), 3)
	if err := e.Stage(imgs); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	err := e.forwardLocked(len(imgs))
	x := make([]float32, len(imgs)*p.Patches()*e.kp)
	if err == nil {
		err = cuda.Download(e.stream, x, e.x, 0)
	}
	e.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for i, img := range imgs {
		want := encoder.Preprocess(p, img)
		for row := range p.Patches() {
			got := x[(i*p.Patches()+row)*e.kp:][:e.kp]
			for col, v := range got {
				var w float32
				switch {
				case col < p.InDim:
					w = want[row*p.InDim+col]
				case col == p.InDim:
					w = 1
				}
				if math.Float32bits(v) != math.Float32bits(w) {
					t.Fatalf("image %d X[%d,%d] = %v, want %v", i, row, col, v, w)
				}
			}
		}
	}
}

// cpuReference caches CPU embeddings per preset (the large preset takes
// seconds per image on a small machine).
var cpuEncoders sync.Map // preset name -> *encoder.CPU

func cpuEncoder(p encoder.Preset) *encoder.CPU {
	if e, ok := cpuEncoders.Load(p.Name); ok {
		return e.(*encoder.CPU)
	}
	e, _ := cpuEncoders.LoadOrStore(p.Name, encoder.NewCPU(p, encoder.DefaultSeed))
	return e.(*encoder.CPU)
}

// TestEncodeMatchesCPU: for every preset and both precisions, fresh random
// images (seed logged), outputs poisoned with NaN before the pass; each
// embedding's norm-wise relative error against the CPU encoder is within
// 1e-5 (fp32) or 1e-2 (bf16), and the toy LM's answer to the fp32 embedding
// is token-identical to its answer to the CPU embedding.
func TestEncodeMatchesCPU(t *testing.T) {
	requireGPU(t)
	presets := encoder.Presets()
	if testing.Short() {
		presets = presets[:1]
	}
	r := newRand(t)
	for _, p := range presets {
		imgs := randomImages(r, 3)
		ref, err := cpuEncoder(p).Encode(imgs)
		if err != nil {
			t.Fatal(err)
		}
		for _, prec := range []Precision{FP32, BF16} {
			t.Run(fmt.Sprintf("%s/%v", p.Name, prec), func(t *testing.T) {
				e := newOrSkip(t, Config{Preset: p, Seed: encoder.DefaultSeed, Precision: prec, MaxBatch: 2, PoisonOutputs: true})
				got, err := e.Encode(imgs) // 2 passes: 2 images, then 1
				if err != nil {
					t.Fatal(err)
				}
				bound := 1e-5
				if prec == BF16 {
					bound = 1e-2
				}
				for i := range imgs {
					if got[i].Rows != p.Patches() || got[i].Cols != p.OutDim || len(got[i].Data) != p.Patches()*p.OutDim {
						t.Fatalf("image %d: shape %dx%d (%d values)", i, got[i].Rows, got[i].Cols, len(got[i].Data))
					}
					if j, ok := allFinite(got[i].Data); !ok {
						t.Fatalf("image %d: element %d = %v (poison not overwritten)", i, j, got[i].Data[j])
					}
					rel := relErr(got[i].Data, ref[i].Data)
					t.Logf("image %d (%v): relative error %.3g (bound %g)", i, imgs[i].Bounds().Size(), rel, bound)
					if !(rel <= bound) {
						t.Errorf("image %d: relative error %.3g > %g", i, rel, bound)
					}
				}
				hash := encoder.ContentHash(p, imgs[0])
				cpuIDs, gpuIDs := answer(t, hash, ref[0]), answer(t, hash, got[0])
				same := slices.Equal(cpuIDs, gpuIDs)
				t.Logf("LM answer: %d tokens from CPU embedding, %d from GPU, identical %v", len(cpuIDs), len(gpuIDs), same)
				if prec == FP32 && !same {
					t.Errorf("fp32 answer differs from the CPU path:\ncpu %v\ngpu %v", cpuIDs, gpuIDs)
				}
			})
		}
	}
}

// planVariants are the ways of issuing the products that
// TestBatchInvariance and the variant benchmark compare.
var planVariants = []struct {
	name            string
	plan            gemmPlan
	cublasWorkspace bool
}{
	{"strided-ws0", planStrided, false},
	{"batched-ws0", planBatched, false},
	{"batched", planBatched, true},
	{"per-image", planPerImage, false},
}

// TestBatchInvariance: an image's embedding does not depend on the batch it
// arrives in (the encoder.Encoder contract): alone, and inside a batch (5
// tiny images; 32 large ones, the benchmark's shape). Asserted for each
// precision's default plan; the other plans are reported.
func TestBatchInvariance(t *testing.T) {
	requireGPU(t)
	r := newRand(t)
	for _, tc := range []struct {
		p encoder.Preset
		n int
	}{{encoder.Tiny, 5}, {encoder.Large, 32}} {
		imgs := randomImages(r, tc.n)
		for _, prec := range []Precision{FP32, BF16} {
			for _, v := range planVariants {
				isDefault := v.plan == defaultPlan(prec) && !v.cublasWorkspace
				if testing.Short() && !isDefault {
					continue
				}
				t.Run(fmt.Sprintf("%s/%v/%s", tc.p.Name, prec, v.name), func(t *testing.T) {
					e := newOrSkip(t, Config{Preset: tc.p, Seed: encoder.DefaultSeed, Precision: prec, MaxBatch: tc.n,
						plan: v.plan, cublasWorkspace: v.cublasWorkspace})
					batch, err := e.Encode(imgs)
					if err != nil {
						t.Fatal(err)
					}
					for _, i := range []int{0, 3} {
						alone, err := e.Encode(imgs[i : i+1])
						if err != nil {
							t.Fatal(err)
						}
						diff, maxAbs := 0, 0.0
						for j := range alone[0].Data {
							if math.Float32bits(alone[0].Data[j]) != math.Float32bits(batch[i].Data[j]) {
								diff++
								maxAbs = max(maxAbs, math.Abs(float64(alone[0].Data[j]-batch[i].Data[j])))
							}
						}
						t.Logf("image %d alone vs in a batch of %d: %d of %d values differ (max |diff| %.3g), default plan %v",
							i, tc.n, diff, len(alone[0].Data), maxAbs, isDefault)
						if diff != 0 && isDefault {
							t.Errorf("image %d: the embedding depends on the batch", i)
						}
					}
				})
			}
		}
	}
}

// TestGraphsMatchEager: a pass replayed from a captured graph gives the
// same bits as the same pass launched step by step, and graphs are in use.
func TestGraphsMatchEager(t *testing.T) {
	requireGPU(t)
	imgs := randomImages(newRand(t), 3)
	for _, prec := range []Precision{FP32, BF16} {
		graph := newOrSkip(t, Config{Preset: encoder.Base, Seed: encoder.DefaultSeed, Precision: prec})
		eager := newOrSkip(t, Config{Preset: encoder.Base, Seed: encoder.DefaultSeed, Precision: prec, eager: true})
		for range 2 { // capture, then replay
			a, err := graph.Encode(imgs)
			if err != nil {
				t.Fatal(err)
			}
			b, err := eager.Encode(imgs)
			if err != nil {
				t.Fatal(err)
			}
			for i := range imgs {
				if !slices.Equal(a[i].Data, b[i].Data) {
					t.Fatalf("%v image %d: graph and eager passes differ", prec, i)
				}
			}
		}
		if err := graph.GraphError(); err != nil {
			t.Errorf("%v: graphs given up: %v", prec, err)
		}
	}
}

func TestEncodeEdgeCases(t *testing.T) {
	e := newOrSkip(t, Config{Preset: encoder.Tiny, Seed: encoder.DefaultSeed})
	if out, err := e.Encode(nil); err != nil || len(out) != 0 {
		t.Errorf("empty batch: %v, %v", out, err)
	}
	good := randomImages(newRand(t), 1)[0]
	for name, imgs := range map[string][]image.Image{
		"nil image":   {good, nil},
		"empty image": {image.NewRGBA(image.Rect(0, 0, 0, 5))},
	} {
		if _, err := e.Encode(imgs); !errors.Is(err, encoder.ErrCorruptMedia) {
			t.Errorf("%s: %v, want ErrCorruptMedia", name, err)
		}
	}
	if err := e.Stage(nil); !errors.Is(err, ErrBadConfig) {
		t.Errorf("Stage(nil): %v", err)
	}
	// Concurrent callers get the serial answer.
	want, err := e.Encode([]image.Image{good})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for g := range errs {
		wg.Go(func() {
			got, err := e.Encode([]image.Image{good})
			if err == nil && !slices.Equal(got[0].Data, want[0].Data) {
				err = errors.New("different output")
			}
			errs[g] = err
		})
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Errorf("goroutine %d: %v", g, err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := e.Encode([]image.Image{good}); !errors.Is(err, cuda.ErrClosed) {
		t.Errorf("Encode after Close: %v, want cuda.ErrClosed", err)
	}
	if err := e.Close(); !errors.Is(err, cuda.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}
