package nvml

import (
	"errors"
	"strings"
	"testing"
)

// fakeLib is a scripted NVML: codes per call, two devices.
type fakeLib struct {
	loadErr             error
	initRet             int
	countRet, count     int
	nameRet, uuidRet    int
	memRet, ccRet       int
	utilRet, driverRet  int
	shutdownCalls       int
	failDevice          int // device index whose calls use the *Ret codes; -1: all
	cudaVersion         int
	utilizationPercents uint32
}

func (f *fakeLib) load() error                   { return f.loadErr }
func (f *fakeLib) initialize() int               { return f.initRet }
func (f *fakeLib) shutdown() int                 { f.shutdownCalls++; return retSuccess }
func (f *fakeLib) errorString(r int) string      { return "fake error " + string(rune('A'+r%26)) }
func (f *fakeLib) driverVersion() (string, int)  { return "580.159.03", f.driverRet }
func (f *fakeLib) cudaDriverVersion() (int, int) { return f.cudaVersion, retSuccess }
func (f *fakeLib) deviceCount() (int, int)       { return f.count, f.countRet }
func (f *fakeLib) code(i, r int) int {
	if f.failDevice < 0 || f.failDevice == i {
		return r
	}
	return retSuccess
}
func (f *fakeLib) deviceName(i int) (string, int) { return "NVIDIA H200", f.code(i, f.nameRet) }
func (f *fakeLib) deviceUUID(i int) (string, int) {
	return "GPU-0000000" + string(rune('0'+i)), f.code(i, f.uuidRet)
}
func (f *fakeLib) deviceMemory(i int) (uint64, uint64, int) {
	return 150754820096, 1 << 20, f.code(i, f.memRet)
}
func (f *fakeLib) deviceComputeCapability(i int) (int, int, int) { return 9, 0, f.code(i, f.ccRet) }
func (f *fakeLib) deviceUtilization(i int) (uint32, int) {
	return f.utilizationPercents, f.code(i, f.utilRet)
}

func healthy() *fakeLib {
	return &fakeLib{count: 2, cudaVersion: 13000, utilizationPercents: 7, failDevice: -1}
}

func TestReadFromFakeLibraries(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*fakeLib)
		wantNote  string
		wantErr   string // substring; "" = no error
		wantDevs  int
		checkDevs func(t *testing.T, inv Inventory)
	}{
		{name: "healthy two GPUs", mutate: func(*fakeLib) {}, wantDevs: 2,
			checkDevs: func(t *testing.T, inv Inventory) {
				d := inv.Devices[1]
				if d.Index != 1 || d.Name != "NVIDIA H200" || d.UUID != "GPU-00000001" || d.ComputeCapability != "9.0" ||
					d.MemoryTotalBytes != 150754820096 || d.MemoryUsedBytes != 1<<20 || d.UtilizationPercent != 7 {
					t.Errorf("device 1 = %+v", d)
				}
				if inv.Driver != "580.159.03" || inv.CUDAVersion != "13.0" {
					t.Errorf("driver %q cuda %q", inv.Driver, inv.CUDAVersion)
				}
				if !strings.HasPrefix(inv.Summary(), "2x NVIDIA H200 (143771 MiB, cc 9.0)") {
					t.Errorf("summary %q", inv.Summary())
				}
			}},
		{name: "library missing", mutate: func(f *fakeLib) { f.loadErr = errors.New("libnvidia-ml.so.1: cannot open") },
			wantNote: NoDriverNote},
		{name: "go-nvml library not found at init", mutate: func(f *fakeLib) { f.initRet = retLibraryNotFound }, wantNote: NoDriverNote},
		{name: "driver not loaded", mutate: func(f *fakeLib) { f.initRet = retDriverNotLoaded }, wantNote: NoDriverNote},
		{name: "init fails otherwise", mutate: func(f *fakeLib) { f.initRet = 4 }, wantErr: "nvmlInit_v2"},
		{name: "zero devices", mutate: func(f *fakeLib) { f.count = 0 }, wantNote: NoGPUNote},
		{name: "count fails", mutate: func(f *fakeLib) { f.countRet = 999 }, wantErr: "nvmlDeviceGetCount_v2"},
		{name: "negative count", mutate: func(f *fakeLib) { f.count = -1 }, wantErr: "negative count"},
		{name: "driver version fails", mutate: func(f *fakeLib) { f.driverRet = 999 }, wantErr: "nvmlSystemGetDriverVersion"},
		{name: "uuid of device 1 fails", mutate: func(f *fakeLib) { f.uuidRet, f.failDevice = 15, 1 },
			wantErr: "nvmlDeviceGetUUID(1)", wantDevs: 1},
		{name: "name fails", mutate: func(f *fakeLib) { f.nameRet = 999 }, wantErr: "nvmlDeviceGetName(0)"},
		{name: "memory fails", mutate: func(f *fakeLib) { f.memRet = 999 }, wantErr: "nvmlDeviceGetMemoryInfo(0)"},
		{name: "compute capability fails", mutate: func(f *fakeLib) { f.ccRet = 999 }, wantErr: "nvmlDeviceGetCudaComputeCapability(0)"},
		{name: "utilization unsupported is zero", mutate: func(f *fakeLib) { f.utilRet = retNotSupported }, wantDevs: 2,
			checkDevs: func(t *testing.T, inv Inventory) {
				if inv.Devices[0].UtilizationPercent != 0 {
					t.Errorf("unsupported utilization = %d, want 0", inv.Devices[0].UtilizationPercent)
				}
			}},
		{name: "compute capability unsupported is empty", mutate: func(f *fakeLib) { f.ccRet = retNotSupported }, wantDevs: 2,
			checkDevs: func(t *testing.T, inv Inventory) {
				if inv.Devices[0].ComputeCapability != "" {
					t.Errorf("unsupported cc = %q, want empty", inv.Devices[0].ComputeCapability)
				}
			}},
		{name: "utilization fails", mutate: func(f *fakeLib) { f.utilRet = 999 }, wantErr: "nvmlDeviceGetUtilizationRates(0)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := healthy()
			tc.mutate(f)
			inv, err := readFrom(f)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantErr != "":
				if err == nil || !errors.Is(err, ErrNVML) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want ErrNVML naming %q", err, tc.wantErr)
				}
			}
			if inv.Note != tc.wantNote {
				t.Errorf("Note %q, want %q", inv.Note, tc.wantNote)
			}
			if tc.wantNote != "" && inv.Reason == "" {
				t.Errorf("Note %q without Reason", inv.Note)
			}
			if len(inv.Devices) != tc.wantDevs {
				t.Errorf("%d devices, want %d", len(inv.Devices), tc.wantDevs)
			}
			if tc.checkDevs != nil {
				tc.checkDevs(t, inv)
			}
			if f.initRet == retSuccess && f.loadErr == nil && f.shutdownCalls != 1 {
				t.Errorf("shutdown called %d times after a successful init, want 1", f.shutdownCalls)
			}
		})
	}
}

func TestCUDAVersionString(t *testing.T) {
	for in, want := range map[int]string{13000: "13.0", 12080: "12.8", 12020: "12.2", 0: "", -5: ""} {
		if got := cudaVersionString(in); got != want {
			t.Errorf("cudaVersionString(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestSummaryWithoutGPU(t *testing.T) {
	inv := Inventory{Note: NoDriverNote, Reason: "libnvidia-ml.so.1: not found"}
	if got := inv.Summary(); got != "no NVIDIA driver (libnvidia-ml.so.1: not found)" {
		t.Errorf("Summary() = %q", got)
	}
	if inv.HasGPU() {
		t.Error("HasGPU() true without devices")
	}
}

// TestReadThisMachine reads the real inventory: on a machine without the
// NVIDIA driver it must report NoDriverNote and no error; with one, at least
// one complete device.
func TestReadThisMachine(t *testing.T) {
	inv, err := Read()
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	t.Logf("inventory: %s", inv.Summary())
	if inv.Note == NoDriverNote {
		if len(inv.Devices) != 0 || inv.Reason == "" {
			t.Fatalf("no-driver inventory %+v: want no devices and a Reason", inv)
		}
		t.Skipf("no NVIDIA driver on this machine (%s): device fields not checked", inv.Reason)
	}
	if inv.Driver == "" || inv.CUDAVersion == "" {
		t.Errorf("driver %q CUDA %q: want both set", inv.Driver, inv.CUDAVersion)
	}
	if inv.Note == NoGPUNote {
		t.Skipf("driver %s but no GPU", inv.Driver)
	}
	for _, d := range inv.Devices {
		t.Logf("device %d: %+v", d.Index, d)
		if d.Name == "" || !strings.HasPrefix(d.UUID, "GPU-") || d.MemoryTotalBytes == 0 ||
			d.MemoryUsedBytes > d.MemoryTotalBytes || !strings.Contains(d.ComputeCapability, ".") || d.UtilizationPercent > 100 {
			t.Errorf("device %d incomplete or inconsistent: %+v", d.Index, d)
		}
	}
}
