package cudaenc

import (
	"errors"
	"fmt"
	"image"
	"math"
	"runtime"
	"sync"

	"golang.org/x/image/draw"

	"github.com/baton-dev/baton/engine/encoder"
	"github.com/baton-dev/baton/gpu/cuda"
)

// Precision selects the arithmetic of the matrix products.
type Precision int

const (
	// FP32: float32 storage and arithmetic, TF32 off.
	FP32 Precision = iota
	// BF16: bfloat16 inputs, weights and hidden activations; float32
	// accumulation and output.
	BF16
)

// String is "fp32" or "bf16".
func (p Precision) String() string {
	switch p {
	case FP32:
		return "fp32"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// ParsePrecision parses "fp32" or "bf16"; anything else wraps ErrBadConfig.
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "fp32":
		return FP32, nil
	case "bf16":
		return BF16, nil
	}
	return 0, fmt.Errorf("%w: precision %q (want fp32 or bf16)", ErrBadConfig, s)
}

// DefaultMaxBatch is Config.MaxBatch when zero: images per device pass.
const DefaultMaxBatch = 32

// maxMaxBatch bounds Config.MaxBatch (32768 large images would need about
// 280 GB of device buffers).
const maxMaxBatch = 4096

// ErrBadConfig is returned by New for an invalid Config.
var ErrBadConfig = errors.New("cudaenc: invalid configuration")

// Config configures New.
type Config struct {
	// Preset is the encoder geometry (encoder.Tiny, Base, Large).
	Preset encoder.Preset
	// Seed selects the weights: encoder.NewWeights(Preset, Seed), as
	// encoder.NewCPU(Preset, Seed).
	Seed uint64
	// Precision is FP32 (default) or BF16.
	Precision Precision
	// Device is the CUDA device ordinal.
	Device int
	// MaxBatch is the most images per device pass (0: DefaultMaxBatch;
	// 1..4096); larger Encode batches run in several passes. Device memory
	// grows to fit the largest pass seen: per image, 8*ImageSize^2 +
	// Patches*(kp*e + hp*e + 4*OutDim) bytes with e = 4 (fp32) or 2 (bf16):
	// about 11.8 MB per large image in fp32.
	MaxBatch int
	// PoisonOutputs fills the device output and the host embeddings with NaN
	// before every pass, so that an element the pass fails to write shows up
	// (tests; costs one memset per pass).
	PoisonOutputs bool

	// plan, cublasWorkspace and eager override how a pass is issued (tests
	// and benchmarks compare the choices): the plan of the products (see
	// gemmPlan), cuBLAS's default workspace instead of none, and launching
	// each step instead of replaying a captured graph.
	plan            gemmPlan
	cublasWorkspace bool
	eager           bool
}

// gemmPlan is how the encoder issues its two matrix products for a pass of
// n images.
type gemmPlan int

const (
	// planDefault picks the precision's default (defaultPlan).
	planDefault gemmPlan = iota
	// planBatched: one cublasGemmEx over all n*Patches rows.
	planBatched
	// planStrided: one cublasGemmStridedBatchedEx of n per-image products.
	planStrided
	// planPerImage: n cublasGemmEx calls of one image each, the same shape
	// whatever n is.
	planPerImage
)

// String is the plan's name: "default", "batched", "strided" or
// "per-image" (it panics for a value out of range).
func (p gemmPlan) String() string {
	return [...]string{"default", "batched", "strided", "per-image"}[p]
}

// defaultPlan is the plan used when Config.plan is planDefault: one
// strided-batched call of per-image products, run with no cuBLAS workspace.
// Without a workspace cuBLAS cannot split the inner dimension across thread
// blocks (split-K), whose choice depends on the batch size and changes the
// order of the sums; measured on the H200 (2026-11-29), float32 embeddings
// then no longer depend on the batch (with the default workspace, 93% of a
// tiny image's values differed in the last bits between batch 1 and 5), at
// no cost in speed.
func defaultPlan(Precision) gemmPlan { return planStrided }

// Encoder is the CUDA encoder. It implements encoder.Encoder; Encode calls
// are serialized on the device (one stream), so it is safe for concurrent
// use.
type Encoder struct {
	p        encoder.Preset
	prec     Precision
	maxBatch int
	poison   bool

	ctx      *cuda.Context
	stream   *cuda.Stream
	blas     *cuda.BLAS
	mod      *cuda.Module
	patchify *cuda.Function
	gelu     *cuda.Function
	w1, w2   *cuda.Buffer
	lut      *cuda.Buffer // normalisation table, 3*65536 float32 (normLUT)
	kp, hp   int          // padded inner dimensions (multiples of 8)
	elem     int          // bytes per element of X, H, W1', W2'
	dtype    cuda.DataType
	plan     gemmPlan
	eager    bool                // launch step by step instead of replaying graphs
	graphErr error               // why graphs were given up, if they were
	graphs   map[int]*cuda.Graph // captured passes by image count

	mu        sync.Mutex
	closed    bool
	capImages int
	pixHost   []byte
	pix       *cuda.Buffer // resized images, 8*ImageSize^2 bytes each
	x, h, y   *cuda.Buffer
	staged    int // images staged by Stage
	start     *cuda.Event
	end       *cuda.Event
}

var _ encoder.Encoder = (*Encoder)(nil)

// padTo8 returns n+1 rounded up to a multiple of 8: the width of a matrix
// with n columns plus the constant bias column.
func padTo8(n int) int { return (n + 1 + 7) / 8 * 8 }

// New builds the encoder on device cfg.Device: it opens the device (the
// first CUDA use of the process), compiles the kernels with NVRTC, creates
// a cuBLAS handle and uploads the weights. Errors: ErrBadConfig, and those
// of gpu/cuda wrapped (cuda.NoGPU(err) is true on a machine without a GPU;
// cuda.ErrNoNVRTC, cuda.ErrNoCUBLAS when a library is missing).
func New(cfg Config) (_ *Encoder, err error) {
	p := cfg.Preset
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if cfg.Precision != FP32 && cfg.Precision != BF16 {
		return nil, fmt.Errorf("%w: precision %v", ErrBadConfig, cfg.Precision)
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.MaxBatch < 0 || cfg.MaxBatch > maxMaxBatch {
		return nil, fmt.Errorf("%w: MaxBatch %d (want 1..%d)", ErrBadConfig, cfg.MaxBatch, maxMaxBatch)
	}
	if cfg.Device < 0 {
		return nil, fmt.Errorf("%w: device ordinal %d", ErrBadConfig, cfg.Device)
	}
	e := &Encoder{p: p, prec: cfg.Precision, maxBatch: cfg.MaxBatch, poison: cfg.PoisonOutputs,
		kp: padTo8(p.InDim), hp: padTo8(p.HiddenDim), elem: 4, dtype: cuda.R32F, plan: cfg.plan,
		eager: cfg.eager, graphs: map[int]*cuda.Graph{}}
	if e.plan == planDefault {
		e.plan = defaultPlan(cfg.Precision)
	}
	if e.prec == BF16 {
		e.elem, e.dtype = 2, cuda.R16BF
	}
	if e.ctx, err = cuda.Open(cfg.Device); err != nil {
		return nil, fmt.Errorf("cudaenc: open device %d: %w", cfg.Device, err)
	}
	defer func() {
		if err != nil {
			_ = e.release()
		}
	}()
	if e.stream, err = e.ctx.NewStream(); err != nil {
		return nil, fmt.Errorf("cudaenc: %w", err)
	}
	if e.blas, err = e.ctx.NewBLAS(); err != nil {
		return nil, fmt.Errorf("cudaenc: %w", err)
	}
	if err = e.blas.SetStream(e.stream); err != nil {
		return nil, fmt.Errorf("cudaenc: %w", err)
	}
	// TF32 off: float32 products stay float32 (bf16 products use tensor
	// cores whatever the mode).
	if err = e.blas.SetMathMode(cuda.DefaultMath); err != nil {
		return nil, fmt.Errorf("cudaenc: %w", err)
	}
	if !cfg.cublasWorkspace {
		if err = e.blas.SetWorkspace(nil); err != nil {
			return nil, fmt.Errorf("cudaenc: %w", err)
		}
	}
	if e.mod, err = e.ctx.CompileModule(cuda.KernelSource(), "baton_kernels.cu", cuda.KernelOptions()...); err != nil {
		return nil, fmt.Errorf("cudaenc: kernels: %w", err)
	}
	patchify, gelu := cuda.KernelPatchifyF32, cuda.KernelGELUPadF32
	if e.prec == BF16 {
		patchify, gelu = cuda.KernelPatchifyBF16, cuda.KernelGELUPadBF16
	}
	if e.patchify, err = e.mod.Function(patchify); err != nil {
		return nil, fmt.Errorf("cudaenc: %w", err)
	}
	if e.gelu, err = e.mod.Function(gelu); err != nil {
		return nil, fmt.Errorf("cudaenc: %w", err)
	}
	if err = e.uploadWeights(encoder.NewWeights(p, cfg.Seed)); err != nil {
		return nil, fmt.Errorf("cudaenc: weights: %w", err)
	}
	lut := normLUT()
	if e.lut, err = e.ctx.Alloc(4 * len(lut)); err != nil {
		return nil, fmt.Errorf("cudaenc: %w", err)
	}
	if err = cuda.Upload(e.stream, e.lut, 0, lut); err != nil {
		return nil, fmt.Errorf("cudaenc: %w", err)
	}
	if err = e.stream.Synchronize(); err != nil {
		return nil, fmt.Errorf("cudaenc: %w", err)
	}
	return e, nil
}

// normLUT is the normalisation of step 2 of encoder.Preprocess for every
// 16-bit channel value: lut[c*65536 + v] = float32((v/65535 - CLIPMean[c]) /
// CLIPStd[c]), the same float64 expression, so the device's patches are
// bit-identical to Preprocess.
func normLUT() []float32 {
	lut := make([]float32, 3*65536)
	for c := range 3 {
		for v := range 65536 {
			lut[c*65536+v] = float32((float64(v)/65535 - encoder.CLIPMean[c]) / encoder.CLIPStd[c])
		}
	}
	return lut
}

// foldedWeights returns W1' [kp, Hidden] (W1, then B1 as row InDim, then
// zero rows) and W2' [hp, Out] (W2, then B2 as row Hidden, then zero rows),
// row-major float32.
func foldedWeights(p encoder.Preset, w encoder.Weights, kp, hp int) (w1, w2 []float32) {
	w1 = make([]float32, kp*p.HiddenDim)
	copy(w1, w.W1)
	copy(w1[p.InDim*p.HiddenDim:], w.B1)
	w2 = make([]float32, hp*p.OutDim)
	copy(w2, w.W2)
	copy(w2[p.HiddenDim*p.OutDim:], w.B2)
	return w1, w2
}

// uploadWeights puts W1' and W2' on the device in the encoder's precision
// (bf16 through the conversion kernel).
func (e *Encoder) uploadWeights(w encoder.Weights) error {
	w1, w2 := foldedWeights(e.p, w, e.kp, e.hp)
	up := func(host []float32) (*cuda.Buffer, error) {
		f32, err := e.ctx.Alloc(4 * len(host))
		if err != nil {
			return nil, err
		}
		if err := cuda.Upload(e.stream, f32, 0, host); err != nil {
			_ = f32.Free()
			return nil, err
		}
		if e.prec == FP32 {
			return f32, nil
		}
		defer func() { _ = e.stream.Synchronize(); _ = f32.Free() }()
		bf, err := e.ctx.Alloc(2 * len(host))
		if err != nil {
			return nil, err
		}
		conv, err := e.mod.Function(cuda.KernelF32ToBF16)
		if err == nil {
			n := int64(len(host))
			err = conv.Launch(e.stream, cuda.Dim3{X: cuda.GridFor(n, 256, 4096)}, cuda.Dim3{X: 256}, 0, f32, bf, n)
		}
		if err == nil {
			err = e.stream.Synchronize()
		}
		if err != nil {
			_ = bf.Free()
			return nil, err
		}
		return bf, nil
	}
	var err error
	if e.w1, err = up(w1); err != nil {
		return err
	}
	if e.w2, err = up(w2); err != nil {
		return err
	}
	return e.stream.Synchronize()
}

// Preset returns the encoder's preset.
func (e *Encoder) Preset() encoder.Preset { return e.p }

// Precision returns the encoder's precision.
func (e *Encoder) Precision() Precision { return e.prec }

// Device describes the GPU the encoder runs on.
func (e *Encoder) Device() cuda.DeviceInfo { return e.ctx.Info() }

// Encode encodes imgs (see encoder.Encoder): Embedding i has shape
// [Patches, OutDim], float32. A nil or empty image is an error wrapping
// encoder.ErrCorruptMedia (nothing is encoded then). Device failures are
// returned wrapped (gpu/cuda errors); after Close, cuda.ErrClosed.
func (e *Encoder) Encode(imgs []image.Image) ([]encoder.Embedding, error) {
	for i, img := range imgs {
		if img == nil || img.Bounds().Empty() {
			return nil, fmt.Errorf("%w: image %d has no pixels", encoder.ErrCorruptMedia, i)
		}
	}
	out := make([]encoder.Embedding, 0, len(imgs))
	if len(imgs) == 0 {
		return out, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("cudaenc: Encode: %w", cuda.ErrClosed)
	}
	rowsPerImage, cols := e.p.Patches(), e.p.OutDim
	for start := 0; start < len(imgs); start += e.maxBatch {
		chunk := imgs[start:min(start+e.maxBatch, len(imgs))]
		if err := e.stageLocked(chunk); err != nil {
			return nil, err
		}
		if err := e.forwardLocked(len(chunk)); err != nil {
			return nil, err
		}
		for i := range chunk {
			data := make([]float32, rowsPerImage*cols)
			if e.poison {
				fillNaN(data)
			}
			if err := cuda.Download(e.stream, data, e.y, i*rowsPerImage*cols*4); err != nil {
				return nil, fmt.Errorf("cudaenc: download: %w", err)
			}
			out = append(out, encoder.Embedding{Rows: rowsPerImage, Cols: cols, Data: data})
		}
	}
	return out, nil
}

func fillNaN(x []float32) {
	nan := float32(math.NaN())
	for i := range x {
		x[i] = nan
	}
}

// ensureLocked grows the device and staging buffers to hold n images.
func (e *Encoder) ensureLocked(n int) error {
	if n <= e.capImages {
		return nil
	}
	e.freeBuffersLocked()
	s, rows := e.p.ImageSize, n*e.p.Patches()
	var err error
	alloc := func(bytes int) *cuda.Buffer {
		if err != nil {
			return nil
		}
		var b *cuda.Buffer
		b, err = e.ctx.Alloc(bytes)
		return b
	}
	e.pix = alloc(n * s * s * 8)
	e.x = alloc(rows * e.kp * e.elem)
	e.h = alloc(rows * e.hp * e.elem)
	e.y = alloc(rows * e.p.OutDim * 4)
	if err != nil {
		e.freeBuffersLocked()
		return fmt.Errorf("cudaenc: buffers for %d images: %w", n, err)
	}
	e.pixHost = make([]byte, n*s*s*8)
	e.capImages = n
	return nil
}

func (e *Encoder) freeBuffersLocked() {
	for n, g := range e.graphs { // they hold the old addresses
		_ = g.Destroy()
		delete(e.graphs, n)
	}
	for _, b := range []**cuda.Buffer{&e.pix, &e.x, &e.h, &e.y} {
		if *b != nil {
			_ = (*b).Free()
			*b = nil
		}
	}
	e.capImages, e.staged, e.pixHost = 0, 0, nil
}

// resizeInto writes img resized to ImageSize^2 into pix (8*ImageSize^2
// bytes, image.RGBA64 layout) exactly as step 1 of encoder.Preprocess.
func resizeInto(p encoder.Preset, img image.Image, pix []byte) {
	clear(pix)
	s := p.ImageSize
	dst := &image.RGBA64{Pix: pix, Stride: 8 * s, Rect: image.Rect(0, 0, s, s)}
	if b := img.Bounds(); !b.Empty() {
		draw.BiLinear.Scale(dst, dst.Bounds(), img, b, draw.Src, nil)
	}
}

// stageLocked resizes imgs on the CPU (in parallel) and uploads them as the
// device input.
func (e *Encoder) stageLocked(imgs []image.Image) error {
	if err := e.ensureLocked(len(imgs)); err != nil {
		return err
	}
	per := 8 * e.p.ImageSize * e.p.ImageSize
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, img := range imgs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			resizeInto(e.p, img, e.pixHost[i*per:(i+1)*per])
		}()
	}
	wg.Wait()
	if err := cuda.Upload(e.stream, e.pix, 0, e.pixHost[:len(imgs)*per]); err != nil {
		return fmt.Errorf("cudaenc: upload: %w", err)
	}
	e.staged = len(imgs)
	return nil
}

// forwardLocked enqueues the device part for the n staged images by
// replaying the pass captured for n images (captured on first use), or step
// by step when graphs are off or could not be captured. It does not wait.
func (e *Encoder) forwardLocked(n int) error {
	if e.eager {
		return e.enqueueLocked(n)
	}
	g := e.graphs[n]
	if g == nil {
		var err error
		g, err = e.stream.Capture(func() error { return e.enqueueLocked(n) })
		if err != nil {
			// Run without graphs from now on; GraphError says why.
			e.eager, e.graphErr = true, err
			return e.enqueueLocked(n)
		}
		e.graphs[n] = g
	}
	if err := g.Launch(e.stream); err != nil {
		return fmt.Errorf("cudaenc: pass of %d images: %w", n, err)
	}
	return nil
}

// GraphError is nil while passes run as captured CUDA graphs, else the
// capture failure that made the encoder launch step by step.
func (e *Encoder) GraphError() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.graphErr
}

// enqueueLocked enqueues the device part for the n staged images: patchify,
// product, GELU, product (plus the NaN poison when configured).
func (e *Encoder) enqueueLocked(n int) error {
	p := e.p
	rows := n * p.Patches()
	maxBlocks := 32 * e.ctx.Info().Multiprocessors
	block := cuda.Dim3{X: 256}
	if e.poison {
		if err := e.stream.Memset32(e.y, 0, 0x7fc00000, rows*p.OutDim); err != nil {
			return fmt.Errorf("cudaenc: poison: %w", err)
		}
	}
	err := e.patchify.Launch(e.stream, cuda.Dim3{X: uint32(rows)}, block, 0,
		e.pix, e.lut, e.x, int32(rows), int32(e.kp), int32(p.ImageSize), int32(p.PatchSize), int32(p.InDim))
	if err != nil {
		return fmt.Errorf("cudaenc: patchify: %w", err)
	}
	g1 := cuda.RowMajorGemm{N: p.HiddenDim, K: e.kp,
		A: e.x.Ptr(), AType: e.dtype, LDA: e.kp,
		B: e.w1.Ptr(), BType: e.dtype, LDB: p.HiddenDim,
		C: e.h.Ptr(), CType: e.dtype, LDC: e.hp,
		Alpha: 1, Compute: cuda.Compute32F}
	if err := e.product(g1, n, e.elem, e.elem); err != nil {
		return fmt.Errorf("cudaenc: first product: %w", err)
	}
	vec := 4
	if e.prec == BF16 {
		vec = 8
	}
	err = e.gelu.Launch(e.stream, cuda.Dim3{X: cuda.GridFor(int64(rows)*int64(e.hp/vec), 256, maxBlocks)}, block, 0,
		e.h, int32(rows), int32(p.HiddenDim), int32(e.hp))
	if err != nil {
		return fmt.Errorf("cudaenc: gelu: %w", err)
	}
	g2 := cuda.RowMajorGemm{N: p.OutDim, K: e.hp,
		A: e.h.Ptr(), AType: e.dtype, LDA: e.hp,
		B: e.w2.Ptr(), BType: e.dtype, LDB: p.OutDim,
		C: e.y.Ptr(), CType: cuda.R32F, LDC: p.OutDim,
		Alpha: 1, Compute: cuda.Compute32F}
	if err := e.product(g2, n, e.elem, 4); err != nil {
		return fmt.Errorf("cudaenc: second product: %w", err)
	}
	return nil
}

// product issues the row-major product g (M, Batch and strides unset; A and
// C hold n images of Patches rows each, B is shared) for n images under the
// encoder's plan. aElem and cElem are the bytes per element of A and C.
func (e *Encoder) product(g cuda.RowMajorGemm, n, aElem, cElem int) error {
	per := e.p.Patches()
	strideA, strideC := int64(per*g.LDA), int64(per*g.LDC)
	switch e.plan {
	case planStrided:
		g.M, g.Batch, g.StrideA, g.StrideC = per, n, strideA, strideC
		return e.blas.GemmStridedBatchedEx(g.ColumnMajor())
	case planPerImage:
		a, c := g.A, g.C
		g.M = per
		for i := range n {
			g.A = a + cuda.DevicePtr(int64(i)*strideA*int64(aElem))
			g.C = c + cuda.DevicePtr(int64(i)*strideC*int64(cElem))
			if err := e.blas.GemmEx(g.ColumnMajor()); err != nil {
				return err
			}
		}
		return nil
	default:
		g.M = n * per
		return e.blas.GemmEx(g.ColumnMajor())
	}
}

// Stage resizes and uploads imgs (1..MaxBatch images) as the device input
// for TimeDevice, as Encode's steps 1-2. Errors: encoder.ErrCorruptMedia,
// ErrBadConfig (batch size), device errors.
func (e *Encoder) Stage(imgs []image.Image) error {
	if len(imgs) == 0 || len(imgs) > e.maxBatch {
		return fmt.Errorf("%w: Stage of %d images (want 1..%d)", ErrBadConfig, len(imgs), e.maxBatch)
	}
	for i, img := range imgs {
		if img == nil || img.Bounds().Empty() {
			return fmt.Errorf("%w: image %d has no pixels", encoder.ErrCorruptMedia, i)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return cuda.ErrClosed
	}
	if err := e.stageLocked(imgs); err != nil {
		return err
	}
	return e.stream.Synchronize()
}

// TimeDevice runs the device part of Encode (patchify, product, GELU,
// product; steps 3-6) on the staged images warmup+reps times, each run
// between two CUDA events on the encoder's stream, and returns the reps'
// times in milliseconds (input already on the device, output left there).
// Errors: ErrBadConfig when nothing is staged or reps < 1, device errors.
func (e *Encoder) TimeDevice(warmup, reps int) ([]float64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, cuda.ErrClosed
	}
	if e.staged == 0 || reps < 1 || warmup < 0 {
		return nil, fmt.Errorf("%w: TimeDevice with %d staged images, %d reps", ErrBadConfig, e.staged, reps)
	}
	if e.start == nil {
		var err error
		if e.start, err = e.ctx.NewEvent(); err != nil {
			return nil, err
		}
		if e.end, err = e.ctx.NewEvent(); err != nil {
			return nil, err
		}
	}
	out := make([]float64, 0, reps)
	for i := range warmup + reps {
		if err := e.start.Record(e.stream); err != nil {
			return nil, err
		}
		if err := e.forwardLocked(e.staged); err != nil {
			return nil, err
		}
		if err := e.end.Record(e.stream); err != nil {
			return nil, err
		}
		if err := e.end.Synchronize(); err != nil {
			return nil, err
		}
		ms, err := cuda.ElapsedMs(e.start, e.end)
		if err != nil {
			return nil, err
		}
		if i >= warmup {
			out = append(out, ms)
		}
	}
	return out, nil
}

// Close waits for the device, frees the encoder's device memory, module,
// cuBLAS handle and stream, and releases the context. Encode after Close
// returns cuda.ErrClosed; a second Close returns cuda.ErrClosed.
func (e *Encoder) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return cuda.ErrClosed
	}
	e.closed = true
	return e.release()
}

// release frees whatever New created, returning the first error.
func (e *Encoder) release() error {
	var errs []error
	if e.stream != nil {
		errs = append(errs, e.stream.Synchronize())
	}
	e.freeBuffersLocked()
	for _, b := range []*cuda.Buffer{e.w1, e.w2, e.lut} {
		if b != nil {
			errs = append(errs, b.Free())
		}
	}
	for _, ev := range []*cuda.Event{e.start, e.end} {
		if ev != nil {
			errs = append(errs, ev.Destroy())
		}
	}
	if e.mod != nil {
		errs = append(errs, e.mod.Unload())
	}
	if e.blas != nil {
		errs = append(errs, e.blas.Destroy())
	}
	if e.stream != nil {
		errs = append(errs, e.stream.Destroy())
	}
	if e.ctx != nil {
		errs = append(errs, e.ctx.Close())
	}
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("cudaenc: close: %w", err)
		}
	}
	return nil
}
