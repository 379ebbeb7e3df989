package cuda

import (
	"errors"
	"sync/atomic"
)

// captureModeRelaxed is CU_STREAM_CAPTURE_MODE_RELAXED: the capture does
// not forbid other threads' unsafe calls (cuMemAlloc, synchronizations), so
// a capture on one stream never breaks unrelated CUDA users of the process.
const captureModeRelaxed = 2

// Graph is an instantiated CUDA graph (CUgraphExec): a recorded sequence of
// stream work replayed by one launch, with no per-kernel host overhead.
type Graph struct {
	ctx       *Context
	exec      uintptr
	destroyed atomic.Bool
}

// Capture records the work that record enqueues on s, without running it
// (cuStreamBeginCapture_v2, relaxed mode; cuStreamEndCapture;
// cuGraphInstantiateWithFlags), and returns it as a Graph. record must only
// enqueue work on s (kernel launches, copies, memsets, cuBLAS calls on a
// handle bound to s); synchronizing s inside it fails. The capture always
// ends, also when record fails; record's error comes first. The graph
// keeps the device addresses it was recorded with: re-capture after
// reallocating buffers. Errors: ErrClosed, record's error, *Error (e.g.
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED from a call that cannot be
// captured).
func (s *Stream) Capture(record func() error) (*Graph, error) {
	if s.destroyed.Load() {
		return nil, ErrClosed
	}
	if err := s.ctx.Do(func() error {
		return drv.check("cuStreamBeginCapture_v2", drv.cuStreamBeginCapture(s.h, captureModeRelaxed))
	}); err != nil {
		return nil, err
	}
	recErr := record()
	var graph uintptr
	endErr := s.ctx.Do(func() error { return drv.check("cuStreamEndCapture", drv.cuStreamEndCapture(s.h, &graph)) })
	if recErr != nil || endErr != nil {
		if graph != 0 {
			_ = s.ctx.Do(func() error { return drv.check("cuGraphDestroy", drv.cuGraphDestroy(graph)) })
		}
		return nil, errors.Join(recErr, endErr)
	}
	var exec uintptr
	err := s.ctx.Do(func() error {
		err := drv.check("cuGraphInstantiateWithFlags", drv.cuGraphInstantiate(&exec, graph, 0))
		return errors.Join(err, drv.check("cuGraphDestroy", drv.cuGraphDestroy(graph)))
	})
	if err != nil {
		return nil, err
	}
	return &Graph{ctx: s.ctx, exec: exec}, nil
}

// Launch replays the graph on s (cuGraphLaunch), ordered after earlier
// work on s.
func (g *Graph) Launch(s *Stream) error {
	if g.destroyed.Load() || s.destroyed.Load() {
		return ErrClosed
	}
	return g.ctx.Do(func() error { return drv.check("cuGraphLaunch", drv.cuGraphLaunch(g.exec, s.h)) })
}

// Destroy frees the graph (cuGraphExecDestroy). A second Destroy returns
// ErrClosed.
func (g *Graph) Destroy() error {
	if !g.destroyed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	return g.ctx.Do(func() error { return drv.check("cuGraphExecDestroy", drv.cuGraphExecDestroy(g.exec)) })
}
