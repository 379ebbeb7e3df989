package cuda

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// DevicePtr is a device address (CUdeviceptr).
type DevicePtr uint64

// Buffer is device memory: allocated by Context.Alloc (freed with
// cuMemFree_v2) or imported by Context.OpenIPC (closed with
// cuIpcCloseMemHandle).
type Buffer struct {
	ctx      *Context
	ptr      DevicePtr
	bytes    int
	imported bool
	freed    atomic.Bool
}

// Alloc allocates bytes (> 0) of device memory (cuMemAlloc_v2; 256-byte
// aligned, contents undefined). Errors: ErrInvalidArgument for bytes <= 0,
// ErrOutOfMemory, ErrClosed, *Error.
func (c *Context) Alloc(bytes int) (*Buffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("%w: Alloc(%d): size must be positive", ErrInvalidArgument, bytes)
	}
	var p uint64
	if err := c.Do(func() error { return drv.check("cuMemAlloc_v2", drv.cuMemAlloc(&p, uintptr(bytes))) }); err != nil {
		return nil, err
	}
	return &Buffer{ctx: c, ptr: DevicePtr(p), bytes: bytes}, nil
}

// Ptr is the buffer's device address.
func (b *Buffer) Ptr() DevicePtr { return b.ptr }

// Bytes is the buffer's size in bytes.
func (b *Buffer) Bytes() int { return b.bytes }

// Imported reports whether the buffer was opened from an IPC handle.
func (b *Buffer) Imported() bool { return b.imported }

// Free releases the buffer: cuMemFree_v2 for an allocation,
// cuIpcCloseMemHandle for an imported one. Pending work using it must be
// finished (synchronize first). A second Free returns ErrClosed.
func (b *Buffer) Free() error {
	if b == nil || !b.freed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	return b.ctx.Do(func() error {
		if b.imported {
			return drv.check("cuIpcCloseMemHandle", drv.cuIpcCloseMemHandle(uint64(b.ptr)))
		}
		return drv.check("cuMemFree_v2", drv.cuMemFree(uint64(b.ptr)))
	})
}

// span checks that [off, off+n) lies inside the live buffer and returns its
// address.
func (b *Buffer) span(what string, off, n int) (uint64, error) {
	if b == nil {
		return 0, fmt.Errorf("%w: %s: nil buffer", ErrInvalidArgument, what)
	}
	if b.freed.Load() {
		return 0, fmt.Errorf("%w: %s: buffer was freed", ErrClosed, what)
	}
	if off < 0 || n < 0 || off > b.bytes || n > b.bytes-off {
		return 0, fmt.Errorf("%w: %s: bytes [%d, %d+%d) outside a %d-byte buffer", ErrInvalidArgument, what, off, off, n, b.bytes)
	}
	return uint64(b.ptr) + uint64(off), nil
}

// Stream is a CUDA stream (created non-blocking: it does not synchronize
// with the legacy default stream). Work on one stream runs in order.
type Stream struct {
	ctx       *Context
	h         uintptr
	destroyed atomic.Bool
}

// streamNonBlocking is CU_STREAM_NON_BLOCKING.
const streamNonBlocking = 1

// NewStream creates a stream (cuStreamCreate, CU_STREAM_NON_BLOCKING).
func (c *Context) NewStream() (*Stream, error) {
	var h uintptr
	if err := c.Do(func() error { return drv.check("cuStreamCreate", drv.cuStreamCreate(&h, streamNonBlocking)) }); err != nil {
		return nil, err
	}
	return &Stream{ctx: c, h: h}, nil
}

// Context returns the stream's context.
func (s *Stream) Context() *Context { return s.ctx }

// Handle is the raw CUstream, for libraries bound elsewhere (cuBLAS).
func (s *Stream) Handle() uintptr { return s.h }

// Synchronize waits until all work queued on the stream has finished
// (cuStreamSynchronize); an asynchronous kernel failure surfaces here.
func (s *Stream) Synchronize() error {
	if s.destroyed.Load() {
		return ErrClosed
	}
	return s.ctx.Do(func() error { return drv.check("cuStreamSynchronize", drv.cuStreamSynchronize(s.h)) })
}

// Destroy destroys the stream (cuStreamDestroy_v2) after its queued work
// completes. A second Destroy returns ErrClosed.
func (s *Stream) Destroy() error {
	if !s.destroyed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	return s.ctx.Do(func() error { return drv.check("cuStreamDestroy_v2", drv.cuStreamDestroy(s.h)) })
}

// Element is a plain numeric type that Upload and Download copy bit for bit.
type Element interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64 | ~int8 | ~int16 | ~int32 | ~int64 | ~float32 | ~float64
}

// Upload copies src (ordinary Go memory) to dst at dstOffset bytes, ordered
// on s (cuMemcpyHtoDAsync_v2). It returns once src has been staged by the
// driver, so src may be reused; the device copy completes in stream order.
// An empty src is a no-op. Errors: ErrInvalidArgument (past dst's end),
// ErrClosed, *Error.
func Upload[T Element](s *Stream, dst *Buffer, dstOffset int, src []T) error {
	n := len(src) * int(unsafe.Sizeof(*new(T)))
	p, err := dst.span("Upload", dstOffset, n)
	if err != nil || n == 0 {
		return err
	}
	err = s.ctx.Do(func() error {
		return drv.check("cuMemcpyHtoDAsync_v2", drv.cuMemcpyHtoDAsync(p, unsafe.Pointer(&src[0]), uintptr(n), s.h))
	})
	runtime.KeepAlive(src)
	return err
}

// Download copies len(dst) elements from src at srcOffset bytes into dst
// (ordinary Go memory), after all earlier work on s, and returns when the
// copy is complete (cuMemcpyDtoHAsync_v2, then cuStreamSynchronize).
// Errors: ErrInvalidArgument (past src's end), ErrClosed, *Error (including
// a failure of earlier asynchronous work on s).
func Download[T Element](s *Stream, dst []T, src *Buffer, srcOffset int) error {
	n := len(dst) * int(unsafe.Sizeof(*new(T)))
	p, err := src.span("Download", srcOffset, n)
	if err != nil {
		return err
	}
	err = s.ctx.Do(func() error {
		if n > 0 {
			if err := drv.check("cuMemcpyDtoHAsync_v2", drv.cuMemcpyDtoHAsync(unsafe.Pointer(&dst[0]), p, uintptr(n), s.h)); err != nil {
				return err
			}
		}
		return drv.check("cuStreamSynchronize", drv.cuStreamSynchronize(s.h))
	})
	runtime.KeepAlive(dst)
	return err
}

// CopyDtoD copies bytes from src at srcOffset to dst at dstOffset, ordered
// on s (cuMemcpyDtoDAsync_v2). The ranges must not overlap. Errors:
// ErrInvalidArgument, ErrClosed, *Error.
func (s *Stream) CopyDtoD(dst *Buffer, dstOffset int, src *Buffer, srcOffset, bytes int) error {
	d, err := dst.span("CopyDtoD dst", dstOffset, bytes)
	if err != nil {
		return err
	}
	sp, err := src.span("CopyDtoD src", srcOffset, bytes)
	if err != nil || bytes == 0 {
		return err
	}
	return s.ctx.Do(func() error {
		return drv.check("cuMemcpyDtoDAsync_v2", drv.cuMemcpyDtoDAsync(d, sp, uintptr(bytes), s.h))
	})
}

// Memset32 sets count 32-bit words of dst, starting at offset bytes (a
// multiple of 4), to value, ordered on s (cuMemsetD32Async). Tests use it to
// poison outputs (0x7FC00000 is a float32 NaN). Errors: ErrInvalidArgument,
// ErrClosed, *Error.
func (s *Stream) Memset32(dst *Buffer, offset int, value uint32, count int) error {
	if offset%4 != 0 {
		return fmt.Errorf("%w: Memset32 offset %d is not a multiple of 4", ErrInvalidArgument, offset)
	}
	p, err := dst.span("Memset32", offset, 4*count)
	if err != nil || count == 0 {
		return err
	}
	return s.ctx.Do(func() error {
		return drv.check("cuMemsetD32Async", drv.cuMemsetD32Async(p, value, uintptr(count), s.h))
	})
}

// Event is a CUDA event with timing enabled.
type Event struct {
	ctx       *Context
	h         uintptr
	destroyed atomic.Bool
}

// NewEvent creates an event (cuEventCreate, CU_EVENT_DEFAULT: timing on).
func (c *Context) NewEvent() (*Event, error) {
	var h uintptr
	if err := c.Do(func() error { return drv.check("cuEventCreate", drv.cuEventCreate(&h, 0)) }); err != nil {
		return nil, err
	}
	return &Event{ctx: c, h: h}, nil
}

// Record enqueues the event on s (cuEventRecord).
func (e *Event) Record(s *Stream) error {
	if e.destroyed.Load() || s.destroyed.Load() {
		return ErrClosed
	}
	return e.ctx.Do(func() error { return drv.check("cuEventRecord", drv.cuEventRecord(e.h, s.h)) })
}

// Synchronize waits until the event has completed (cuEventSynchronize).
func (e *Event) Synchronize() error {
	if e.destroyed.Load() {
		return ErrClosed
	}
	return e.ctx.Do(func() error { return drv.check("cuEventSynchronize", drv.cuEventSynchronize(e.h)) })
}

// ElapsedMs returns the time between two completed events in milliseconds
// (cuEventElapsedTime; resolution about 0.5 microseconds).
func ElapsedMs(start, end *Event) (float64, error) {
	if start.destroyed.Load() || end.destroyed.Load() {
		return 0, ErrClosed
	}
	var ms float32
	err := start.ctx.Do(func() error {
		return drv.check("cuEventElapsedTime", drv.cuEventElapsedTime(&ms, start.h, end.h))
	})
	return float64(ms), err
}

// Destroy destroys the event (cuEventDestroy_v2). A second Destroy returns
// ErrClosed.
func (e *Event) Destroy() error {
	if !e.destroyed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	return e.ctx.Do(func() error { return drv.check("cuEventDestroy_v2", drv.cuEventDestroy(e.h)) })
}
