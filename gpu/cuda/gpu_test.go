package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Tests in this file need a GPU; each skips (saying why) without one.

func TestDeviceInfo(t *testing.T) {
	c := openOrSkip(t)
	info := c.Info()
	t.Logf("device %+v, cc %s", info, info.ComputeCapability())
	if info.Name == "" || info.Major < 3 || info.Multiprocessors <= 0 || info.MemoryBytes == 0 {
		t.Errorf("incomplete device info %+v", info)
	}
	if !strings.HasPrefix(info.VirtualArch(), "compute_") {
		t.Errorf("VirtualArch %q", info.VirtualArch())
	}
	v, path, err := DriverVersion()
	if err != nil || v < 11000 || path == "" {
		t.Errorf("DriverVersion = %d, %q, %v", v, path, err)
	}
	if !Initialized() {
		t.Error("Initialized() false after Open")
	}
	free, total, err := c.MemInfo()
	if err != nil || free == 0 || free > total {
		t.Errorf("MemInfo = %d, %d, %v", free, total, err)
	}
	if _, err := Open(1 << 20); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Open(huge ordinal) = %v, want ErrInvalidArgument", err)
	}
}

func TestMemoryRoundTrip(t *testing.T) {
	c := openOrSkip(t)
	s := streamOrFail(t, c)
	seed := rand.Uint64()
	t.Logf("seed %#x", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	const n = 1<<20 + 3 // odd size
	src := make([]uint32, n)
	for i := range src {
		src[i] = r.Uint32()
	}
	a := allocOrFail(t, c, 4*n)
	b := allocOrFail(t, c, 4*n+64)
	if err := s.Memset32(b, 0, 0x7fc00000, n+16); err != nil {
		t.Fatal(err)
	}
	if err := Upload(s, a, 0, src); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyDtoD(b, 64, a, 0, 4*n); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, n+16)
	if err := Download(s, got, b, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		if got[i] != 0x7fc00000 {
			t.Fatalf("word %d = %#x, want the memset poison", i, got[i])
		}
	}
	for i, v := range src {
		if got[16+i] != v {
			t.Fatalf("word %d = %#x, want %#x", i, got[16+i], v)
		}
	}
	// Malformed ranges are rejected before CUDA sees them.
	for name, err := range map[string]error{
		"upload past end":   Upload(s, a, 8, src),
		"download past end": Download(s, make([]byte, 10), a, 4*n-4),
		"negative offset":   s.CopyDtoD(b, -4, a, 0, 4),
		"copy past end":     s.CopyDtoD(a, 0, b, 0, 4*n+64),
		"memset unaligned":  s.Memset32(a, 2, 0, 1),
		"memset past end":   s.Memset32(a, 0, 0, n+1),
		"alloc zero":        func() error { _, err := c.Alloc(0); return err }(),
		"nil buffer":        Upload[byte](s, nil, 0, []byte{1}),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	tmp, err := c.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := tmp.Free(); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Free(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Free: %v, want ErrClosed", err)
	}
	if err := Upload(s, tmp, 0, []byte{1}); !errors.Is(err, ErrClosed) {
		t.Errorf("upload to freed buffer: %v, want ErrClosed", err)
	}
}

// loadKernels compiles KernelSource for the device.
func loadKernels(t testing.TB, c *Context) *Module {
	t.Helper()
	m, err := c.CompileModule(KernelSource(), "baton_kernels.cu", KernelOptions()...)
	if err != nil {
		t.Fatalf("CompileModule: %v", err)
	}
	t.Cleanup(func() { _ = m.Unload() })
	return m
}

func TestConvertKernelsMatchGo(t *testing.T) {
	c := openOrSkip(t)
	s := streamOrFail(t, c)
	m := loadKernels(t, c)
	toBF, err := m.Function(KernelF32ToBF16)
	if err != nil {
		t.Fatal(err)
	}
	toF, err := m.Function(KernelBF16ToF32)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Function("no_such_kernel"); err == nil || !strings.Contains(err.Error(), "no_such_kernel") {
		t.Errorf("unknown kernel: %v", err)
	}
	seed := rand.Uint64()
	t.Logf("seed %#x", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	const n = 1 << 18
	in := make([]float32, n)
	specials := []uint32{0x3f808000, 0x3f818000, 0x7f7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffc00001, 0x00000001, 0x80000000}
	for i := range in {
		if i < len(specials) {
			in[i] = math.Float32frombits(specials[i])
		} else {
			in[i] = math.Float32frombits(r.Uint32())
		}
	}
	dIn := allocOrFail(t, c, 4*n)
	dBF := allocOrFail(t, c, 2*n)
	dOut := allocOrFail(t, c, 4*n)
	if err := Upload(s, dIn, 0, in); err != nil {
		t.Fatal(err)
	}
	if err := s.Memset32(dBF, 0, 0xffffffff, n/2); err != nil {
		t.Fatal(err)
	}
	grid := Dim3{X: GridFor(n, 256, 1024)}
	if err := toBF.Launch(s, grid, Dim3{X: 256}, 0, dIn, dBF, int64(n)); err != nil {
		t.Fatal(err)
	}
	if err := toF.Launch(s, grid, Dim3{X: 256}, 0, dBF, dOut, int64(n)); err != nil {
		t.Fatal(err)
	}
	bf := make([]uint16, n)
	out := make([]float32, n)
	if err := Download(s, bf, dBF, 0); err != nil {
		t.Fatal(err)
	}
	if err := Download(s, out, dOut, 0); err != nil {
		t.Fatal(err)
	}
	for i, f := range in {
		want := Float32ToBF16(f)
		if bf[i] != want {
			t.Fatalf("element %d (%#08x): device bf16 %#04x, Go %#04x", i, math.Float32bits(f), bf[i], want)
		}
		if math.Float32bits(out[i]) != math.Float32bits(BF16ToFloat32(want)) {
			t.Fatalf("element %d: widened %#08x, want %#08x", i, math.Float32bits(out[i]), math.Float32bits(BF16ToFloat32(want)))
		}
	}
	if err := toBF.Launch(s, grid, Dim3{X: 256}, 0, dIn, dBF, n); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("untyped int argument: %v, want ErrInvalidArgument", err)
	}
}

func TestEventsTimeWork(t *testing.T) {
	c := openOrSkip(t)
	s := streamOrFail(t, c)
	a := allocOrFail(t, c, 64<<20)
	b := allocOrFail(t, c, 64<<20)
	start, err := c.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer start.Destroy()
	end, err := c.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer end.Destroy()
	if err := start.Record(s); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := s.CopyDtoD(b, 0, a, 0, 64<<20); err != nil {
			t.Fatal(err)
		}
	}
	if err := end.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := end.Synchronize(); err != nil {
		t.Fatal(err)
	}
	ms, err := ElapsedMs(start, end)
	if err != nil || ms <= 0 || ms > 1000 {
		t.Errorf("ElapsedMs = %v, %v", ms, err)
	}
	t.Logf("4 copies of 64 MiB: %.3f ms", ms)
}

// TestGemmExAgainstCPU runs row-major products through cublasGemmEx with
// padded leading dimensions and compares with a float64 reference:
// float32 (TF32 off) and bf16 inputs with float32 or bf16 outputs.
func TestGemmExAgainstCPU(t *testing.T) {
	c := openOrSkip(t)
	s := streamOrFail(t, c)
	blas, err := c.NewBLAS()
	if err != nil {
		t.Fatalf("NewBLAS: %v", err)
	}
	defer blas.Destroy()
	if err := blas.SetStream(s); err != nil {
		t.Fatal(err)
	}
	v, path := CUBLASVersion()
	t.Logf("cuBLAS %s from %s", v, path)
	seed := rand.Uint64()
	t.Logf("seed %#x", seed)
	r := rand.New(rand.NewPCG(seed, 4))
	const m, n, k = 131, 72, 200
	const lda, ldb, ldc = k + 8, n + 8, n + 8
	a := make([]float32, m*lda)
	b := make([]float32, k*ldb)
	for i := range a {
		a[i] = float32(r.NormFloat64())
	}
	for i := range b {
		b[i] = float32(r.NormFloat64())
	}
	bf := func(x []float32) ([]uint16, []float32) {
		h := make([]uint16, len(x))
		w := make([]float32, len(x))
		for i, v := range x {
			h[i] = Float32ToBF16(v)
			w[i] = BF16ToFloat32(h[i])
		}
		return h, w
	}
	aH, aR := bf(a)
	bH, bR := bf(b)
	ref := func(a, b []float32) []float64 {
		out := make([]float64, m*n)
		for i := range m {
			for j := range n {
				var sum float64
				for kk := range k {
					sum += float64(a[i*lda+kk]) * float64(b[kk*ldb+j])
				}
				out[i*n+j] = sum
			}
		}
		return out
	}
	ref32, ref16 := ref(a, b), ref(aR, bR)
	dA32 := allocOrFail(t, c, 4*len(a))
	dB32 := allocOrFail(t, c, 4*len(b))
	dA16 := allocOrFail(t, c, 2*len(a))
	dB16 := allocOrFail(t, c, 2*len(b))
	dC := allocOrFail(t, c, 4*m*ldc)
	for _, up := range []error{Upload(s, dA32, 0, a), Upload(s, dB32, 0, b), Upload(s, dA16, 0, aH), Upload(s, dB16, 0, bH)} {
		if up != nil {
			t.Fatal(up)
		}
	}
	tests := []struct {
		name    string
		a, b    *Buffer
		in, out DataType
		compute ComputeType
		math    MathMode
		ref     []float64
		tol     float64
	}{
		{"fp32 default math", dA32, dB32, R32F, R32F, Compute32F, DefaultMath, ref32, 1e-6},
		{"fp32 pedantic", dA32, dB32, R32F, R32F, Compute32FPedantic, PedanticMath, ref32, 1e-6},
		{"bf16 in, fp32 out", dA16, dB16, R16BF, R32F, Compute32F, DefaultMath, ref16, 1e-5},
		{"bf16 in, bf16 out", dA16, dB16, R16BF, R16BF, Compute32F, DefaultMath, ref16, 1e-2},
	}
	for _, tc := range tests {
		if err := blas.SetMathMode(tc.math); err != nil {
			t.Fatal(err)
		}
		if err := s.Memset32(dC, 0, 0x7fc07fc0, m*ldc); err != nil { // NaN in fp32 and bf16
			t.Fatal(err)
		}
		g := RowMajorGemm{M: m, N: n, K: k, A: tc.a.Ptr(), B: tc.b.Ptr(), C: dC.Ptr(),
			AType: tc.in, BType: tc.in, CType: tc.out, LDA: lda, LDB: ldb, LDC: ldc, Alpha: 1, Compute: tc.compute}
		if err := blas.GemmEx(g.ColumnMajor()); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := make([]float64, m*n)
		if tc.out == R32F {
			out := make([]float32, m*ldc)
			if err := Download(s, out, dC, 0); err != nil {
				t.Fatal(err)
			}
			for i := range m {
				for j := range n {
					got[i*n+j] = float64(out[i*ldc+j])
				}
			}
		} else {
			out := make([]uint16, m*ldc)
			if err := Download(s, out, dC, 0); err != nil {
				t.Fatal(err)
			}
			for i := range m {
				for j := range n {
					got[i*n+j] = float64(BF16ToFloat32(out[i*ldc+j]))
				}
			}
		}
		rel := relErr(got, tc.ref)
		t.Logf("%s: relative error %.3g (bound %g)", tc.name, rel, tc.tol)
		if !(rel <= tc.tol) {
			t.Errorf("%s: relative error %.3g > %g", tc.name, rel, tc.tol)
		}
	}
	if err := blas.GemmEx(Gemm{M: 1}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("invalid gemm: %v", err)
	}
}

// relErr is ||got-want|| / ||want|| (NaN if got has a NaN).
func relErr(got, want []float64) float64 {
	var num, den float64
	for i := range want {
		d := got[i] - want[i]
		num += d * d
		den += want[i] * want[i]
	}
	return math.Sqrt(num / den)
}

// TestGraphCapture records a memset and a copy, replays them twice, and
// checks that a failed recording leaves the stream usable.
func TestGraphCapture(t *testing.T) {
	c := openOrSkip(t)
	s := streamOrFail(t, c)
	const words = 1 << 16
	a := allocOrFail(t, c, 4*words)
	b := allocOrFail(t, c, 4*words)
	g, err := s.Capture(func() error {
		if err := s.Memset32(a, 0, 0x01020304, words); err != nil {
			return err
		}
		return s.CopyDtoD(b, 0, a, 0, 4*words)
	})
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	defer g.Destroy()
	got := make([]uint32, words)
	for round := range 2 {
		if err := s.Memset32(b, 0, 0, words); err != nil {
			t.Fatal(err)
		}
		if err := g.Launch(s); err != nil {
			t.Fatal(err)
		}
		if err := Download(s, got, b, 0); err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if v != 0x01020304 {
				t.Fatalf("round %d word %d = %#x", round, i, v)
			}
		}
	}
	boom := errors.New("record failed")
	if _, err := s.Capture(func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("failed record: %v", err)
	}
	if err := s.Memset32(b, 0, 7, words); err != nil {
		t.Fatal(err)
	}
	if err := Download(s, got, b, 0); err != nil || got[words-1] != 7 {
		t.Errorf("stream after a failed capture: %v, %#x", err, got[words-1])
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := g.Launch(s); !errors.Is(err, ErrClosed) {
		t.Errorf("launch after Destroy: %v", err)
	}
}
