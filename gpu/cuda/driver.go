package cuda

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// driverAPI holds the libcuda entry points baton uses. Types follow cuda.h
// on 64-bit Linux: CUresult int32, CUdevice int32, handles uintptr,
// CUdeviceptr uint64, size_t uintptr.
type driverAPI struct {
	cuInit                    func(flags uint32) int32
	cuDriverGetVersion        func(v *int32) int32
	cuGetErrorName            func(r int32, s **byte) int32
	cuDeviceGetCount          func(n *int32) int32
	cuDeviceGet               func(d *int32, ordinal int32) int32
	cuDeviceGetName           func(buf *byte, n int32, d int32) int32
	cuDeviceGetAttribute      func(v *int32, attr int32, d int32) int32
	cuDeviceTotalMem          func(bytes *uintptr, d int32) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, d int32) int32
	cuDevicePrimaryCtxRelease func(d int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuCtxSynchronize          func() int32
	cuMemGetInfo              func(free, total *uintptr) int32
	cuMemAlloc                func(p *uint64, bytes uintptr) int32
	cuMemFree                 func(p uint64) int32
	cuMemcpyHtoDAsync         func(dst uint64, src unsafe.Pointer, bytes uintptr, s uintptr) int32
	cuMemcpyDtoHAsync         func(dst unsafe.Pointer, src uint64, bytes uintptr, s uintptr) int32
	cuMemcpyDtoDAsync         func(dst, src uint64, bytes uintptr, s uintptr) int32
	cuMemsetD32Async          func(dst uint64, v uint32, n uintptr, s uintptr) int32
	cuStreamCreate            func(s *uintptr, flags uint32) int32
	cuStreamDestroy           func(s uintptr) int32
	cuStreamSynchronize       func(s uintptr) int32
	cuEventCreate             func(e *uintptr, flags uint32) int32
	cuEventRecord             func(e, s uintptr) int32
	cuEventSynchronize        func(e uintptr) int32
	cuEventElapsedTime        func(ms *float32, start, end uintptr) int32
	cuEventDestroy            func(e uintptr) int32
	cuModuleLoadData          func(m *uintptr, image unsafe.Pointer) int32
	cuModuleUnload            func(m uintptr) int32
	cuModuleGetFunction       func(f *uintptr, m uintptr, name string) int32
	cuLaunchKernel            func(f uintptr, gx, gy, gz, bx, by, bz, sharedBytes uint32, s uintptr, params unsafe.Pointer, extra unsafe.Pointer) int32
	cuStreamBeginCapture      func(s uintptr, mode uint32) int32
	cuStreamEndCapture        func(s uintptr, graph *uintptr) int32
	cuGraphInstantiate        func(exec *uintptr, graph uintptr, flags uint64) int32
	cuGraphLaunch             func(exec, s uintptr) int32
	cuGraphExecDestroy        func(exec uintptr) int32
	cuGraphDestroy            func(graph uintptr) int32
	cuIpcGetMemHandle         func(h *IPCHandle, p uint64) int32
	cuIpcOpenMemHandle        func(p *uint64, h IPCHandle, flags uint32) int32
	cuIpcCloseMemHandle       func(p uint64) int32
}

func (d *driverAPI) table() []binding {
	return []binding{
		{&d.cuInit, []string{"cuInit"}},
		{&d.cuDriverGetVersion, []string{"cuDriverGetVersion"}},
		{&d.cuGetErrorName, []string{"cuGetErrorName"}},
		{&d.cuDeviceGetCount, []string{"cuDeviceGetCount"}},
		{&d.cuDeviceGet, []string{"cuDeviceGet"}},
		{&d.cuDeviceGetName, []string{"cuDeviceGetName"}},
		{&d.cuDeviceGetAttribute, []string{"cuDeviceGetAttribute"}},
		{&d.cuDeviceTotalMem, []string{"cuDeviceTotalMem_v2"}},
		{&d.cuDevicePrimaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}},
		{&d.cuDevicePrimaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}},
		{&d.cuCtxSetCurrent, []string{"cuCtxSetCurrent"}},
		{&d.cuCtxSynchronize, []string{"cuCtxSynchronize"}},
		{&d.cuMemGetInfo, []string{"cuMemGetInfo_v2"}},
		{&d.cuMemAlloc, []string{"cuMemAlloc_v2"}},
		{&d.cuMemFree, []string{"cuMemFree_v2"}},
		{&d.cuMemcpyHtoDAsync, []string{"cuMemcpyHtoDAsync_v2"}},
		{&d.cuMemcpyDtoHAsync, []string{"cuMemcpyDtoHAsync_v2"}},
		{&d.cuMemcpyDtoDAsync, []string{"cuMemcpyDtoDAsync_v2"}},
		{&d.cuMemsetD32Async, []string{"cuMemsetD32Async"}},
		{&d.cuStreamCreate, []string{"cuStreamCreate"}},
		{&d.cuStreamDestroy, []string{"cuStreamDestroy_v2", "cuStreamDestroy"}},
		{&d.cuStreamSynchronize, []string{"cuStreamSynchronize"}},
		{&d.cuEventCreate, []string{"cuEventCreate"}},
		{&d.cuEventRecord, []string{"cuEventRecord"}},
		{&d.cuEventSynchronize, []string{"cuEventSynchronize"}},
		{&d.cuEventElapsedTime, []string{"cuEventElapsedTime", "cuEventElapsedTime_v2"}},
		{&d.cuEventDestroy, []string{"cuEventDestroy_v2", "cuEventDestroy"}},
		{&d.cuModuleLoadData, []string{"cuModuleLoadData"}},
		{&d.cuModuleUnload, []string{"cuModuleUnload"}},
		{&d.cuModuleGetFunction, []string{"cuModuleGetFunction"}},
		{&d.cuLaunchKernel, []string{"cuLaunchKernel"}},
		{&d.cuStreamBeginCapture, []string{"cuStreamBeginCapture_v2"}},
		{&d.cuStreamEndCapture, []string{"cuStreamEndCapture"}},
		{&d.cuGraphInstantiate, []string{"cuGraphInstantiateWithFlags"}},
		{&d.cuGraphLaunch, []string{"cuGraphLaunch"}},
		{&d.cuGraphExecDestroy, []string{"cuGraphExecDestroy"}},
		{&d.cuGraphDestroy, []string{"cuGraphDestroy"}},
		{&d.cuIpcGetMemHandle, []string{"cuIpcGetMemHandle"}},
		{&d.cuIpcOpenMemHandle, []string{"cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"}},
		{&d.cuIpcCloseMemHandle, []string{"cuIpcCloseMemHandle"}},
	}
}

// libcudaSpec: the driver is found through the dynamic loader only (it
// lives with the kernel driver, not with toolkits); BATON_LIBCUDA overrides.
var libcudaSpec = libSpec{base: "libcuda.so", env: "BATON_LIBCUDA", sonames: []string{"libcuda.so.1", "libcuda.so"}}

var (
	driverOnce    sync.Once
	drv           *driverAPI
	driverErr     error
	driverPath    string
	driverVersion int
	initialized   atomic.Bool
)

// loadDriver opens libcuda, binds the table and calls cuInit(0), once per
// process. Errors: ErrNoDriver (library missing, a symbol missing, or
// CUDA_ERROR_STUB_LIBRARY), ErrNoDevice (CUDA_ERROR_NO_DEVICE), or the
// *Error of cuInit.
func loadDriver() (*driverAPI, error) {
	driverOnce.Do(func() {
		d := &driverAPI{}
		h, path, err := openLibrary(libcudaSpec, func(h uintptr, _ string) error { return bindAll(h, d.table()) })
		if err != nil {
			driverErr = fmt.Errorf("%w: %v", ErrNoDriver, err)
			return
		}
		_ = h
		if err := d.check("cuInit", d.cuInit(0)); err != nil {
			driverErr = err
			return
		}
		var v int32
		if err := d.check("cuDriverGetVersion", d.cuDriverGetVersion(&v)); err != nil {
			driverErr = err
			return
		}
		drv, driverPath, driverVersion = d, path, int(v)
		initialized.Store(true)
	})
	return drv, driverErr
}

// Initialized reports whether this process has loaded the driver and called
// cuInit successfully (through Open). It never loads anything itself: shutdown
// paths use it to skip CUDA cleanup in processes that never touched the GPU
// (rule S-3).
func Initialized() bool { return initialized.Load() }

// DriverVersion loads and initializes the driver if needed and returns the
// CUDA version it supports (cuDriverGetVersion, 1000*major + 10*minor, e.g.
// 13000) and the library path that was opened. Errors as Open.
func DriverVersion() (version int, libraryPath string, err error) {
	if _, err := loadDriver(); err != nil {
		return 0, "", err
	}
	return driverVersion, driverPath, nil
}

// check turns a CUresult into nil or an *Error naming call and the code's
// name (from cuGetErrorName when the driver is loaded).
func (d *driverAPI) check(call string, r int32) error {
	if r == cudaSuccess {
		return nil
	}
	return &Error{Lib: "cuda", Call: call, Code: int(r), Name: d.errorName(r)}
}

func (d *driverAPI) errorName(r int32) string {
	if d != nil && d.cuGetErrorName != nil {
		var p *byte
		if d.cuGetErrorName(r, &p) == cudaSuccess && p != nil {
			return goString(p)
		}
	}
	return nameOr(cudaErrorNames, "CUDA_ERROR_", int(r))
}

// goString copies the NUL-terminated C string at p (at most 4096 bytes).
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for n < 4096 && *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
