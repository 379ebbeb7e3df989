// encoder.cu: the device half of the CUDA encoder (engine/encoder/cuda).
//
// The MLP's biases are folded into the matrix products: the input matrix X
// [rows, kp] carries a 1 in column inDim and zeros up to kp, and W1 has the
// bias b1 as row inDim (zeros after), so X*W1 = patches*W1 + b1; likewise the
// hidden matrix H [rows, hp] carries a 1 in column hid and W2 has b2 as row
// hid. kp and hp are multiples of 8 (16-byte rows in bf16). The kernels below
// write those constant columns on every pass, so no buffer state survives
// between passes.
//
// Compile with --fmad=false so that the float64 GELU matches the Go
// reference (engine/encoder.GELU) operation for operation.

// Patchify: X row r is patch p = r % patches of image r / patches. pix holds
// the resized images, each imageSize x imageSize pixels of Go's image.RGBA64
// (8 bytes per pixel: big-endian 16-bit R, G, B, A; stride 8*imageSize), one
// after another. Patch p is (py, px) = (p / grid, p % grid); inside a patch,
// column col = c*patchSize^2 + dy*patchSize + dx holds channel c of pixel
// (px*patchSize + dx, py*patchSize + dy). The normalised value of a 16-bit
// channel value v is lut[c*65536 + v], a table the host computes with
// encoder.Preprocess's own float64 expression, so X is bit-identical to
// Preprocess. One block per row; thread t handles pixels t, t+blockDim, ...
// of the patch (all three channels, one 8-byte load each), then the bias
// column (1) and the padding (0).
#define BATON_PATCHIFY_BODY(STORE)                                                              \
    int row = blockIdx.x;                                                                       \
    if (row >= rows) return;                                                                    \
    int grid = imageSize / patchSize;                                                           \
    int patches = grid * grid;                                                                  \
    int img = row / patches;                                                                    \
    int patch = row - img * patches;                                                            \
    int py = patch / grid;                                                                      \
    int px = patch - py * grid;                                                                 \
    int pp = patchSize * patchSize;                                                             \
    long long outRow = (long long)row * kp;                                                     \
    const unsigned char* base = pix + (long long)img * imageSize * imageSize * 8;               \
    for (int t = threadIdx.x; t < pp; t += blockDim.x) {                                        \
        int dy = t / patchSize;                                                                 \
        int dx = t - dy * patchSize;                                                            \
        long long off = ((long long)(py * patchSize + dy) * imageSize + px * patchSize + dx) * 8;   \
        unsigned int lo = *reinterpret_cast<const unsigned int*>(base + off);                   \
        unsigned int hi = *reinterpret_cast<const unsigned int*>(base + off + 4);               \
        /* bytes in memory: R_hi R_lo G_hi G_lo | B_hi B_lo A_hi A_lo */                         \
        unsigned int r = ((lo & 0xffu) << 8) | ((lo >> 8) & 0xffu);                             \
        unsigned int g = (((lo >> 16) & 0xffu) << 8) | (lo >> 24);                              \
        unsigned int b = ((hi & 0xffu) << 8) | ((hi >> 8) & 0xffu);                             \
        STORE(outRow + t, lut[r]);                                                              \
        STORE(outRow + pp + t, lut[65536 + g]);                                                 \
        STORE(outRow + 2 * pp + t, lut[2 * 65536 + b]);                                         \
    }                                                                                           \
    for (int col = inDim + threadIdx.x; col < kp; col += blockDim.x) {                          \
        STORE(outRow + col, col == inDim ? 1.0f : 0.0f);                                        \
    }

// baton_patchify_f32 writes X [rows, kp] as float32 (grid: rows blocks).
extern "C" __global__ void baton_patchify_f32(
    const unsigned char* __restrict__ pix, const float* __restrict__ lut, float* __restrict__ x,
    int rows, int kp, int imageSize, int patchSize, int inDim) {
#define BATON_STORE_F32(i, v) x[(i)] = (v)
    BATON_PATCHIFY_BODY(BATON_STORE_F32)
#undef BATON_STORE_F32
}

// baton_patchify_bf16 writes X [rows, kp] as bfloat16 (the float32 value
// rounded).
extern "C" __global__ void baton_patchify_bf16(
    const unsigned char* __restrict__ pix, const float* __restrict__ lut, baton_bf16* __restrict__ x,
    int rows, int kp, int imageSize, int patchSize, int inDim) {
#define BATON_STORE_BF16(i, v) x[(i)] = baton_f32_to_bf16(v)
    BATON_PATCHIFY_BODY(BATON_STORE_BF16)
#undef BATON_STORE_BF16
}

// GELU, tanh approximation: 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))).
// The float64 form matches encoder.GELU (float64 from the float32 input,
// rounded to float32); the float32 form serves bf16 activations.
__device__ __forceinline__ float baton_gelu_f64(float xf) {
    double x = (double)xf;
    return (float)(0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
}

__device__ __forceinline__ float baton_gelu_f32(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

// baton_pad_value is the value of H's constant columns col >= hid: 1 for
// the bias column hid, 0 after.
__device__ __forceinline__ float baton_pad_value(int col, int hid) { return col == hid ? 1.0f : 0.0f; }

// baton_gelu_pad_f32 applies GELU in place to H [rows, hp] (float32),
// columns < hid, and writes the constant columns; 4 elements per thread
// (hp % 4 == 0, H 16-byte aligned).
extern "C" __global__ void baton_gelu_pad_f32(float* __restrict__ h, int rows, int hid, int hp) {
    int vecs = hp / 4;
    long long n = (long long)rows * vecs;
    baton_f4* h4 = reinterpret_cast<baton_f4*>(h);
    BATON_GRID_STRIDE(i, n) {
        int col = (int)(i % vecs) * 4;
        baton_f4 v;
        if (col + 4 <= hid) {
            v = h4[i];
            v.x = baton_gelu_f64(v.x);
            v.y = baton_gelu_f64(v.y);
            v.z = baton_gelu_f64(v.z);
            v.w = baton_gelu_f64(v.w);
        } else if (col >= hid) {
            v.x = baton_pad_value(col, hid);
            v.y = baton_pad_value(col + 1, hid);
            v.z = baton_pad_value(col + 2, hid);
            v.w = baton_pad_value(col + 3, hid);
        } else {
            v = h4[i];
            v.x = col + 0 < hid ? baton_gelu_f64(v.x) : baton_pad_value(col + 0, hid);
            v.y = col + 1 < hid ? baton_gelu_f64(v.y) : baton_pad_value(col + 1, hid);
            v.z = col + 2 < hid ? baton_gelu_f64(v.z) : baton_pad_value(col + 2, hid);
            v.w = col + 3 < hid ? baton_gelu_f64(v.w) : baton_pad_value(col + 3, hid);
        }
        h4[i] = v;
    }
}

// baton_gelu_pad_bf16 is baton_gelu_pad_f32 for bfloat16 H, 8 elements per
// thread (hp % 8 == 0), GELU computed in float32.
extern "C" __global__ void baton_gelu_pad_bf16(baton_bf16* __restrict__ h, int rows, int hid, int hp) {
    int vecs = hp / 8;
    long long n = (long long)rows * vecs;
    baton_u4* h8 = reinterpret_cast<baton_u4*>(h);
    BATON_GRID_STRIDE(i, n) {
        int col = (int)(i % vecs) * 8;
        baton_u4 v = {0u, 0u, 0u, 0u};
        if (col < hid) {
            v = h8[i];
        }
        unsigned int w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int c0 = col + 2 * j;
            int c1 = c0 + 1;
            float lo = c0 < hid ? baton_gelu_f32(baton_bf16_to_f32((baton_bf16)(w[j] & 0xffffu)))
                                : baton_pad_value(c0, hid);
            float hi = c1 < hid ? baton_gelu_f32(baton_bf16_to_f32((baton_bf16)(w[j] >> 16)))
                                : baton_pad_value(c1, hid);
            w[j] = (unsigned int)baton_f32_to_bf16(lo) | ((unsigned int)baton_f32_to_bf16(hi) << 16);
        }
        h8[i] = baton_u4{w[0], w[1], w[2], w[3]};
    }
}
