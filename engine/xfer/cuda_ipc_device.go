package xfer

import (
	"errors"
	"fmt"
	"sync"

	"github.com/baton-dev/baton/gpu/cuda"
)

// cudaDevice is IPCDevice over gpu/cuda: one primary context, one stream;
// every copy synchronizes that stream before it returns. Safe for
// concurrent use (the stream is serialized by mu).
type cudaDevice struct {
	ctx    *cuda.Context
	mu     sync.Mutex
	stream *cuda.Stream
}

// OpenCUDADevice opens CUDA device ordinal for the cuda_ipc backend: the
// first CUDA use of the process (cuInit, the primary context). Errors are
// gpu/cuda's, wrapped: cuda.NoGPU(err) is true on a machine without a
// driver or a GPU.
func OpenCUDADevice(ordinal int) (IPCDevice, error) {
	ctx, err := cuda.Open(ordinal)
	if err != nil {
		return nil, fmt.Errorf("xfer: cuda_ipc: open device %d: %w", ordinal, err)
	}
	s, err := ctx.NewStream()
	if err != nil {
		_ = ctx.Close()
		return nil, fmt.Errorf("xfer: cuda_ipc: %w", err)
	}
	return &cudaDevice{ctx: ctx, stream: s}, nil
}

// Ordinal is the CUDA device ordinal the device was opened with.
func (d *cudaDevice) Ordinal() int { return d.ctx.Info().Ordinal }

func buf(b DeviceBuffer) (*cuda.Buffer, error) {
	c, ok := b.(*cuda.Buffer)
	if !ok || c == nil {
		return nil, fmt.Errorf("xfer: cuda_ipc: not a buffer of this device: %w", ErrInvalidParam)
	}
	return c, nil
}

// Alloc allocates bytes of device memory (cuMemAlloc); gpu/cuda's errors.
func (d *cudaDevice) Alloc(bytes int) (DeviceBuffer, error) {
	b, err := d.ctx.Alloc(bytes)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Upload copies src into dst at offset (bytes) and synchronizes the stream.
// ErrInvalidParam for a dst not of this device; gpu/cuda's errors.
func (d *cudaDevice) Upload(dst DeviceBuffer, offset int, src []byte) error {
	b, err := buf(dst)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := cuda.Upload(d.stream, b, offset, src); err != nil {
		return err
	}
	return d.stream.Synchronize()
}

// Download copies len(dst) bytes of src at offset (bytes) into dst.
// ErrInvalidParam for a src not of this device; gpu/cuda's errors.
func (d *cudaDevice) Download(dst []byte, src DeviceBuffer, offset int) error {
	b, err := buf(src)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return cuda.Download(d.stream, dst, b, offset)
}

// Copy copies n bytes device-to-device, src at srcOffset to dst at dstOffset,
// and synchronizes the stream. ErrInvalidParam for a buffer not of this device;
// gpu/cuda's errors (after which dst holds none, some or all of the bytes).
func (d *cudaDevice) Copy(dst DeviceBuffer, dstOffset int, src DeviceBuffer, srcOffset, n int) error {
	db, err := buf(dst)
	if err != nil {
		return err
	}
	sb, err := buf(src)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.stream.CopyDtoD(db, dstOffset, sb, srcOffset, n); err != nil {
		return err
	}
	return d.stream.Synchronize()
}

// Export returns the CUDA IPC handle (IPCHandleBytes bytes) of an allocation
// from Alloc. ErrInvalidParam for a buffer not of this device; gpu/cuda's
// errors.
func (d *cudaDevice) Export(b DeviceBuffer) ([IPCHandleBytes]byte, error) {
	c, err := buf(b)
	if err != nil {
		return [IPCHandleBytes]byte{}, err
	}
	h, err := d.ctx.ExportIPC(c)
	return h.Reserved, err
}

// Open maps the allocation of bytes bytes that another process exported as h
// (cuIpcOpenMemHandle); gpu/cuda's errors.
func (d *cudaDevice) Open(h [IPCHandleBytes]byte, bytes int) (DeviceBuffer, error) {
	b, err := d.ctx.OpenIPC(cuda.IPCHandle{Reserved: h}, bytes)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Free frees an allocation, or closes a mapping from Open. ErrInvalidParam for
// a buffer not of this device; gpu/cuda's errors.
func (d *cudaDevice) Free(b DeviceBuffer) error {
	c, err := buf(b)
	if err != nil {
		return err
	}
	return c.Free()
}

// Synchronize waits for the device's stream and context (cuCtxSynchronize):
// after nil, nothing this process started writes any buffer (CONTRACT Q-6). An
// error (a sticky fault) means keep the buffers.
func (d *cudaDevice) Synchronize() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.stream.Synchronize(), d.ctx.Synchronize())
}

// Close synchronizes and destroys the stream and releases the primary context,
// joining their errors; buffers must be freed first.
func (d *cudaDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.stream.Synchronize(), d.stream.Destroy(), d.ctx.Close())
}
