package cuda

import (
	"errors"
	"fmt"
)

// Sentinel errors; failures wrap them (test with errors.Is).
var (
	// ErrNoDriver: libcuda.so.1 cannot be loaded, or it is a stub without a
	// kernel driver behind it (CUDA_ERROR_STUB_LIBRARY).
	ErrNoDriver = errors.New("cuda: no NVIDIA driver (libcuda.so.1 not loadable)")
	// ErrNoDevice: the driver reports no CUDA device (CUDA_ERROR_NO_DEVICE,
	// or a device count of 0).
	ErrNoDevice = errors.New("cuda: no CUDA device")
	// ErrNoNVRTC: no loadable libnvrtc.so* was found (see Compile).
	ErrNoNVRTC = errors.New("cuda: NVRTC library not found")
	// ErrNoCUBLAS: no loadable libcublas.so* was found (see NewBLAS).
	ErrNoCUBLAS = errors.New("cuda: cuBLAS library not found")
	// ErrCompile: NVRTC rejected a kernel source; the *Error's Detail holds
	// the program log.
	ErrCompile = errors.New("cuda: kernel compilation failed")
	// ErrOutOfMemory: an allocation failed for lack of device memory
	// (CUDA_ERROR_OUT_OF_MEMORY, CUBLAS_STATUS_ALLOC_FAILED).
	ErrOutOfMemory = errors.New("cuda: out of device memory")
	// ErrInvalidArgument: the caller passed a size, pointer, shape or handle
	// that baton rejects before calling CUDA (negative or overflowing sizes,
	// copies past a buffer's end, a malformed IPC handle string).
	ErrInvalidArgument = errors.New("cuda: invalid argument")
	// ErrClosed: the object was used after Close/Free/Destroy.
	ErrClosed = errors.New("cuda: use after close")
)

// NoGPU reports whether err means "this machine cannot run CUDA at all" (no
// driver or no device), the condition under which GPU tests skip.
func NoGPU(err error) bool {
	return errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice)
}

// Error is a failed call into the driver, NVRTC or cuBLAS.
type Error struct {
	// Lib is "cuda" (driver API), "nvrtc" or "cublas".
	Lib string
	// Call is the C entry point, e.g. "cuMemAlloc_v2".
	Call string
	// Code is the numeric CUresult / nvrtcResult / cublasStatus_t.
	Code int
	// Name is the code's symbolic name, e.g. "CUDA_ERROR_OUT_OF_MEMORY".
	Name string
	// Detail is extra text: the NVRTC program log, or what was being done.
	Detail string
}

// Error formats as "lib: call: NAME (code)[: detail]".
func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s: %s (%d)", e.Lib, e.Call, e.Name, e.Code)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is maps codes to the package sentinels: CUDA_ERROR_NO_DEVICE (100) ->
// ErrNoDevice, CUDA_ERROR_STUB_LIBRARY (34) -> ErrNoDriver,
// CUDA_ERROR_OUT_OF_MEMORY (2) and CUBLAS_STATUS_ALLOC_FAILED (3) ->
// ErrOutOfMemory, NVRTC_ERROR_COMPILATION (6) -> ErrCompile.
func (e *Error) Is(target error) bool {
	switch e.Lib {
	case "cuda":
		switch e.Code {
		case cudaErrorNoDevice:
			return target == ErrNoDevice
		case cudaErrorStubLibrary:
			return target == ErrNoDriver
		case cudaErrorOutOfMemory:
			return target == ErrOutOfMemory
		}
	case "cublas":
		return e.Code == cublasStatusAllocFailed && target == ErrOutOfMemory
	case "nvrtc":
		return e.Code == nvrtcErrorCompilation && target == ErrCompile
	}
	return false
}

// CUresult codes with special meaning here (cuda.h).
const (
	cudaSuccess          = 0
	cudaErrorOutOfMemory = 2
	cudaErrorStubLibrary = 34
	cudaErrorNoDevice    = 100
)

// cudaErrorNames is the fallback for cuGetErrorName (used when the driver
// did not load far enough to ask it): the CUresult codes baton is likely to
// meet.
var cudaErrorNames = map[int]string{
	0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
	3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED", 34: "CUDA_ERROR_STUB_LIBRARY",
	46: "CUDA_ERROR_DEVICE_UNAVAILABLE", 100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
	200: "CUDA_ERROR_INVALID_IMAGE", 201: "CUDA_ERROR_INVALID_CONTEXT", 209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	218: "CUDA_ERROR_INVALID_PTX", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", 400: "CUDA_ERROR_INVALID_HANDLE",
	500: "CUDA_ERROR_NOT_FOUND", 600: "CUDA_ERROR_NOT_READY", 700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", 702: "CUDA_ERROR_LAUNCH_TIMEOUT", 719: "CUDA_ERROR_LAUNCH_FAILED",
	801: "CUDA_ERROR_NOT_SUPPORTED", 803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 999: "CUDA_ERROR_UNKNOWN",
}

// cublasStatus_t values (cublas_api.h).
const (
	cublasStatusSuccess     = 0
	cublasStatusAllocFailed = 3
)

var cublasStatusNames = map[int]string{
	0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
	7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// nvrtcResult values (nvrtc.h).
const (
	nvrtcSuccess          = 0
	nvrtcErrorCompilation = 6
)

var nvrtcResultNames = map[int]string{
	0: "NVRTC_SUCCESS", 1: "NVRTC_ERROR_OUT_OF_MEMORY", 2: "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	3: "NVRTC_ERROR_INVALID_INPUT", 4: "NVRTC_ERROR_INVALID_PROGRAM", 5: "NVRTC_ERROR_INVALID_OPTION",
	6: "NVRTC_ERROR_COMPILATION", 7: "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	8: "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION", 9: "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	10: "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID", 11: "NVRTC_ERROR_INTERNAL_ERROR", 12: "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
}

// nameOr returns names[code], or prefix+"<code>" for an unknown code.
func nameOr(names map[int]string, prefix string, code int) string {
	if n, ok := names[code]; ok {
		return n
	}
	return fmt.Sprintf("%s%d", prefix, code)
}

// cublasError turns a cublasStatus_t into nil or an *Error naming call.
func cublasError(call string, status int32) error {
	if status == cublasStatusSuccess {
		return nil
	}
	return &Error{Lib: "cublas", Call: call, Code: int(status), Name: nameOr(cublasStatusNames, "CUBLAS_STATUS_", int(status))}
}

// nvrtcError turns an nvrtcResult into nil or an *Error naming call.
func nvrtcError(call string, r int32) error {
	if r == nvrtcSuccess {
		return nil
	}
	return &Error{Lib: "nvrtc", Call: call, Code: int(r), Name: nameOr(nvrtcResultNames, "NVRTC_ERROR_", int(r))}
}

// withDetail sets the Detail of the *Error inside err, if any and unset,
// and returns err.
func withDetail(err error, detail string) error {
	var e *Error
	if errors.As(err, &e) && e.Detail == "" {
		e.Detail = detail
	}
	return err
}
