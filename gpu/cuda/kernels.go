package cuda

import (
	_ "embed"
	"math"
)

var (
	//go:embed kernels/bf16.cuh
	bf16Source string
	//go:embed kernels/convert.cu
	convertSource string
	//go:embed kernels/encoder.cu
	encoderSource string
)

// KernelSource is the CUDA C++ source of baton's kernels, for
// Context.CompileModule (compile it with KernelOptions): the bf16 helpers
// (kernels/bf16.cuh), then kernels/convert.cu and kernels/encoder.cu. Its
// extern "C" kernels are named by the Kernel* constants.
func KernelSource() string { return bf16Source + convertSource + encoderSource }

// KernelOptions are the NVRTC options KernelSource is meant for:
// --fmad=false keeps float64 arithmetic operation for operation equal to
// the Go reference (no fused multiply-add).
func KernelOptions() []string { return []string{"--fmad=false"} }

// Kernel names in KernelSource, with their parameters in order.
const (
	// KernelF32ToBF16 (const float* in, bf16* out, long long n).
	KernelF32ToBF16 = "baton_f32_to_bf16_kernel"
	// KernelBF16ToF32 (const bf16* in, float* out, long long n).
	KernelBF16ToF32 = "baton_bf16_to_f32_kernel"
	// KernelPatchifyF32 (const uint8* pix, const float* lut, float* x, int
	// rows, int kp, int imageSize, int patchSize, int inDim); launch with one
	// block per row of x. lut holds 3*65536 floats: the normalised value of
	// every 16-bit value of channel c at c*65536 + v.
	KernelPatchifyF32 = "baton_patchify_f32"
	// KernelPatchifyBF16 is KernelPatchifyF32 writing bf16.
	KernelPatchifyBF16 = "baton_patchify_bf16"
	// KernelGELUPadF32 (float* h, int rows, int hid, int hp), in place.
	KernelGELUPadF32 = "baton_gelu_pad_f32"
	// KernelGELUPadBF16 (bf16* h, int rows, int hid, int hp), in place.
	KernelGELUPadBF16 = "baton_gelu_pad_bf16"
)

// Float32ToBF16 rounds f to bfloat16 (nearest, ties to even; NaN stays a
// quiet NaN with its sign; overflow gives infinity), bit for bit like the
// device's baton_f32_to_bf16.
func Float32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x0040
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// BF16ToFloat32 widens a bfloat16 to float32 (exact).
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
