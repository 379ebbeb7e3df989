//go:build linux && cgo

package nvml

import (
	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// goNVML implements library with github.com/NVIDIA/go-nvml (cgo builds). It
// dlopens libnvidia-ml.so.1 in Init; a missing library is
// ERROR_LIBRARY_NOT_FOUND there, which load cannot see ahead, so load only
// builds the handle and initialize reports the code.
type goNVML struct {
	lib     gonvml.Interface
	devices map[int]gonvml.Device
}

func newLibrary() library { return &goNVML{} }

func (g *goNVML) load() error {
	g.lib = gonvml.New()
	g.devices = map[int]gonvml.Device{}
	return nil
}

func (g *goNVML) initialize() int { return int(g.lib.Init()) }
func (g *goNVML) shutdown() int   { return int(g.lib.Shutdown()) }

func (g *goNVML) errorString(r int) string {
	if r == retLibraryNotFound {
		// ErrorString itself needs the library.
		return "libnvidia-ml.so.1 not found"
	}
	return g.lib.ErrorString(gonvml.Return(r))
}

func (g *goNVML) driverVersion() (string, int) {
	v, r := g.lib.SystemGetDriverVersion()
	return v, int(r)
}

func (g *goNVML) cudaDriverVersion() (int, int) {
	v, r := g.lib.SystemGetCudaDriverVersion_v2()
	return v, int(r)
}

func (g *goNVML) deviceCount() (int, int) {
	n, r := g.lib.DeviceGetCount()
	return n, int(r)
}

func (g *goNVML) device(i int) (gonvml.Device, int) {
	if d, ok := g.devices[i]; ok {
		return d, retSuccess
	}
	d, r := g.lib.DeviceGetHandleByIndex(i)
	if r == gonvml.SUCCESS {
		g.devices[i] = d
	}
	return d, int(r)
}

func (g *goNVML) deviceName(i int) (string, int) {
	d, r := g.device(i)
	if r != retSuccess {
		return "", r
	}
	s, rr := d.GetName()
	return s, int(rr)
}

func (g *goNVML) deviceUUID(i int) (string, int) {
	d, r := g.device(i)
	if r != retSuccess {
		return "", r
	}
	s, rr := d.GetUUID()
	return s, int(rr)
}

func (g *goNVML) deviceMemory(i int) (uint64, uint64, int) {
	d, r := g.device(i)
	if r != retSuccess {
		return 0, 0, r
	}
	m, rr := d.GetMemoryInfo()
	return m.Total, m.Used, int(rr)
}

func (g *goNVML) deviceComputeCapability(i int) (int, int, int) {
	d, r := g.device(i)
	if r != retSuccess {
		return 0, 0, r
	}
	major, minor, rr := d.GetCudaComputeCapability()
	return major, minor, int(rr)
}

func (g *goNVML) deviceUtilization(i int) (uint32, int) {
	d, r := g.device(i)
	if r != retSuccess {
		return 0, r
	}
	u, rr := d.GetUtilizationRates()
	return u.Gpu, int(rr)
}
