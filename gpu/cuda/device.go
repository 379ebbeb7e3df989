package cuda

import "fmt"

// CUdevice_attribute values used here (cuda.h).
const (
	attrMultiprocessorCount    = 16
	attrL2CacheSize            = 38
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
)

// DeviceInfo describes one CUDA device.
type DeviceInfo struct {
	// Ordinal is the CUDA device ordinal (0-based, CUDA_VISIBLE_DEVICES
	// order).
	Ordinal int
	// Name is the device name, e.g. "NVIDIA H200".
	Name string
	// Major and Minor are the compute capability, e.g. 9 and 0.
	Major, Minor int
	// Multiprocessors is the number of SMs (132 on an H200 SXM).
	Multiprocessors int
	// L2Bytes is the L2 cache size in bytes.
	L2Bytes int
	// MemoryBytes is the total device memory in bytes.
	MemoryBytes uint64
}

// ComputeCapability is "major.minor", e.g. "9.0".
func (d DeviceInfo) ComputeCapability() string { return fmt.Sprintf("%d.%d", d.Major, d.Minor) }

// VirtualArch is the NVRTC/PTX target for the device, "compute_XY" (e.g.
// "compute_90"), passed as --gpu-architecture.
func (d DeviceInfo) VirtualArch() string { return fmt.Sprintf("compute_%d%d", d.Major, d.Minor) }

// DeviceCount loads and initializes the driver if needed and returns the
// number of CUDA devices. Errors: ErrNoDriver, ErrNoDevice, *Error.
func DeviceCount() (int, error) {
	d, err := loadDriver()
	if err != nil {
		return 0, err
	}
	var n int32
	if err := d.check("cuDeviceGetCount", d.cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// deviceInfo reads the attributes of device handle dev (ordinal ordinal).
func deviceInfo(d *driverAPI, ordinal int, dev int32) (DeviceInfo, error) {
	info := DeviceInfo{Ordinal: ordinal}
	var buf [256]byte
	if err := d.check("cuDeviceGetName", d.cuDeviceGetName(&buf[0], int32(len(buf)), dev)); err != nil {
		return info, err
	}
	info.Name = goString(&buf[0])
	attrs := []struct {
		attr int32
		dst  *int
		name string
	}{
		{attrComputeCapabilityMajor, &info.Major, "COMPUTE_CAPABILITY_MAJOR"},
		{attrComputeCapabilityMinor, &info.Minor, "COMPUTE_CAPABILITY_MINOR"},
		{attrMultiprocessorCount, &info.Multiprocessors, "MULTIPROCESSOR_COUNT"},
		{attrL2CacheSize, &info.L2Bytes, "L2_CACHE_SIZE"},
	}
	for _, a := range attrs {
		var v int32
		if err := d.check("cuDeviceGetAttribute", d.cuDeviceGetAttribute(&v, a.attr, dev)); err != nil {
			return info, withDetail(err, a.name)
		}
		*a.dst = int(v)
	}
	var total uintptr
	if err := d.check("cuDeviceTotalMem_v2", d.cuDeviceTotalMem(&total, dev)); err != nil {
		return info, err
	}
	info.MemoryBytes = uint64(total)
	return info, nil
}
