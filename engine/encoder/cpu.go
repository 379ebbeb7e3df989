package encoder

import (
	"fmt"
	"image"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// DefaultSeed is the weight seed of the demo engine ("baton" in ASCII).
const DefaultSeed uint64 = 0x626174_6f6e

// weightStream is the second PCG word (the stream), fixed so that a seed
// alone picks the weights: "encoderw" in ASCII.
const weightStream uint64 = 0x656e636f_64657277

// Weights are the parameters of the CPU encoder's MLP, row-major float32:
// W1 [InDim, HiddenDim], B1 [HiddenDim], W2 [HiddenDim, OutDim],
// B2 [OutDim].
type Weights struct {
	// Lengths in float32 elements: W1 InDim*HiddenDim, B1 HiddenDim, W2
	// HiddenDim*OutDim, B2 OutDim.
	W1, B1, W2, B2 []float32
}

// NewWeights draws the weights for preset p from seed, deterministically:
// one math/rand/v2 PCG source seeded with (seed, 0x656e636f64657277) draws,
// in this order, W1, B1, W2, B2, each in row-major order, every element as
// float32(NormFloat64() * scale) with scale = 1/sqrt(fanIn) for W1 (fanIn =
// InDim) and W2 (fanIn = HiddenDim), and 0.02 for the biases. Other encoders
// (the CUDA one) load these same values so that outputs agree.
func NewWeights(p Preset, seed uint64) Weights {
	r := rand.New(rand.NewPCG(seed, weightStream))
	draw := func(n int, scale float64) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(r.NormFloat64() * scale)
		}
		return out
	}
	var w Weights
	w.W1 = draw(p.InDim*p.HiddenDim, 1/math.Sqrt(float64(p.InDim)))
	w.B1 = draw(p.HiddenDim, 0.02)
	w.W2 = draw(p.HiddenDim*p.OutDim, 1/math.Sqrt(float64(p.HiddenDim)))
	w.B2 = draw(p.OutDim, 0.02)
	return w
}

// CPU is the reference encoder: for each image, X = Preprocess(p, img)
// [Patches, InDim]; H = GELU(X @ W1 + B1) [Patches, HiddenDim];
// Y = H @ W2 + B2 [Patches, OutDim], all float32, products by gonum's
// blas32.Gemm (each output element sums over the inner dimension in a fixed
// order, so the result is deterministic and independent of the batch). Its
// weights are immutable after NewCPU, so it is safe for concurrent Encode
// calls.
type CPU struct {
	p Preset
	w Weights
}

var _ Encoder = (*CPU)(nil)

// NewCPU builds the CPU encoder for preset p with weights NewWeights(p,
// seed). It panics if p.Validate() fails (presets come from PresetByName or
// the exported variables, which are valid). The weights take
// 4*(InDim*HiddenDim + HiddenDim*OutDim + HiddenDim + OutDim) bytes:
// 0.8 MB (tiny), 5.5 MB (base), 10.8 MB (large).
func NewCPU(p Preset, seed uint64) *CPU {
	if err := p.Validate(); err != nil {
		panic(err)
	}
	return &CPU{p: p, w: NewWeights(p, seed)}
}

// Preset returns the preset the encoder was built for.
func (c *CPU) Preset() Preset { return c.p }

// Weights returns the encoder's weights. They are shared: do not modify them.
func (c *CPU) Weights() Weights { return c.w }

// Encode encodes each image (see Encoder). Images are encoded one at a time
// (the matrix products use all cores through gonum).
func (c *CPU) Encode(imgs []image.Image) ([]Embedding, error) {
	for i, img := range imgs {
		if img == nil || img.Bounds().Empty() {
			return nil, fmt.Errorf("%w: image %d has no pixels", ErrCorruptMedia, i)
		}
	}
	out := make([]Embedding, 0, len(imgs))
	for _, img := range imgs {
		out = append(out, c.forward(Preprocess(c.p, img)))
	}
	return out, nil
}

// forward runs the MLP on x [Patches, InDim].
func (c *CPU) forward(x []float32) Embedding {
	p := c.p
	n := p.Patches()
	hidden := make([]float32, n*p.HiddenDim)
	for r := 0; r < n; r++ {
		copy(hidden[r*p.HiddenDim:], c.w.B1)
	}
	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1,
		blas32.General{Rows: n, Cols: p.InDim, Stride: p.InDim, Data: x},
		blas32.General{Rows: p.InDim, Cols: p.HiddenDim, Stride: p.HiddenDim, Data: c.w.W1},
		1, blas32.General{Rows: n, Cols: p.HiddenDim, Stride: p.HiddenDim, Data: hidden})
	for i, v := range hidden {
		hidden[i] = GELU(v)
	}
	y := make([]float32, n*p.OutDim)
	for r := 0; r < n; r++ {
		copy(y[r*p.OutDim:], c.w.B2)
	}
	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1,
		blas32.General{Rows: n, Cols: p.HiddenDim, Stride: p.HiddenDim, Data: hidden},
		blas32.General{Rows: p.HiddenDim, Cols: p.OutDim, Stride: p.OutDim, Data: c.w.W2},
		1, blas32.General{Rows: n, Cols: p.OutDim, Stride: p.OutDim, Data: y})
	return Embedding{Rows: n, Cols: p.OutDim, Data: y}
}
