package xfer

import (
	"bytes"
	"testing"

	"github.com/baton-dev/baton/gpu/cuda"
)

// TestCUDADeviceRoundTrip runs the cuda_ipc device calls on a real GPU
// (skipped without one): upload, device-to-device copy at an offset,
// download, export; a handle of this same process is refused or opened, as
// the driver decides, and never corrupts the source.
func TestCUDADeviceRoundTrip(t *testing.T) {
	d, err := OpenCUDADevice(0)
	if cuda.NoGPU(err) {
		t.Skipf("no GPU here, skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	src, err := d.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := d.Alloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("baton-cuda-ipc!!"), 256)
	if err := d.Upload(src, 0, want); err != nil {
		t.Fatal(err)
	}
	if err := d.Copy(dst, 4096, src, 0, 4096); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	if err := d.Download(got, dst, 4096); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("device round trip changed the bytes")
	}
	h, err := d.Export(src)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	if h == ([IPCHandleBytes]byte{}) {
		t.Error("Export returned an all-zero handle")
	}
	if m, err := d.Open(h, 4096); err == nil {
		t.Log("note: this driver opened a handle in the exporting process")
		_ = d.Free(m)
	}
	if err := d.Copy(dst, 4097, src, 0, 4096); err == nil {
		t.Error("a copy past the end of dst succeeded")
	}
	for _, b := range []DeviceBuffer{src, dst} {
		if err := d.Free(b); err != nil {
			t.Errorf("Free: %v", err)
		}
	}
}
