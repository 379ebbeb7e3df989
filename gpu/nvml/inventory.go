package nvml

import (
	"errors"
	"fmt"
)

// NoDriverNote is Inventory.Note when the NVIDIA Management Library cannot be
// loaded or finds no loaded kernel driver; Inventory.Reason then says which.
const NoDriverNote = "no NVIDIA driver"

// NoGPUNote is Inventory.Note when the driver is loaded but reports zero
// devices.
const NoGPUNote = "no NVIDIA GPU"

// ErrNVML wraps every failure of an NVML call other than "library or driver
// absent" (which is a Note, not an error). The wrapped message names the call
// and NVML's error string and code, e.g.
// "nvml: nvmlDeviceGetUUID(0): Unknown Error (999)".
var ErrNVML = errors.New("nvml: call failed")

// Inventory is what NVML reports about this machine. The zero value with
// Note == NoDriverNote means "no NVIDIA driver here".
type Inventory struct {
	// Driver is the kernel driver version, e.g. "580.159.03"; "" without a
	// driver.
	Driver string `json:"driver" yaml:"driver"`
	// CUDAVersion is the newest CUDA version the driver supports, "major.minor"
	// (e.g. "13.0", from nvmlSystemGetCudaDriverVersion_v2's 13000); "" without
	// a driver.
	CUDAVersion string `json:"cuda_version" yaml:"cuda_version"`
	// Devices lists the GPUs in NVML index order (not necessarily the CUDA
	// ordinal order unless CUDA_DEVICE_ORDER=PCI_BUS_ID).
	Devices []Device `json:"devices" yaml:"devices"`
	// Note is NoDriverNote, NoGPUNote, or "" when at least one GPU was found.
	Note string `json:"note,omitempty" yaml:"note,omitempty"`
	// Reason details Note, e.g. "libnvidia-ml.so.1: cannot open shared object
	// file" or "Driver Not Loaded (9)"; "" when Note is "".
	Reason string `json:"reason,omitempty" yaml:"reason,omitempty"`
}

// Device is one GPU as NVML reports it.
type Device struct {
	// Index is the NVML device index, 0-based.
	Index int `json:"index" yaml:"index"`
	// Name is the marketing name, e.g. "NVIDIA H200".
	Name string `json:"name" yaml:"name"`
	// UUID is the device UUID, e.g. "GPU-5d8e...".
	UUID string `json:"uuid" yaml:"uuid"`
	// MemoryTotalBytes and MemoryUsedBytes are the device memory in bytes
	// (nvmlDeviceGetMemoryInfo).
	MemoryTotalBytes uint64 `json:"memory_total_bytes" yaml:"memory_total_bytes"`
	MemoryUsedBytes  uint64 `json:"memory_used_bytes" yaml:"memory_used_bytes"` // bytes in use
	// ComputeCapability is "major.minor", e.g. "9.0" for Hopper.
	ComputeCapability string `json:"compute_capability" yaml:"compute_capability"`
	// UtilizationPercent is the percent of time over the driver's last sample
	// period (1/6 s to 1 s) during which a kernel ran; 0 where the device does
	// not support the query.
	UtilizationPercent uint32 `json:"utilization_percent" yaml:"utilization_percent"`
}

// HasGPU reports whether at least one device was found.
func (inv Inventory) HasGPU() bool { return len(inv.Devices) > 0 }

// Summary is a one-line description for report headers and logs, e.g.
// "1x NVIDIA H200 (143771 MiB, cc 9.0), driver 580.159.03, CUDA 13.0", or
// "no NVIDIA driver (libnvidia-ml.so.1: ...)".
func (inv Inventory) Summary() string {
	if !inv.HasGPU() {
		if inv.Reason != "" {
			return fmt.Sprintf("%s (%s)", inv.Note, inv.Reason)
		}
		return inv.Note
	}
	d := inv.Devices[0]
	return fmt.Sprintf("%dx %s (%d MiB, cc %s), driver %s, CUDA %s",
		len(inv.Devices), d.Name, d.MemoryTotalBytes>>20, d.ComputeCapability, inv.Driver, inv.CUDAVersion)
}

// Read queries NVML once: it loads the library, initializes it, reads the
// inventory and shuts NVML down again. Without the library or without a
// loaded driver it returns Inventory{Note: NoDriverNote, Reason: ...} and a
// nil error. Any other NVML failure returns the part read so far and an
// error wrapping ErrNVML. Queries a device does not support
// (NVML_ERROR_NOT_SUPPORTED) leave that field zero. Safe for concurrent use
// (NVML reference-counts Init/Shutdown).
func Read() (Inventory, error) {
	return readFrom(newLibrary())
}

// NVML return codes used here (nvml.h, nvmlReturn_t).
const (
	retSuccess         = 0
	retNotSupported    = 3
	retDriverNotLoaded = 9
	retLibraryNotFound = 12
	retGPUNotFound     = 28
)

// library is the part of NVML Read needs; implemented by go-nvml (cgo
// builds), by purego (CGO_ENABLED=0) and by fakes in tests. Methods return
// an NVML return code (nvmlReturn_t); load returns a non-nil error when the
// shared library cannot be opened.
type library interface {
	load() error
	initialize() int
	shutdown() int
	errorString(ret int) string
	driverVersion() (string, int)
	cudaDriverVersion() (int, int)
	deviceCount() (int, int)
	deviceName(i int) (string, int)
	deviceUUID(i int) (string, int)
	deviceMemory(i int) (total, used uint64, ret int)
	deviceComputeCapability(i int) (major, minor int, ret int)
	deviceUtilization(i int) (gpuPercent uint32, ret int)
}

// readFrom is Read over an arbitrary library (tests pass fakes).
func readFrom(lib library) (Inventory, error) {
	if err := lib.load(); err != nil {
		return Inventory{Note: NoDriverNote, Reason: err.Error()}, nil
	}
	if r := lib.initialize(); r != retSuccess {
		switch r {
		case retLibraryNotFound, retDriverNotLoaded, retGPUNotFound:
			return Inventory{Note: NoDriverNote, Reason: fmt.Sprintf("nvmlInit_v2: %s (%d)", lib.errorString(r), r)}, nil
		}
		return Inventory{}, callError(lib, "nvmlInit_v2", -1, r)
	}
	defer lib.shutdown()

	var inv Inventory
	v, r := lib.driverVersion()
	if r != retSuccess {
		return inv, callError(lib, "nvmlSystemGetDriverVersion", -1, r)
	}
	inv.Driver = v
	cv, r := lib.cudaDriverVersion()
	if r != retSuccess {
		return inv, callError(lib, "nvmlSystemGetCudaDriverVersion_v2", -1, r)
	}
	inv.CUDAVersion = cudaVersionString(cv)
	n, r := lib.deviceCount()
	if r != retSuccess {
		return inv, callError(lib, "nvmlDeviceGetCount_v2", -1, r)
	}
	if n < 0 {
		return inv, fmt.Errorf("%w: nvmlDeviceGetCount_v2: negative count %d", ErrNVML, n)
	}
	for i := range n {
		d, err := readDevice(lib, i)
		if err != nil {
			return inv, err
		}
		inv.Devices = append(inv.Devices, d)
	}
	if n == 0 {
		inv.Note = NoGPUNote
		inv.Reason = "nvmlDeviceGetCount_v2 reports 0 devices"
	}
	return inv, nil
}

// readDevice reads device i; NOT_SUPPORTED leaves a field zero.
func readDevice(lib library, i int) (Device, error) {
	d := Device{Index: i}
	var r int
	if d.Name, r = lib.deviceName(i); !okOrUnsupported(r) {
		return d, callError(lib, "nvmlDeviceGetName", i, r)
	}
	if d.UUID, r = lib.deviceUUID(i); !okOrUnsupported(r) {
		return d, callError(lib, "nvmlDeviceGetUUID", i, r)
	}
	if d.MemoryTotalBytes, d.MemoryUsedBytes, r = lib.deviceMemory(i); !okOrUnsupported(r) {
		return d, callError(lib, "nvmlDeviceGetMemoryInfo", i, r)
	}
	major, minor, r := lib.deviceComputeCapability(i)
	switch {
	case r == retSuccess:
		d.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	case r != retNotSupported:
		return d, callError(lib, "nvmlDeviceGetCudaComputeCapability", i, r)
	}
	util, r := lib.deviceUtilization(i)
	switch {
	case r == retSuccess:
		d.UtilizationPercent = util
	case r != retNotSupported:
		return d, callError(lib, "nvmlDeviceGetUtilizationRates", i, r)
	}
	return d, nil
}

func okOrUnsupported(r int) bool { return r == retSuccess || r == retNotSupported }

// callError names the call, the device index (-1: none) and the code.
func callError(lib library, call string, device, r int) error {
	if device >= 0 {
		call = fmt.Sprintf("%s(%d)", call, device)
	}
	return fmt.Errorf("%w: %s: %s (%d)", ErrNVML, call, lib.errorString(r), r)
}

// cudaVersionString turns NVML's integer CUDA version (1000*major +
// 10*minor, e.g. 13000) into "13.0"; "" for 0 or less.
func cudaVersionString(v int) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
}
