package cuda

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Module is loaded device code (cuModuleLoadData).
type Module struct {
	ctx      *Context
	h        uintptr
	unloaded atomic.Bool
	// CompileLog is NVRTC's log for modules built by CompileModule ("" when
	// the compiler had nothing to say).
	CompileLog string
}

// LoadPTX loads NUL-terminated PTX (or a cubin) into the context
// (cuModuleLoadData; the driver compiles PTX for the device). Errors:
// ErrInvalidArgument for empty input, ErrClosed, *Error (e.g.
// CUDA_ERROR_INVALID_PTX, CUDA_ERROR_UNSUPPORTED_PTX_VERSION).
func (c *Context) LoadPTX(ptx []byte) (*Module, error) {
	if len(ptx) == 0 {
		return nil, fmt.Errorf("%w: LoadPTX: empty image", ErrInvalidArgument)
	}
	if ptx[len(ptx)-1] != 0 {
		ptx = append(ptx[:len(ptx):len(ptx)], 0)
	}
	var h uintptr
	err := c.Do(func() error {
		return drv.check("cuModuleLoadData", drv.cuModuleLoadData(&h, unsafe.Pointer(&ptx[0])))
	})
	runtime.KeepAlive(ptx)
	if err != nil {
		return nil, err
	}
	return &Module{ctx: c, h: h}, nil
}

// CompileModule compiles src with NVRTC for this device
// (Compile(src, name, Info().VirtualArch(), options...)) and loads the PTX.
// Errors: those of Compile and LoadPTX.
func (c *Context) CompileModule(src, name string, options ...string) (*Module, error) {
	ptx, log, err := Compile(src, name, c.info.VirtualArch(), options...)
	if err != nil {
		return nil, err
	}
	m, err := c.LoadPTX(ptx)
	if err != nil {
		return nil, err
	}
	m.CompileLog = log
	return m, nil
}

// Function returns the kernel called name (an extern "C" __global__
// function) (cuModuleGetFunction). Errors: ErrClosed, *Error
// (CUDA_ERROR_NOT_FOUND for an unknown name).
func (m *Module) Function(name string) (*Function, error) {
	if m.unloaded.Load() {
		return nil, ErrClosed
	}
	var h uintptr
	err := m.ctx.Do(func() error {
		return drv.check("cuModuleGetFunction", drv.cuModuleGetFunction(&h, m.h, name))
	})
	if err != nil {
		return nil, withDetail(err, name)
	}
	return &Function{mod: m, h: h, name: name}, nil
}

// Unload unloads the module (cuModuleUnload); its Functions become invalid.
// A second Unload returns ErrClosed.
func (m *Module) Unload() error {
	if !m.unloaded.CompareAndSwap(false, true) {
		return ErrClosed
	}
	return m.ctx.Do(func() error { return drv.check("cuModuleUnload", drv.cuModuleUnload(m.h)) })
}

// Function is a kernel of a loaded Module.
type Function struct {
	mod  *Module
	h    uintptr
	name string
}

// Name is the kernel's name.
func (f *Function) Name() string { return f.name }

// Dim3 is a grid or block size; zero components count as 1.
type Dim3 struct{ X, Y, Z uint32 }

func (d Dim3) norm() Dim3 {
	if d.X == 0 {
		d.X = 1
	}
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

// Launch enqueues the kernel on s (cuLaunchKernel) with the given grid and
// block sizes, dynamic shared memory in bytes, and arguments in the
// kernel's parameter order. Accepted argument types (their C types):
// *Buffer and DevicePtr (pointers), int32 (int), uint32 (unsigned),
// int64 (long long), uint64, float32 (float), float64 (double). Launch
// failures detected at launch are returned; faults during execution surface
// at the next synchronization. Errors: ErrInvalidArgument (another argument
// type, a freed buffer), ErrClosed, *Error naming the kernel.
func (f *Function) Launch(s *Stream, grid, block Dim3, sharedBytes uint32, args ...any) error {
	if f.mod.unloaded.Load() || s.destroyed.Load() {
		return ErrClosed
	}
	slots := make([]uint64, len(args))
	ptrs := make([]unsafe.Pointer, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case *Buffer:
			p, err := v.span("Launch "+f.name, 0, 0)
			if err != nil {
				return err
			}
			slots[i] = p
		case DevicePtr:
			slots[i] = uint64(v)
		case int32:
			slots[i] = uint64(uint32(v))
		case uint32:
			slots[i] = uint64(v)
		case int64:
			slots[i] = uint64(v)
		case uint64:
			slots[i] = v
		case float32:
			slots[i] = uint64(math.Float32bits(v))
		case float64:
			slots[i] = math.Float64bits(v)
		default:
			return fmt.Errorf("%w: Launch %s: argument %d has unsupported type %T", ErrInvalidArgument, f.name, i, a)
		}
		ptrs[i] = unsafe.Pointer(&slots[i])
	}
	var params unsafe.Pointer
	if len(ptrs) > 0 {
		params = unsafe.Pointer(&ptrs[0])
	}
	g, b := grid.norm(), block.norm()
	err := f.mod.ctx.Do(func() error {
		return drv.check("cuLaunchKernel", drv.cuLaunchKernel(f.h, g.X, g.Y, g.Z, b.X, b.Y, b.Z, sharedBytes, s.h, params, nil))
	})
	runtime.KeepAlive(slots)
	runtime.KeepAlive(ptrs)
	if err != nil {
		return withDetail(err, fmt.Sprintf("kernel %s grid %v block %v", f.name, g, b))
	}
	return nil
}

// GridFor returns the 1-D grid size that covers n work items with blocks of
// threadsPerBlock, capped at maxBlocks (kernels use grid-stride loops).
func GridFor(n int64, threadsPerBlock, maxBlocks int) uint32 {
	if n <= 0 {
		return 1
	}
	b := (n + int64(threadsPerBlock) - 1) / int64(threadsPerBlock)
	if maxBlocks > 0 && b > int64(maxBlocks) {
		b = int64(maxBlocks)
	}
	return uint32(b)
}
