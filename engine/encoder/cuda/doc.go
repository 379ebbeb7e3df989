// Package cudaenc is the CUDA encoder: the same function as the CPU
// reference encoder (engine/encoder.CPU) computed on an NVIDIA GPU through
// gpu/cuda, selected by `baton serve --device cuda:0`.
//
// One Encode pass over a batch of n images (rows = n * Patches):
//
//  1. CPU: each image is resized exactly as encoder.Preprocess does (x/image
//     BiLinear, Src, into 16-bit RGBA64), images in parallel.
//  2. Upload the resized pixels (8 bytes per pixel, 1.6 MB per large image).
//  3. Kernel baton_patchify_*: normalise (through a table of Preprocess's
//     own float64 expression for every 16-bit value) and cut into patches,
//     writing X [rows, kp] with a constant 1 column (the bias input) and
//     zero padding; X is bit-identical to Preprocess in fp32.
//  4. cublasGemmEx: H = X * W1' where W1' [kp, Hidden] carries B1 as its
//     row InDim, so H = patches*W1 + B1.
//  5. Kernel baton_gelu_pad_*: GELU (tanh form) in place, plus H's constant
//     1 column and padding (hp = Hidden+1 rounded up to 8).
//  6. cublasGemmEx: Y = H * W2' where W2' [hp, Out] carries B2 as its row
//     Hidden: Y = GELU(...)*W2 + B2, float32 [rows, Out].
//  7. Download Y, one Embedding per image.
//
// Precision FP32 keeps everything float32 with TF32 off (CUBLAS_DEFAULT_MATH,
// CUBLAS_COMPUTE_32F): norm-wise relative error against the CPU encoder is
// about 1e-7 (bound 1e-5). Precision BF16 stores X, W1', H and W2' as
// bfloat16 and accumulates in float32 (CUBLAS_COMPUTE_32F), output float32:
// relative error about 3e-3 (bound 1e-2).
//
// Weights come from encoder.NewWeights(preset, seed), so both encoders share
// them. Nothing touches CUDA until New is called.
package cudaenc
