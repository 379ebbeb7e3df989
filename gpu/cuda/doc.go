// Package cuda is baton's thin binding to the CUDA driver API, NVRTC and
// cuBLAS, loaded at run time through github.com/ebitengine/purego: no CUDA
// toolkit is needed at build time and the package builds with and without
// cgo.
//
// Nothing is loaded or initialized at import time. The driver
// (libcuda.so.1) is opened and cuInit called on the first Open; NVRTC
// (libnvrtc.so*) on the first Compile; cuBLAS (libcublas.so*) on the first
// NewBLAS. Initialized reports whether this process has initialized CUDA,
// so that shutdown paths can skip GPU work in a process that never used the
// GPU (rule S-3). On a machine without the driver, Open returns an error
// wrapping ErrNoDriver; without a GPU, ErrNoDevice (NoGPU reports either).
//
// Threads: a CUDA context is current per OS thread, and goroutines move
// between threads, so every method that calls CUDA runs under
// Context.Do, which locks the goroutine to its thread and makes the
// context current first. Contexts are device primary contexts
// (cuDevicePrimaryCtxRetain), shared with any other CUDA user in the
// process.
//
// Errors: every return code is checked; failures are *Error values naming
// the library, the call and the code's name (e.g.
// "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)"), matched with
// errors.Is against the sentinels in errors.go.
//
// Kernels are kept as .cu source files embedded in the binary (kernels/),
// compiled by NVRTC to PTX for the device's compute capability
// (--gpu-architecture=compute_XY) and loaded with cuModuleLoadData.
package cuda
