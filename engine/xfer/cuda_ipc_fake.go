package xfer

import (
	"crypto/rand"
	"fmt"
	"sync"
)

// FakeIPC is an in-process stand-in for the CUDA driver's IPC tables, so
// the cuda_ipc backend's engine logic (claims, loans, quarantine, S-3
// shutdown) runs in tests without a GPU. Devices from one FakeIPC play the
// processes of one machine: a handle exported by one can be opened by
// another. Buffers are Go byte slices; a mapping shares its allocation's
// bytes. Faults are set by the test before the call they should break.
type FakeIPC struct {
	mu      sync.Mutex
	exports map[[IPCHandleBytes]byte]*fakeBuffer
	// FailCopy makes the next Copy fail after copying half the bytes (an
	// uncertain outcome, Q-1); FailOpen the next Open; FailFree every Free
	// and Close (a cleanup failure, X-1, or a failed S-3 collection);
	// FailSync every Synchronize (a device that cannot prove it is idle).
	FailCopy, FailOpen, FailFree, FailSync bool
	// Opened counts open mappings over all devices; Live the allocations
	// not yet freed; Closes the Close calls (S-3 collections).
	Opened, Live, Closes int
}

// NewFakeIPC returns an empty fake machine.
func NewFakeIPC() *FakeIPC {
	return &FakeIPC{exports: map[[IPCHandleBytes]byte]*fakeBuffer{}}
}

// Counts returns Opened, Live and Closes under the fake's lock.
func (f *FakeIPC) Counts() (opened, live, closes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Opened, f.Live, f.Closes
}

// SetFaults sets FailCopy, FailOpen and FailFree under the fake's lock.
func (f *FakeIPC) SetFaults(copyFails, openFails, freeFails bool) {
	f.mu.Lock()
	f.FailCopy, f.FailOpen, f.FailFree = copyFails, openFails, freeFails
	f.mu.Unlock()
}

// Device returns a fake IPCDevice with the given ordinal on this machine.
func (f *FakeIPC) Device(ordinal int) IPCDevice { return &fakeDevice{f: f, ordinal: ordinal} }

type fakeBuffer struct {
	dev      *fakeDevice
	data     []byte
	imported bool
	freed    bool
}

// Bytes is the buffer's length in bytes.
func (b *fakeBuffer) Bytes() int { return len(b.data) }

type fakeDevice struct {
	f       *FakeIPC
	ordinal int
}

// Ordinal is the ordinal given to FakeIPC.Device.
func (d *fakeDevice) Ordinal() int { return d.ordinal }

func (d *fakeDevice) buf(b DeviceBuffer) (*fakeBuffer, error) {
	fb, ok := b.(*fakeBuffer)
	if !ok || fb == nil || fb.freed {
		return nil, fmt.Errorf("xfer: fake cuda_ipc: not a live buffer: %w", ErrInvalidParam)
	}
	return fb, nil
}

// Alloc allocates a zeroed fake buffer of bytes bytes and counts it Live.
// ErrInvalidParam for bytes < 1.
func (d *fakeDevice) Alloc(bytes int) (DeviceBuffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("xfer: fake cuda_ipc: Alloc(%d): %w", bytes, ErrInvalidParam)
	}
	d.f.mu.Lock()
	d.f.Live++
	d.f.mu.Unlock()
	return &fakeBuffer{dev: d, data: make([]byte, bytes)}, nil
}

func span(b *fakeBuffer, off, n int) error {
	if off < 0 || n < 0 || off > len(b.data) || n > len(b.data)-off {
		return fmt.Errorf("xfer: fake cuda_ipc: range [%d, +%d) of %d bytes: %w", off, n, len(b.data), ErrInvalidParam)
	}
	return nil
}

// Upload copies src into dst at offset (bytes). ErrInvalidParam for a buffer
// not live or a range outside it.
func (d *fakeDevice) Upload(dst DeviceBuffer, offset int, src []byte) error {
	b, err := d.buf(dst)
	if err != nil {
		return err
	}
	if err := span(b, offset, len(src)); err != nil {
		return err
	}
	d.f.mu.Lock()
	copy(b.data[offset:], src)
	d.f.mu.Unlock()
	return nil
}

// Download copies len(dst) bytes of src at offset into dst. ErrInvalidParam for
// a buffer not live or a range outside it.
func (d *fakeDevice) Download(dst []byte, src DeviceBuffer, offset int) error {
	b, err := d.buf(src)
	if err != nil {
		return err
	}
	if err := span(b, offset, len(dst)); err != nil {
		return err
	}
	d.f.mu.Lock()
	copy(dst, b.data[offset:])
	d.f.mu.Unlock()
	return nil
}

// Copy copies n bytes from src at srcOffset to dst at dstOffset.
// ErrInvalidParam for a buffer not live or a range outside it; under FailCopy
// (reset by the call) it copies the first n/2 bytes and fails with ErrBackend,
// an uncertain outcome (CONTRACT Q-1).
func (d *fakeDevice) Copy(dst DeviceBuffer, dstOffset int, src DeviceBuffer, srcOffset, n int) error {
	db, err := d.buf(dst)
	if err != nil {
		return err
	}
	sb, err := d.buf(src)
	if err != nil {
		return err
	}
	if err := span(db, dstOffset, n); err != nil {
		return err
	}
	if err := span(sb, srcOffset, n); err != nil {
		return err
	}
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	if d.f.FailCopy {
		d.f.FailCopy = false
		copy(db.data[dstOffset:dstOffset+n/2], sb.data[srcOffset:])
		return fmt.Errorf("xfer: fake cuda_ipc: injected copy failure after %d of %d bytes: %w", n/2, n, ErrBackend)
	}
	copy(db.data[dstOffset:dstOffset+n], sb.data[srcOffset:])
	return nil
}

// Export returns a random handle that devices of the same FakeIPC can Open.
// ErrInvalidParam for a buffer not live or one from Open.
func (d *fakeDevice) Export(b DeviceBuffer) ([IPCHandleBytes]byte, error) {
	var h [IPCHandleBytes]byte
	fb, err := d.buf(b)
	if err != nil {
		return h, err
	}
	if fb.imported {
		return h, fmt.Errorf("xfer: fake cuda_ipc: export of an imported buffer: %w", ErrInvalidParam)
	}
	_, _ = rand.Read(h[:])
	d.f.mu.Lock()
	d.f.exports[h] = fb
	d.f.mu.Unlock()
	return h, nil
}

// Open maps the allocation exported as h, sharing its bytes, and counts it
// Opened. Errors: ErrBackend once under FailOpen, ErrNotFound for an unknown or
// freed handle, ErrInvalidParam for a handle of this same device or a bytes
// other than the allocation's.
func (d *fakeDevice) Open(h [IPCHandleBytes]byte, bytes int) (DeviceBuffer, error) {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	if d.f.FailOpen {
		d.f.FailOpen = false
		return nil, fmt.Errorf("xfer: fake cuda_ipc: injected open failure: %w", ErrBackend)
	}
	src, ok := d.f.exports[h]
	if !ok || src.freed {
		return nil, fmt.Errorf("xfer: fake cuda_ipc: unknown or freed IPC handle: %w", ErrNotFound)
	}
	if src.dev == d {
		return nil, fmt.Errorf("xfer: fake cuda_ipc: a handle of this same process (CUDA forbids it): %w", ErrInvalidParam)
	}
	if bytes != len(src.data) {
		return nil, fmt.Errorf("xfer: fake cuda_ipc: open %d bytes of a %d-byte allocation: %w", bytes, len(src.data), ErrInvalidParam)
	}
	d.f.Opened++
	return &fakeBuffer{dev: d, data: src.data, imported: true}, nil
}

// Free frees an allocation (its exports go) or closes a mapping from Open.
// ErrInvalidParam for a buffer not live; ErrBackend under FailFree, the buffer
// kept (a cleanup failure, CONTRACT X-1).
func (d *fakeDevice) Free(b DeviceBuffer) error {
	fb, err := d.buf(b)
	if err != nil {
		return err
	}
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	if d.f.FailFree {
		return fmt.Errorf("xfer: fake cuda_ipc: injected free failure: %w", ErrBackend)
	}
	fb.freed = true
	if fb.imported {
		d.f.Opened--
		return nil
	}
	d.f.Live--
	for h, x := range d.f.exports {
		if x == fb {
			delete(d.f.exports, h)
		}
	}
	return nil
}

// SetFailSync sets FailSync under the fake's lock.
func (f *FakeIPC) SetFailSync(fail bool) {
	f.mu.Lock()
	f.FailSync = fail
	f.mu.Unlock()
}

// Synchronize: fake copies are synchronous, so the device is idle unless
// FailSync is set.
func (d *fakeDevice) Synchronize() error {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	if d.f.FailSync {
		return fmt.Errorf("xfer: fake cuda_ipc: injected synchronize failure: %w", ErrBackend)
	}
	return nil
}

// Close counts a Close (an S-3 collection); ErrBackend under FailFree.
func (d *fakeDevice) Close() error {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	d.f.Closes++
	if d.f.FailFree {
		return fmt.Errorf("xfer: fake cuda_ipc: injected close failure: %w", ErrBackend)
	}
	return nil
}
