// bf16.cuh: bfloat16 as raw 16-bit words, with no CUDA headers (NVRTC
// compiles these sources without an include path). cuBLAS reads CUDA_R_16BF
// matrices as exactly these words. Prepended to every other kernel file.

typedef unsigned short baton_bf16;

// baton_f32_to_bf16 rounds to nearest, ties to even; NaN stays NaN (quiet,
// sign kept); overflow rounds to infinity. Same as cuda.Float32ToBF16.
__device__ __forceinline__ baton_bf16 baton_f32_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (baton_bf16)((u >> 16) | 0x0040u);
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (baton_bf16)(u >> 16);
}

// baton_bf16_to_f32 is exact.
__device__ __forceinline__ float baton_bf16_to_f32(baton_bf16 h) {
    return __uint_as_float(((unsigned int)h) << 16);
}

// 16-byte vectors, declared here so that no CUDA header is needed.
struct alignas(16) baton_f4 {
    float x, y, z, w;
};
struct alignas(16) baton_u4 {
    unsigned int x, y, z, w;
};

#define BATON_GRID_STRIDE(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (long long)gridDim.x * blockDim.x)
