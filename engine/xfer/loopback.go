package xfer

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
)

// Registry is where loopback agents of one process find each other by name:
// the "network" of BackendLoopback. Agents of different registries cannot
// talk (LoadRemoteMetadata answers ErrInvalidParam).
type Registry struct {
	id     string
	mu     sync.Mutex
	agents map[string]*core
}

var registrySeq atomic.Uint64

// NewRegistry makes an empty registry.
func NewRegistry() *Registry {
	g := new(Registry)
	g.init()
	return g
}

// init sets up g, a zero Registry, as NewRegistry's: a fresh id (built
// without fmt: one allocation, the simulator makes a registry a run).
func (g *Registry) init() {
	var b [len("loopback-registry-") + 20]byte
	id := strconv.AppendUint(append(b[:0], "loopback-registry-"...), registrySeq.Add(1), 10)
	g.id, g.agents = string(id), map[string]*core{}
}

func (g *Registry) lookup(name string) *core {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.agents[name]
}

// NewLoopback starts a loopback agent named opts.Name in reg. A write copies
// the source bytes straight into the target agent's registered memory
// inside Post (StatusDone), unless a FaultHang holds it (StatusInProgress);
// a READ copies the other way, from the target's registered memory into
// the local destinations.
// ErrInvalidParam for a nil registry, a bad name, or a name already taken
// in reg.
func NewLoopback(reg *Registry, opts Options) (Agent, error) {
	if reg == nil {
		return nil, fmt.Errorf("xfer: NewLoopback without a registry: %w", ErrInvalidParam)
	}
	c, err := newCore(BackendLoopback, opts)
	if err != nil {
		return nil, err
	}
	c.tr = &loopback{reg: reg, c: c}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.agents[c.name] != nil {
		return nil, fmt.Errorf("xfer: loopback agent %q already exists in this registry: %w", c.name, ErrInvalidParam)
	}
	reg.agents[c.name] = c
	return c, nil
}

type loopback struct {
	reg *Registry
	c   *core
}

func (l *loopback) connInfo() string { return l.reg.id }

func (l *loopback) checkPeer(p peerInfo) error {
	if p.conn != l.reg.id {
		return fmt.Errorf("xfer: loopback metadata of another registry: %w", ErrInvalidParam)
	}
	return nil
}

func (l *loopback) inline(f Fault) bool { return f.Kind != FaultHang }

// write copies the local sources into the target's registered memory inside
// Post, after the target's key and bounds checks.
func (l *loopback) write(ctx context.Context, w *outbound) error {
	return l.move(ctx, w, false)
}

// read copies the target's registered bytes into the local destinations
// (w.srcs) inside Post, after the target's key and bounds checks; the
// faults act as for write, on the local side.
func (l *loopback) read(ctx context.Context, w *outbound) error {
	return l.move(ctx, w, true)
}

// move carries out a WRITE (read false) or a READ (read true) between this
// agent's memory and the target's, with the fault hook applied.
func (l *loopback) move(ctx context.Context, w *outbound, read bool) error {
	verb, noun, end := "write to", "write", "acknowledgement"
	if read {
		verb, noun, end = "read from", "read", "completion"
	}
	target := l.reg.lookup(w.peer.name)
	if target == nil {
		return fmt.Errorf("xfer: loopback peer %q is gone: %w", w.peer.name, ErrRemoteDisconnect)
	}
	in, err := target.beginInbound(w.from, w.peer.name, w.remote, read, nil, nil)
	if err != nil {
		return fmt.Errorf("xfer: %s %q failed in the target: %w", verb, w.peer.name, ErrBackend)
	}
	copyRange := func(from, to uint64) {
		_ = forRange(w.srcs, from, to, func(i int, off uint64, p []byte) error {
			if read {
				copy(p, in.dst[i][off:])
			} else {
				copy(in.dst[i][off:], p)
			}
			return nil
		})
	}
	limit := w.fault.limit(w.total)
	copyRange(0, limit)
	switch w.fault.Kind {
	case FaultFailAfter:
		in.end(limit, fmt.Errorf("initiator fault: %s cut after %d bytes", noun, limit))
		return fmt.Errorf("xfer: %s %q cut after %d of %d bytes: %w", verb, w.peer.name, limit, w.total, ErrRemoteDisconnect)
	case FaultHang:
		h := w.fault.Hang
		h.markReached()
		select {
		case <-h.release:
			if h.cancel {
				in.end(limit, fmt.Errorf("initiator fault: %s hang cancelled after %d bytes", noun, limit))
				return fmt.Errorf("xfer: %s %q cancelled: %w", verb, w.peer.name, ErrCanceled)
			}
		case <-ctx.Done():
			in.end(limit, fmt.Errorf("initiator closed after %d bytes", limit))
			return fmt.Errorf("xfer: %s %q cancelled by Close: %w", verb, w.peer.name, ErrCanceled)
		case <-target.agentContext().Done():
			in.end(limit, fmt.Errorf("agent closed after %d bytes", limit))
			return fmt.Errorf("xfer: loopback peer %q closed during the %s: %w", w.peer.name, noun, ErrRemoteDisconnect)
		}
		copyRange(limit, w.total)
	}
	in.end(w.total, nil)
	if w.fault.Kind == FaultLoseAck {
		return fmt.Errorf("xfer: %s %q: %s lost: %w", verb, w.peer.name, end, ErrRemoteDisconnect)
	}
	return nil
}

func (l *loopback) dropPeer(peerInfo) {}

func (l *loopback) close() error {
	l.reg.mu.Lock()
	defer l.reg.mu.Unlock()
	if l.reg.agents[l.c.name] == l.c {
		delete(l.reg.agents, l.c.name)
	}
	return nil
}
