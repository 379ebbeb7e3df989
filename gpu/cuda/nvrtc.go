package cuda

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// nvrtcAPI holds the NVRTC entry points (nvrtc.h).
type nvrtcAPI struct {
	version        func(major, minor *int32) int32
	getErrorString func(r int32) string
	create         func(prog *uintptr, src, name string, numHeaders int32, headers, includeNames unsafe.Pointer) int32
	compile        func(prog uintptr, numOptions int32, options unsafe.Pointer) int32
	ptxSize        func(prog uintptr, size *uintptr) int32
	ptx            func(prog uintptr, buf *byte) int32
	logSize        func(prog uintptr, size *uintptr) int32
	log            func(prog uintptr, buf *byte) int32
	destroy        func(prog *uintptr) int32
}

func (n *nvrtcAPI) table() []binding {
	return []binding{
		{&n.version, []string{"nvrtcVersion"}},
		{&n.getErrorString, []string{"nvrtcGetErrorString"}},
		{&n.create, []string{"nvrtcCreateProgram"}},
		{&n.compile, []string{"nvrtcCompileProgram"}},
		{&n.ptxSize, []string{"nvrtcGetPTXSize"}},
		{&n.ptx, []string{"nvrtcGetPTX"}},
		{&n.logSize, []string{"nvrtcGetProgramLogSize"}},
		{&n.log, []string{"nvrtcGetProgramLog"}},
		{&n.destroy, []string{"nvrtcDestroyProgram"}},
	}
}

// libnvrtcSpec: BATON_NVRTC overrides; then the unversioned name (a
// toolkit's dev link), the CUDA 13 and 12 sonames, then the folders of
// searchDirs.
var libnvrtcSpec = libSpec{
	base:    "libnvrtc.so",
	env:     "BATON_NVRTC",
	sonames: []string{"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"},
}

var (
	nvrtcOnce    sync.Once
	nvrtcLib     *nvrtcAPI
	nvrtcErr     error
	nvrtcPath    string
	nvrtcVersion [2]int
)

// loadNVRTC opens the first NVRTC that loads and, when the driver is
// loaded, is not newer than the CUDA version the driver supports (PTX from
// a newer NVRTC would be rejected by cuModuleLoadData with
// CUDA_ERROR_UNSUPPORTED_PTX_VERSION). It does not need a GPU.
func loadNVRTC() (*nvrtcAPI, error) {
	nvrtcOnce.Do(func() {
		var api *nvrtcAPI
		var ver [2]int
		_, path, err := openLibrary(libnvrtcSpec, func(h uintptr, _ string) error {
			n := &nvrtcAPI{}
			if err := bindAll(h, n.table()); err != nil {
				return err
			}
			var major, minor int32
			if r := n.version(&major, &minor); r != nvrtcSuccess {
				return fmt.Errorf("nvrtcVersion returned %d", r)
			}
			if Initialized() && 1000*int(major)+10*int(minor) > driverVersion {
				return fmt.Errorf("NVRTC %d.%d is newer than the driver's CUDA %d.%d", major, minor, driverVersion/1000, driverVersion%1000/10)
			}
			api, ver = n, [2]int{int(major), int(minor)}
			return nil
		})
		if err != nil {
			nvrtcErr = fmt.Errorf("%w: %v", ErrNoNVRTC, err)
			return
		}
		nvrtcLib, nvrtcPath, nvrtcVersion = api, path, ver
	})
	return nvrtcLib, nvrtcErr
}

// NVRTCVersion loads NVRTC if needed and returns its version and path.
// Errors: ErrNoNVRTC.
func NVRTCVersion() (major, minor int, libraryPath string, err error) {
	if _, err := loadNVRTC(); err != nil {
		return 0, 0, "", err
	}
	return nvrtcVersion[0], nvrtcVersion[1], nvrtcPath, nil
}

// Compile compiles CUDA C++ source to PTX with NVRTC for the virtual
// architecture arch ("compute_90"; DeviceInfo.VirtualArch), with
// --gpu-architecture=arch, -default-device, --std=c++17 and the extra
// options. It returns the NUL-terminated PTX and the program log (warnings
// included). Kernels meant for Module.Function should be extern "C". It
// needs NVRTC but no GPU. Errors: ErrNoNVRTC; ErrCompile (an *Error whose
// Detail is the log); ErrInvalidArgument for an empty source or arch.
func Compile(src, name, arch string, options ...string) (ptx []byte, log string, err error) {
	if strings.TrimSpace(src) == "" || !strings.HasPrefix(arch, "compute_") {
		return nil, "", fmt.Errorf("%w: Compile(%q): want non-empty source and an arch like compute_90, got %q", ErrInvalidArgument, name, arch)
	}
	n, err := loadNVRTC()
	if err != nil {
		return nil, "", err
	}
	var prog uintptr
	if err := nvrtcError("nvrtcCreateProgram", n.create(&prog, src, name, 0, nil, nil)); err != nil {
		return nil, "", err
	}
	defer n.destroy(&prog)

	opts := append([]string{"--gpu-architecture=" + arch, "-default-device", "--std=c++17"}, options...)
	cstrs := make([][]byte, len(opts))
	ptrs := make([]*byte, len(opts))
	for i, o := range opts {
		cstrs[i] = append([]byte(o), 0)
		ptrs[i] = &cstrs[i][0]
	}
	r := n.compile(prog, int32(len(ptrs)), unsafe.Pointer(&ptrs[0]))
	runtime.KeepAlive(cstrs)
	runtime.KeepAlive(ptrs)
	log = programLog(n, prog)
	if err := nvrtcError("nvrtcCompileProgram", r); err != nil {
		return nil, log, withDetail(err, fmt.Sprintf("%s (%s): %s", name, strings.Join(opts, " "), log))
	}
	var size uintptr
	if err := nvrtcError("nvrtcGetPTXSize", n.ptxSize(prog, &size)); err != nil {
		return nil, log, err
	}
	if size == 0 {
		return nil, log, &Error{Lib: "nvrtc", Call: "nvrtcGetPTXSize", Name: "EMPTY_PTX", Detail: name}
	}
	ptx = make([]byte, size)
	if err := nvrtcError("nvrtcGetPTX", n.ptx(prog, &ptx[0])); err != nil {
		return nil, log, err
	}
	return ptx, log, nil
}

// programLog returns the program's log without its trailing NUL ("" on
// failure).
func programLog(n *nvrtcAPI, prog uintptr) string {
	var size uintptr
	if n.logSize(prog, &size) != nvrtcSuccess || size <= 1 {
		return ""
	}
	buf := make([]byte, size)
	if n.log(prog, &buf[0]) != nvrtcSuccess {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00")
}
