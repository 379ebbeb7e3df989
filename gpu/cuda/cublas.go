package cuda

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Op is cublasOperation_t.
type Op int32

// Operations.
const (
	OpN Op = 0 // CUBLAS_OP_N: use the matrix as is
	OpT Op = 1 // CUBLAS_OP_T: use its transpose
)

// DataType is cudaDataType_t (library_types.h).
type DataType int32

// Data types used by the encoder.
const (
	R32F  DataType = 0  // CUDA_R_32F, float32
	R16F  DataType = 2  // CUDA_R_16F, IEEE half
	R16BF DataType = 14 // CUDA_R_16BF, bfloat16
)

// ComputeType is cublasComputeType_t.
type ComputeType int32

// Compute types. Compute32F never uses TF32 unless the handle's math mode
// is TF32TensorOpMath; Compute32FPedantic also forbids every reduced-
// precision shortcut.
const (
	Compute32F         ComputeType = 68 // CUBLAS_COMPUTE_32F
	Compute32FPedantic ComputeType = 69 // CUBLAS_COMPUTE_32F_PEDANTIC
	Compute32FFastTF32 ComputeType = 77 // CUBLAS_COMPUTE_32F_FAST_TF32
)

// MathMode is cublasMath_t.
type MathMode int32

// Math modes. DefaultMath keeps float32 products in float32 (no TF32).
const (
	DefaultMath      MathMode = 0 // CUBLAS_DEFAULT_MATH
	PedanticMath     MathMode = 2 // CUBLAS_PEDANTIC_MATH
	TF32TensorOpMath MathMode = 3 // CUBLAS_TF32_TENSOR_OP_MATH
)

// gemmAlgoDefault is CUBLAS_GEMM_DEFAULT (heuristic choice).
const gemmAlgoDefault = -1

// cublasAPI holds the cuBLAS entry points (cublas_api.h).
type cublasAPI struct {
	create       func(h *uintptr) int32
	destroy      func(h uintptr) int32
	setStream    func(h, s uintptr) int32
	setMathMode  func(h uintptr, mode int32) int32
	getProperty  func(t int32, v *int32) int32
	setWorkspace func(h uintptr, ws uint64, bytes uintptr) int32
	gemmEx       func(h uintptr, ta, tb, m, n, k int32, alpha unsafe.Pointer, a uint64, at, lda int32,
		b uint64, bt, ldb int32, beta unsafe.Pointer, c uint64, ct, ldc, compute, algo int32) int32
	gemmStridedBatchedEx func(h uintptr, ta, tb, m, n, k int32, alpha unsafe.Pointer,
		a uint64, at, lda int32, strideA int64, b uint64, bt, ldb int32, strideB int64,
		beta unsafe.Pointer, c uint64, ct, ldc int32, strideC int64, batchCount, compute, algo int32) int32
}

func (c *cublasAPI) table() []binding {
	return []binding{
		{&c.create, []string{"cublasCreate_v2"}},
		{&c.destroy, []string{"cublasDestroy_v2"}},
		{&c.setStream, []string{"cublasSetStream_v2"}},
		{&c.setMathMode, []string{"cublasSetMathMode"}},
		{&c.getProperty, []string{"cublasGetProperty"}},
		{&c.setWorkspace, []string{"cublasSetWorkspace_v2"}},
		{&c.gemmEx, []string{"cublasGemmEx"}},
		{&c.gemmStridedBatchedEx, []string{"cublasGemmStridedBatchedEx"}},
	}
}

// libcublasSpec: BATON_CUBLAS overrides; libcublasLt is loaded from the
// same folder first.
var libcublasSpec = libSpec{
	base:       "libcublas.so",
	env:        "BATON_CUBLAS",
	sonames:    []string{"libcublas.so", "libcublas.so.13", "libcublas.so.12"},
	companions: []string{"libcublasLt.so"},
}

var (
	cublasOnce    sync.Once
	cublasLib     *cublasAPI
	cublasErr     error
	cublasPath    string
	cublasVersion [3]int
)

// loadCUBLAS opens the first cuBLAS whose major version the loaded driver
// supports (1000*major <= driver version). The driver must be loaded.
func loadCUBLAS() (*cublasAPI, error) {
	cublasOnce.Do(func() {
		var api *cublasAPI
		var ver [3]int
		_, path, err := openLibrary(libcublasSpec, func(h uintptr, _ string) error {
			c := &cublasAPI{}
			if err := bindAll(h, c.table()); err != nil {
				return err
			}
			for i := range ver { // MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
				var v int32
				if err := cublasError("cublasGetProperty", c.getProperty(int32(i), &v)); err != nil {
					return err
				}
				ver[i] = int(v)
			}
			if 1000*ver[0] > driverVersion {
				return fmt.Errorf("cuBLAS %d.%d needs a newer driver than CUDA %d.%d", ver[0], ver[1], driverVersion/1000, driverVersion%1000/10)
			}
			api = c
			return nil
		})
		if err != nil {
			cublasErr = fmt.Errorf("%w: %v", ErrNoCUBLAS, err)
			return
		}
		cublasLib, cublasPath, cublasVersion = api, path, ver
	})
	return cublasLib, cublasErr
}

// CUBLASVersion returns the loaded cuBLAS's "major.minor.patch" and path
// ("" before the first NewBLAS).
func CUBLASVersion() (version, libraryPath string) {
	if cublasLib == nil {
		return "", ""
	}
	return fmt.Sprintf("%d.%d.%d", cublasVersion[0], cublasVersion[1], cublasVersion[2]), cublasPath
}

// BLAS is a cuBLAS handle bound to a context. It is not safe for concurrent
// use: callers serialize (the CUDA encoder holds its own lock).
type BLAS struct {
	ctx       *Context
	h         uintptr
	destroyed atomic.Bool
}

// NewBLAS loads cuBLAS (first use) and creates a handle in the context
// (cublasCreate_v2), with math mode DefaultMath (no TF32). Errors:
// ErrNoCUBLAS, ErrClosed, *Error.
func (c *Context) NewBLAS() (*BLAS, error) {
	lib, err := loadCUBLAS()
	if err != nil {
		return nil, err
	}
	var h uintptr
	err = c.Do(func() error {
		if err := cublasError("cublasCreate_v2", lib.create(&h)); err != nil {
			return err
		}
		return cublasError("cublasSetMathMode", lib.setMathMode(h, int32(DefaultMath)))
	})
	if err != nil {
		return nil, err
	}
	return &BLAS{ctx: c, h: h}, nil
}

// SetStream makes later calls run on s (cublasSetStream_v2).
func (b *BLAS) SetStream(s *Stream) error {
	if b.destroyed.Load() || s.destroyed.Load() {
		return ErrClosed
	}
	return b.ctx.Do(func() error { return cublasError("cublasSetStream_v2", cublasLib.setStream(b.h, s.h)) })
}

// SetMathMode sets the handle's math mode (cublasSetMathMode); DefaultMath
// or PedanticMath keep TF32 off.
func (b *BLAS) SetMathMode(m MathMode) error {
	if b.destroyed.Load() {
		return ErrClosed
	}
	return b.ctx.Do(func() error { return cublasError("cublasSetMathMode", cublasLib.setMathMode(b.h, int32(m))) })
}

// SetWorkspace gives cuBLAS the device buffer ws as its workspace
// (cublasSetWorkspace_v2); nil means no workspace at all, which rules out
// algorithms that need one (split-K with a separate reduction, for one).
// The buffer must outlive the handle's use of it.
func (b *BLAS) SetWorkspace(ws *Buffer) error {
	if b.destroyed.Load() {
		return ErrClosed
	}
	var p uint64
	var n int
	if ws != nil {
		var err error
		if p, err = ws.span("SetWorkspace", 0, ws.bytes); err != nil {
			return err
		}
		n = ws.bytes
	}
	return b.ctx.Do(func() error { return cublasError("cublasSetWorkspace_v2", cublasLib.setWorkspace(b.h, p, uintptr(n))) })
}

// Destroy releases the handle (cublasDestroy_v2). A second Destroy returns
// ErrClosed.
func (b *BLAS) Destroy() error {
	if !b.destroyed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	return b.ctx.Do(func() error { return cublasError("cublasDestroy_v2", cublasLib.destroy(b.h)) })
}

// Gemm describes one cublasGemmEx call in cuBLAS's column-major terms:
// C[M,N] = Alpha * op(A)[M,K] * op(B)[K,N] + Beta * C, where a matrix with
// leading dimension ld stores element (i, j) at index i + j*ld. Alpha and
// Beta are float32 (the scale type of the 32F compute types). For
// GemmStridedBatchedEx, Batch products are computed, product b using the
// matrices at A + b*StrideA, B + b*StrideB, C + b*StrideC (strides in
// elements; a stride of 0 shares one matrix).
type Gemm struct {
	TransA, TransB            Op          // op(A), op(B): OpN as stored, OpT transposed
	M, N, K                   int         // C is M x N, the inner dimension K; each in 1..2^31-1
	A, B, C                   DevicePtr   // the matrices' device addresses, non-zero
	AType, BType, CType       DataType    // element types of A, B and C
	LDA, LDB, LDC             int         // leading dimensions in elements (Validate's bounds)
	Alpha, Beta               float32     // scale factors
	Compute                   ComputeType // a 32F compute type
	Batch                     int         // products of GemmStridedBatchedEx, >= 1 there; unused by GemmEx
	StrideA, StrideB, StrideC int64       // elements between batched products' matrices; 0 shares one
}

// RowMajorGemm describes C[M,N] = Alpha * A[M,K] * B[K,N] + Beta * C for
// row-major matrices (element (i, j) at i*ld + j; LDA >= K, LDB >= N,
// LDC >= N, in elements).
type RowMajorGemm struct {
	M, N, K                   int         // C is M x N, the inner dimension K
	A, B, C                   DevicePtr   // the matrices' device addresses
	AType, BType, CType       DataType    // element types of A, B and C
	LDA, LDB, LDC             int         // row strides in elements: LDA >= K, LDB >= N, LDC >= N
	Alpha, Beta               float32     // scale factors
	Compute                   ComputeType // a 32F compute type
	Batch                     int         // products, for GemmStridedBatchedEx
	StrideA, StrideB, StrideC int64       // elements between batched products' matrices; 0 shares one
}

// ColumnMajor returns the cuBLAS call computing g: a row-major matrix is the
// column-major storage of its transpose, and C^T = B^T * A^T, so the call
// is Gemm{OpN, OpN, M: g.N, N: g.M, K: g.K, A: g.B, LDA: g.LDB, B: g.A,
// LDB: g.LDA, C: g.C, LDC: g.LDC} (batch strides swapped likewise).
func (g RowMajorGemm) ColumnMajor() Gemm {
	return Gemm{
		TransA: OpN, TransB: OpN,
		M: g.N, N: g.M, K: g.K,
		A: g.B, AType: g.BType, LDA: g.LDB,
		B: g.A, BType: g.AType, LDB: g.LDA,
		C: g.C, CType: g.CType, LDC: g.LDC,
		Alpha: g.Alpha, Beta: g.Beta, Compute: g.Compute,
		Batch: g.Batch, StrideA: g.StrideB, StrideB: g.StrideA, StrideC: g.StrideC,
	}
}

// Validate checks sizes and leading dimensions before cuBLAS sees them:
// M, N, K in 1..2^31-1, LDA >= rows of op(A) stored (M for OpN, K for OpT),
// LDB likewise (K or N), LDC >= M, non-zero pointers, a 32F compute type,
// and a non-negative Batch and strides. Errors wrap ErrInvalidArgument.
func (g Gemm) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: cublasGemmEx: %s", ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	for _, d := range []struct {
		name string
		v    int
	}{{"M", g.M}, {"N", g.N}, {"K", g.K}, {"LDA", g.LDA}, {"LDB", g.LDB}, {"LDC", g.LDC}} {
		if d.v <= 0 || d.v > math.MaxInt32 {
			return bad("%s = %d out of range", d.name, d.v)
		}
	}
	rowsA, rowsB := g.M, g.K
	if g.TransA == OpT {
		rowsA = g.K
	}
	if g.TransB == OpT {
		rowsB = g.N
	}
	switch {
	case g.LDA < rowsA:
		return bad("LDA %d < %d", g.LDA, rowsA)
	case g.LDB < rowsB:
		return bad("LDB %d < %d", g.LDB, rowsB)
	case g.LDC < g.M:
		return bad("LDC %d < M %d", g.LDC, g.M)
	case g.A == 0 || g.B == 0 || g.C == 0:
		return bad("nil matrix pointer")
	case g.Compute != Compute32F && g.Compute != Compute32FPedantic && g.Compute != Compute32FFastTF32:
		return bad("compute type %d not supported here (want a 32F type)", g.Compute)
	case g.Batch < 0 || g.Batch > math.MaxInt32 || g.StrideA < 0 || g.StrideB < 0 || g.StrideC < 0:
		return bad("batch %d, strides %d %d %d", g.Batch, g.StrideA, g.StrideB, g.StrideC)
	}
	return nil
}

// GemmEx runs g (cublasGemmEx, CUBLAS_GEMM_DEFAULT) on the handle's
// stream. Errors: ErrInvalidArgument (Validate), ErrClosed, *Error (e.g.
// CUBLAS_STATUS_NOT_SUPPORTED for a type combination cuBLAS lacks).
func (b *BLAS) GemmEx(g Gemm) error {
	if b.destroyed.Load() {
		return ErrClosed
	}
	if err := g.Validate(); err != nil {
		return err
	}
	alpha, beta := g.Alpha, g.Beta
	return b.ctx.Do(func() error {
		return cublasError("cublasGemmEx", cublasLib.gemmEx(b.h, int32(g.TransA), int32(g.TransB),
			int32(g.M), int32(g.N), int32(g.K), unsafe.Pointer(&alpha),
			uint64(g.A), int32(g.AType), int32(g.LDA), uint64(g.B), int32(g.BType), int32(g.LDB),
			unsafe.Pointer(&beta), uint64(g.C), int32(g.CType), int32(g.LDC), int32(g.Compute), gemmAlgoDefault))
	})
}

// GemmStridedBatchedEx runs g.Batch products (cublasGemmStridedBatchedEx,
// CUBLAS_GEMM_DEFAULT) on the handle's stream; see Gemm for the strides.
// Errors: ErrInvalidArgument (Validate, or Batch < 1), ErrClosed, *Error.
func (b *BLAS) GemmStridedBatchedEx(g Gemm) error {
	if b.destroyed.Load() {
		return ErrClosed
	}
	if err := g.Validate(); err != nil {
		return err
	}
	if g.Batch < 1 {
		return fmt.Errorf("%w: cublasGemmStridedBatchedEx: batch %d", ErrInvalidArgument, g.Batch)
	}
	alpha, beta := g.Alpha, g.Beta
	return b.ctx.Do(func() error {
		return cublasError("cublasGemmStridedBatchedEx", cublasLib.gemmStridedBatchedEx(b.h, int32(g.TransA), int32(g.TransB),
			int32(g.M), int32(g.N), int32(g.K), unsafe.Pointer(&alpha),
			uint64(g.A), int32(g.AType), int32(g.LDA), g.StrideA,
			uint64(g.B), int32(g.BType), int32(g.LDB), g.StrideB,
			unsafe.Pointer(&beta), uint64(g.C), int32(g.CType), int32(g.LDC), g.StrideC,
			int32(g.Batch), int32(g.Compute), gemmAlgoDefault))
	})
}
