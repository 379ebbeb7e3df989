package cuda

import (
	"fmt"
	"runtime"
	"sync/atomic"
)

// Context is a retained primary context of one device. All methods are safe
// for concurrent use; work submitted to one Stream runs in order.
type Context struct {
	dev    int32
	h      uintptr
	info   DeviceInfo
	closed atomic.Bool
}

// Open loads the driver (first use only: dlopen libcuda.so.1, cuInit),
// retains the primary context of device ordinal and returns it.
// Errors: ErrNoDriver, ErrNoDevice (also for a machine with zero devices),
// ErrInvalidArgument for an ordinal out of range, or the *Error of the
// failing call.
func Open(ordinal int) (*Context, error) {
	d, err := loadDriver()
	if err != nil {
		return nil, err
	}
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: cuDeviceGetCount reports 0 devices", ErrNoDevice)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("%w: device ordinal %d, have %d devices", ErrInvalidArgument, ordinal, n)
	}
	var dev int32
	if err := d.check("cuDeviceGet", d.cuDeviceGet(&dev, int32(ordinal))); err != nil {
		return nil, err
	}
	info, err := deviceInfo(d, ordinal, dev)
	if err != nil {
		return nil, err
	}
	var h uintptr
	if err := d.check("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(&h, dev)); err != nil {
		return nil, err
	}
	return &Context{dev: dev, h: h, info: info}, nil
}

// Info returns the device's description.
func (c *Context) Info() DeviceInfo { return c.info }

// Close releases the primary context (cuDevicePrimaryCtxRelease_v2); the
// driver destroys it when the last holder releases it. Objects created from
// the context must be freed first. A second Close returns ErrClosed.
func (c *Context) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	return drv.check("cuDevicePrimaryCtxRelease_v2", drv.cuDevicePrimaryCtxRelease(c.dev))
}

// Do runs f on a locked OS thread with the context current
// (cuCtxSetCurrent), so that f may call any CUDA function. Every method of
// this package that touches the device goes through Do. Errors:
// ErrClosed, the *Error of cuCtxSetCurrent, or f's error.
func (c *Context) Do(f func() error) error {
	if c.closed.Load() {
		return ErrClosed
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := drv.check("cuCtxSetCurrent", drv.cuCtxSetCurrent(c.h)); err != nil {
		return err
	}
	return f()
}

// Synchronize waits for all work in the context (cuCtxSynchronize).
func (c *Context) Synchronize() error {
	return c.Do(func() error { return drv.check("cuCtxSynchronize", drv.cuCtxSynchronize()) })
}

// MemInfo returns the free and total device memory in bytes
// (cuMemGetInfo_v2).
func (c *Context) MemInfo() (freeBytes, totalBytes uint64, err error) {
	var free, total uintptr
	err = c.Do(func() error { return drv.check("cuMemGetInfo_v2", drv.cuMemGetInfo(&free, &total)) })
	return uint64(free), uint64(total), err
}
