//go:build linux && !cgo

package nvml

import (
	"fmt"
	"sync"

	"github.com/ebitengine/purego"
)

// pureNVML implements library by calling libnvidia-ml.so.1 through purego
// (CGO_ENABLED=0 builds, where go-nvml cannot build). The library is opened
// once per process, on the first Read, and stays open.
type pureNVML struct {
	init          func() int32
	shut          func() int32
	errString     func(r int32) string
	driverVer     func(buf *byte, n uint32) int32
	cudaVer       func(v *int32) int32
	count         func(n *uint32) int32
	handle        func(i uint32, dev *uintptr) int32
	name          func(dev uintptr, buf *byte, n uint32) int32
	uuid          func(dev uintptr, buf *byte, n uint32) int32
	memory        func(dev uintptr, m *nvmlMemory) int32
	computeCap    func(dev uintptr, major, minor *int32) int32
	utilization   func(dev uintptr, u *nvmlUtilization) int32
	deviceHandles map[int]uintptr
}

// nvmlMemory is nvmlMemory_t (bytes).
type nvmlMemory struct{ Total, Free, Used uint64 }

// nvmlUtilization is nvmlUtilization_t (percent).
type nvmlUtilization struct{ GPU, Memory uint32 }

// Buffer sizes from nvml.h (NVML_*_BUFFER_SIZE), with room to spare.
const stringBufferBytes = 256

var (
	pureOnce sync.Once
	pureLib  *pureNVML
	pureErr  error
)

func newLibrary() library { return &pureLoader{} }

// pureLoader defers dlopen to load so that newLibrary never touches the
// system.
type pureLoader struct{ *pureNVML }

func (p *pureLoader) load() error {
	pureOnce.Do(func() { pureLib, pureErr = openPure() })
	if pureErr != nil {
		return pureErr
	}
	p.pureNVML = pureLib
	p.deviceHandles = map[int]uintptr{}
	return nil
}

func openPure() (l *pureNVML, err error) {
	h, err := purego.Dlopen("libnvidia-ml.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, err
	}
	l = &pureNVML{}
	// RegisterLibFunc panics on a missing symbol; turn that into an error.
	defer func() {
		if r := recover(); r != nil {
			l, err = nil, fmt.Errorf("libnvidia-ml.so.1: %v", r)
		}
	}()
	purego.RegisterLibFunc(&l.init, h, "nvmlInit_v2")
	purego.RegisterLibFunc(&l.shut, h, "nvmlShutdown")
	purego.RegisterLibFunc(&l.errString, h, "nvmlErrorString")
	purego.RegisterLibFunc(&l.driverVer, h, "nvmlSystemGetDriverVersion")
	purego.RegisterLibFunc(&l.cudaVer, h, "nvmlSystemGetCudaDriverVersion_v2")
	purego.RegisterLibFunc(&l.count, h, "nvmlDeviceGetCount_v2")
	purego.RegisterLibFunc(&l.handle, h, "nvmlDeviceGetHandleByIndex_v2")
	purego.RegisterLibFunc(&l.name, h, "nvmlDeviceGetName")
	purego.RegisterLibFunc(&l.uuid, h, "nvmlDeviceGetUUID")
	purego.RegisterLibFunc(&l.memory, h, "nvmlDeviceGetMemoryInfo")
	purego.RegisterLibFunc(&l.computeCap, h, "nvmlDeviceGetCudaComputeCapability")
	purego.RegisterLibFunc(&l.utilization, h, "nvmlDeviceGetUtilizationRates")
	return l, nil
}

func (p *pureNVML) initialize() int          { return int(p.init()) }
func (p *pureNVML) shutdown() int            { return int(p.shut()) }
func (p *pureNVML) errorString(r int) string { return p.errString(int32(r)) }

func (p *pureNVML) driverVersion() (string, int) {
	var buf [stringBufferBytes]byte
	r := p.driverVer(&buf[0], uint32(len(buf)))
	return cString(buf[:]), int(r)
}

func (p *pureNVML) cudaDriverVersion() (int, int) {
	var v int32
	r := p.cudaVer(&v)
	return int(v), int(r)
}

func (p *pureNVML) deviceCount() (int, int) {
	var n uint32
	r := p.count(&n)
	return int(n), int(r)
}

func (p *pureNVML) dev(i int) (uintptr, int) {
	if h, ok := p.deviceHandles[i]; ok {
		return h, retSuccess
	}
	var h uintptr
	r := p.handle(uint32(i), &h)
	if r == retSuccess {
		p.deviceHandles[i] = h
	}
	return h, int(r)
}

func (p *pureNVML) deviceName(i int) (string, int) {
	h, r := p.dev(i)
	if r != retSuccess {
		return "", r
	}
	var buf [stringBufferBytes]byte
	rr := p.name(h, &buf[0], uint32(len(buf)))
	return cString(buf[:]), int(rr)
}

func (p *pureNVML) deviceUUID(i int) (string, int) {
	h, r := p.dev(i)
	if r != retSuccess {
		return "", r
	}
	var buf [stringBufferBytes]byte
	rr := p.uuid(h, &buf[0], uint32(len(buf)))
	return cString(buf[:]), int(rr)
}

func (p *pureNVML) deviceMemory(i int) (uint64, uint64, int) {
	h, r := p.dev(i)
	if r != retSuccess {
		return 0, 0, r
	}
	var m nvmlMemory
	rr := p.memory(h, &m)
	return m.Total, m.Used, int(rr)
}

func (p *pureNVML) deviceComputeCapability(i int) (int, int, int) {
	h, r := p.dev(i)
	if r != retSuccess {
		return 0, 0, r
	}
	var major, minor int32
	rr := p.computeCap(h, &major, &minor)
	return int(major), int(minor), int(rr)
}

func (p *pureNVML) deviceUtilization(i int) (uint32, int) {
	h, r := p.dev(i)
	if r != retSuccess {
		return 0, r
	}
	var u nvmlUtilization
	rr := p.utilization(h, &u)
	return u.GPU, int(rr)
}

// cString returns the bytes of b up to its first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
