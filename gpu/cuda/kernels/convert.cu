// convert.cu: element-wise float32 <-> bfloat16 conversion of n elements.

extern "C" __global__ void baton_f32_to_bf16_kernel(const float* __restrict__ in,
                                                    baton_bf16* __restrict__ out, long long n) {
    BATON_GRID_STRIDE(i, n) { out[i] = baton_f32_to_bf16(in[i]); }
}

extern "C" __global__ void baton_bf16_to_f32_kernel(const baton_bf16* __restrict__ in,
                                                    float* __restrict__ out, long long n) {
    BATON_GRID_STRIDE(i, n) { out[i] = baton_bf16_to_f32(in[i]); }
}
