package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNotInitializedAtImport(t *testing.T) {
	if initializedAtStart {
		t.Fatal("CUDA was initialized before any test asked for a GPU")
	}
}

func TestErrorFormatAndSentinels(t *testing.T) {
	tests := []struct {
		err      *Error
		text     string
		sentinel error
	}{
		{&Error{Lib: "cuda", Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"},
			"cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)", ErrOutOfMemory},
		{&Error{Lib: "cuda", Call: "cuInit", Code: 100, Name: "CUDA_ERROR_NO_DEVICE"},
			"cuda: cuInit: CUDA_ERROR_NO_DEVICE (100)", ErrNoDevice},
		{&Error{Lib: "cuda", Call: "cuInit", Code: 34, Name: "CUDA_ERROR_STUB_LIBRARY"},
			"cuda: cuInit: CUDA_ERROR_STUB_LIBRARY (34)", ErrNoDriver},
		{&Error{Lib: "cublas", Call: "cublasCreate_v2", Code: 3, Name: "CUBLAS_STATUS_ALLOC_FAILED"},
			"cublas: cublasCreate_v2: CUBLAS_STATUS_ALLOC_FAILED (3)", ErrOutOfMemory},
		{&Error{Lib: "nvrtc", Call: "nvrtcCompileProgram", Code: 6, Name: "NVRTC_ERROR_COMPILATION", Detail: "x.cu: error"},
			"nvrtc: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6): x.cu: error", ErrCompile},
		{&Error{Lib: "cuda", Call: "cuLaunchKernel", Code: 719, Name: "CUDA_ERROR_LAUNCH_FAILED"},
			"cuda: cuLaunchKernel: CUDA_ERROR_LAUNCH_FAILED (719)", nil},
	}
	all := []error{ErrNoDriver, ErrNoDevice, ErrNoNVRTC, ErrNoCUBLAS, ErrCompile, ErrOutOfMemory, ErrInvalidArgument, ErrClosed}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.text {
			t.Errorf("Error() = %q, want %q", got, tc.text)
		}
		for _, s := range all {
			if got, want := errors.Is(tc.err, s), s == tc.sentinel; got != want {
				t.Errorf("errors.Is(%q, %v) = %v, want %v", tc.text, s, got, want)
			}
		}
	}
	if !NoGPU(&Error{Lib: "cuda", Code: 100}) || NoGPU(&Error{Lib: "cuda", Code: 2}) || NoGPU(nil) {
		t.Error("NoGPU misclassifies")
	}
}

func TestCodeNames(t *testing.T) {
	var d *driverAPI // not loaded: the static table answers
	if got := d.errorName(222); got != "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" {
		t.Errorf("errorName(222) = %q", got)
	}
	if got := d.errorName(12345); got != "CUDA_ERROR_12345" {
		t.Errorf("errorName(12345) = %q", got)
	}
	if err := cublasError("cublasGemmEx", 15); err == nil || !strings.Contains(err.Error(), "cublasGemmEx: CUBLAS_STATUS_NOT_SUPPORTED (15)") {
		t.Errorf("cublasError = %v", err)
	}
	if cublasError("x", 0) != nil || nvrtcError("x", 0) != nil {
		t.Error("success codes must give nil")
	}
	if err := nvrtcError("nvrtcCreateProgram", 3); !strings.Contains(err.Error(), "NVRTC_ERROR_INVALID_INPUT") {
		t.Errorf("nvrtcError = %v", err)
	}
}

func TestIPCHandleText(t *testing.T) {
	var h IPCHandle
	for i := range h.Reserved {
		h.Reserved[i] = byte(i*7 + 3)
	}
	got, err := ParseIPCHandle(h.String())
	if err != nil || got != h {
		t.Fatalf("round trip: %v, equal %v", err, got == h)
	}
	good := h.String()
	for name, s := range map[string]string{
		"empty":      "",
		"short":      good[:126],
		"long":       good + "00",
		"upper case": strings.ToUpper(good),
		"non hex":    "zz" + good[2:],
		"space":      " " + good[1:],
	} {
		if _, err := ParseIPCHandle(s); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: ParseIPCHandle error %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestBF16ConversionVectors(t *testing.T) {
	tests := []struct {
		in   uint32 // float32 bits
		want uint16
	}{
		{0x3f800000, 0x3f80},                // 1
		{0x3f808000, 0x3f80},                // 1 + 2^-8: tie, rounds to even (down)
		{0x3f818000, 0x3f82},                // tie, rounds to even (up)
		{0x3f808001, 0x3f81},                // just above the tie
		{0x80000000, 0x8000},                // -0
		{0x7f800000, 0x7f80},                // +inf
		{0xff800000, 0xff80},                // -inf
		{0x7f7fffff, 0x7f80},                // max float rounds to inf
		{0x00000001, 0x0000},                // smallest subnormal rounds to 0
		{0x7fc00000, 0x7fc0},                // quiet NaN
		{0x7f800001, 0x7fc0},                // signalling NaN becomes quiet
		{0xffc00001, 0xffc0},                // negative NaN keeps its sign
		{math.Float32bits(-2.5), 0xc020},    // exact
		{math.Float32bits(0.1), 0x3dcd},     // 0x3dcccccd rounds up
		{math.Float32bits(3.14159), 0x4049}, // 0x40490fd0
	}
	for _, tc := range tests {
		got := Float32ToBF16(math.Float32frombits(tc.in))
		if got != tc.want {
			t.Errorf("Float32ToBF16(%#08x) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	// Widening is exact and narrowing it back is the identity (non-NaN).
	for h := range 1 << 16 {
		f := BF16ToFloat32(uint16(h))
		if f != f {
			continue
		}
		if got := Float32ToBF16(f); got != uint16(h) {
			t.Fatalf("Float32ToBF16(BF16ToFloat32(%#04x)) = %#04x", h, got)
		}
	}
}

// colMajorGemm is a float64 reference of the cuBLAS column-major product
// (OpN only): C = alpha*A*B + beta*C.
func colMajorGemm(g Gemm, a, b, c []float64) {
	for j := 0; j < g.N; j++ {
		for i := 0; i < g.M; i++ {
			var s float64
			for k := 0; k < g.K; k++ {
				s += a[i+k*g.LDA] * b[k+j*g.LDB]
			}
			c[i+j*g.LDC] = float64(g.Alpha)*s + float64(g.Beta)*c[i+j*g.LDC]
		}
	}
}

// TestRowMajorMapping checks, on the CPU, that RowMajorGemm.ColumnMajor's
// call computes the row-major product (leading dimensions padded).
func TestRowMajorMapping(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %#x", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for _, sz := range [][3]int{{1, 1, 1}, {3, 5, 7}, {17, 4, 9}, {8, 33, 2}} {
		m, n, k := sz[0], sz[1], sz[2]
		rm := RowMajorGemm{M: m, N: n, K: k, LDA: k + 3, LDB: n + 1, LDC: n + 2, Alpha: 1, Beta: 0, Compute: Compute32F,
			A: 1, B: 2, C: 3}
		a := make([]float64, m*rm.LDA)
		b := make([]float64, k*rm.LDB)
		for i := range a {
			a[i] = r.NormFloat64()
		}
		for i := range b {
			b[i] = r.NormFloat64()
		}
		c := make([]float64, m*rm.LDC)
		g := rm.ColumnMajor()
		if err := g.Validate(); err != nil {
			t.Fatalf("%v: %v", sz, err)
		}
		if g.A != 2 || g.B != 1 || g.C != 3 {
			t.Fatalf("pointers not swapped: %+v", g)
		}
		colMajorGemm(g, b, a, c) // cuBLAS's A is our B and vice versa
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var want float64
				for kk := 0; kk < k; kk++ {
					want += a[i*rm.LDA+kk] * b[kk*rm.LDB+j]
				}
				if got := c[i*rm.LDC+j]; math.Abs(got-want) > 1e-12 {
					t.Fatalf("%v: C[%d,%d] = %v, want %v", sz, i, j, got, want)
				}
			}
		}
	}
}

func TestGemmValidate(t *testing.T) {
	ok := Gemm{M: 4, N: 3, K: 2, LDA: 4, LDB: 2, LDC: 4, A: 1, B: 2, C: 3, Compute: Compute32F}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid gemm rejected: %v", err)
	}
	for name, mut := range map[string]func(*Gemm){
		"zero M":          func(g *Gemm) { g.M = 0 },
		"negative K":      func(g *Gemm) { g.K = -1 },
		"huge N":          func(g *Gemm) { g.N = math.MaxInt32 + 1 },
		"short LDA":       func(g *Gemm) { g.LDA = 3 },
		"short LDA, T":    func(g *Gemm) { g.TransA, g.LDA = OpT, 1 },
		"short LDB":       func(g *Gemm) { g.LDB = 1 },
		"short LDB, T":    func(g *Gemm) { g.TransB, g.LDB = OpT, 2 },
		"short LDC":       func(g *Gemm) { g.LDC = 2 },
		"nil C":           func(g *Gemm) { g.C = 0 },
		"16F compute":     func(g *Gemm) { g.Compute = 64 },
		"unknown compute": func(g *Gemm) { g.Compute = 0 },
	} {
		g := ok
		mut(&g)
		if err := g.Validate(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestLibraryCandidates(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"libfoo.so", "libfoo.so.12", "libfoo.so.13.0.48", "libfoo.so.13", "libfoo-builtins.so.13"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("BATON_TEST_LIBFOO", "/explicit/libfoo.so.9")
	t.Setenv("CUDA_HOME", filepath.Dir(dir)) // not a toolkit: adds nothing
	saved := searchDirs
	searchDirs = []string{dir}
	defer func() { searchDirs = saved }()
	got := libSpec{base: "libfoo.so", env: "BATON_TEST_LIBFOO", sonames: []string{"libfoo.so.13"}}.candidates()
	want := []string{"/explicit/libfoo.so.9", "libfoo.so.13",
		filepath.Join(dir, "libfoo.so.13.0.48"), filepath.Join(dir, "libfoo.so.13"),
		filepath.Join(dir, "libfoo.so.12"), filepath.Join(dir, "libfoo.so")}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("candidates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	_, _, err := openLibrary(libSpec{base: "libdefinitely-not-here.so", sonames: []string{"libdefinitely-not-here.so.1"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "no loadable candidate") {
		t.Errorf("openLibrary of a missing library: %v", err)
	}
}

func TestGridFor(t *testing.T) {
	for _, tc := range []struct {
		n        int64
		tpb, max int
		want     uint32
	}{{0, 256, 100, 1}, {1, 256, 100, 1}, {256, 256, 100, 1}, {257, 256, 100, 2}, {1 << 30, 256, 4096, 4096}, {1000, 256, 0, 4}} {
		if got := GridFor(tc.n, tc.tpb, tc.max); got != tc.want {
			t.Errorf("GridFor(%d, %d, %d) = %d, want %d", tc.n, tc.tpb, tc.max, got, tc.want)
		}
	}
}

// TestWithoutGPU runs everywhere: on a machine without a GPU, Open must
// fail with an error NoGPU recognises (so GPU tests skip); with one, it must
// succeed.
func TestWithoutGPU(t *testing.T) {
	c, err := Open(0)
	if err == nil {
		_ = c.Close()
		t.Skip("this machine has a GPU: the no-GPU path is not exercised")
	}
	if !NoGPU(err) {
		t.Fatalf("Open(0) without a usable GPU: %v, want an error matching ErrNoDriver or ErrNoDevice", err)
	}
	t.Logf("no GPU, as expected here: %v", err)
	if errors.Is(err, ErrNoDriver) && Initialized() {
		t.Error("Initialized() true although the driver did not load")
	}
}

// TestCompileKernels needs NVRTC but no GPU: the embedded kernels must
// compile for Hopper (compute_90) and export every named kernel.
func TestCompileKernels(t *testing.T) {
	ptx, log, err := Compile(KernelSource(), "baton_kernels.cu", "compute_90", KernelOptions()...)
	if errors.Is(err, ErrNoNVRTC) {
		t.Skipf("no NVRTC here, skipping: %v", err)
	}
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	major, minor, path, _ := NVRTCVersion()
	t.Logf("NVRTC %d.%d from %s; PTX %d bytes", major, minor, path, len(ptx))
	if log != "" {
		t.Logf("NVRTC log: %s", log)
	}
	for _, k := range []string{KernelF32ToBF16, KernelBF16ToF32, KernelPatchifyF32, KernelPatchifyBF16, KernelGELUPadF32, KernelGELUPadBF16} {
		if !strings.Contains(string(ptx), ".entry "+k) {
			t.Errorf("PTX has no entry %s", k)
		}
	}
}

func TestCompileRejects(t *testing.T) {
	if _, _, err := Compile("", "x.cu", "compute_90"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("empty source: %v", err)
	}
	if _, _, err := Compile("__global__ void k(){}", "x.cu", "sm_90"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad arch: %v", err)
	}
	_, log, err := Compile(`extern "C" __global__ void k(int* p) { p[0] = undefined_name; }`, "broken.cu", "compute_90")
	if errors.Is(err, ErrNoNVRTC) {
		t.Skipf("no NVRTC here, skipping: %v", err)
	}
	if !errors.Is(err, ErrCompile) || !strings.Contains(log, "undefined_name") || !strings.Contains(err.Error(), "broken.cu") {
		t.Errorf("broken source: err %v, log %q", err, log)
	}
}
