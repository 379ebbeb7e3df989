package xfer

import (
	"fmt"
	"sync"
)

// ManualNetwork is a loopback network whose transfers move only when its
// owner says so: the simulator's transport (ARCHITECTURE.md "Backends take
// their file system, transport and clock as interfaces, so the simulator
// hands them simulated ones"). Agents made by NewManual run the same agent
// core as every backend (tables, keys, the request state machine, Revoke's
// quiet/settle logic); only the moment a posted transfer moves is left to
// the caller, who steps it from one goroutine at virtual times it draws:
//
//	st, _ := producer.Post(req)  // StatusInProgress, no goroutine: the target
//	                             // accepted it (key and bounds checked, its
//	                             // regions count a transfer in flight) or refused it
//	net.Deliver(req)             // the bytes land in the target's registered memory
//	                             // (or FaultFailAfter's first AfterBytes), the target ends it
//	net.Cut(req)                 // or: the connection breaks; no more byte lands
//	net.Complete(req)            // the initiator learns the outcome: Status answers
//	                             // StatusDone, or the error (FaultLoseAck: after every byte landed)
//
// A transfer accepted by its target holds the target's regions in flight
// until Deliver, Cut or Complete ends it, so a Revoke meanwhile is done only
// then (CONTRACT Q-6), exactly as a tcp connection streaming into the
// region would hold it. Closing the target ends its accepted transfers as
// broken (the initiator will see ErrRemoteDisconnect); closing the
// initiator ends its own at once with ErrCanceled. Faults (Options.Faults)
// act at Deliver as on loopback; FaultHang has no meaning here (the caller
// already decides when a transfer moves) and acts as FaultNone.
//
// Agents of one ManualNetwork find each other by name, as loopback agents of
// one Registry do; their metadata is loopback metadata of the network's
// registry (Backend() is BackendLoopback), so they reach no other registry.
// Safe for concurrent use, but meant for one driving goroutine: nothing
// moves unless a method is called.
type ManualNetwork struct {
	reg     *Registry
	mu      sync.Mutex
	pending map[*Request]*manualTransfer
}

// manualTransfer is one posted transfer of a ManualNetwork.
type manualTransfer struct {
	c  *core // the initiator
	r  *Request
	w  *outbound
	in *inboundWrite // accepted by the target and not yet ended; nil otherwise
	// moved: Deliver or Cut has run (or the target refused or closed);
	// delivered: Deliver has run.
	moved, delivered bool
	// err is what Status will answer once Complete runs (nil: StatusDone).
	err error
}

// NewManualNetwork makes an empty manual network.
func NewManualNetwork() *ManualNetwork {
	return &ManualNetwork{reg: NewRegistry(), pending: map[*Request]*manualTransfer{}}
}

// NewManual starts an agent named opts.Name in n. Post never copies and
// never starts a goroutine: it returns StatusInProgress (or the errors of
// every backend's Post) and the transfer waits for n's Deliver, Cut and
// Complete. ErrInvalidParam for a nil network, a bad name, or a name taken
// in n.
func NewManual(n *ManualNetwork, opts Options) (Agent, error) {
	if n == nil {
		return nil, fmt.Errorf("xfer: NewManual without a network: %w", ErrInvalidParam)
	}
	c, err := newCore(BackendLoopback, opts)
	if err != nil {
		return nil, err
	}
	c.tr = &manual{loopback: loopback{reg: n.reg, c: c}, n: n}
	n.reg.mu.Lock()
	defer n.reg.mu.Unlock()
	if n.reg.agents[c.name] != nil {
		return nil, fmt.Errorf("xfer: manual agent %q already exists in this network: %w", c.name, ErrInvalidParam)
	}
	n.reg.agents[c.name] = c
	return c, nil
}

// Pending is the number of posted transfers not yet completed.
func (n *ManualNetwork) Pending() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.pending)
}

// Deliver moves the posted transfer req now: the source bytes land in the
// target's registered memory (a READ: the target's bytes in the local
// destinations), all of them or, under FaultFailAfter, the first
// AfterBytes, and the target ends the transfer (OnInbound reports it). It
// returns the outcome Complete will report: nil, ErrRemoteDisconnect
// (FaultFailAfter; FaultLoseAck, whose bytes all landed), or the error of a
// transfer the target refused (ErrBackend) or could not be reached or
// closed before the bytes arrived (ErrRemoteDisconnect), which moves
// nothing, as does a transfer Cut before. ErrInvalidParam if req is not a
// pending transfer of n; ErrNotAllowed if it was delivered before.
func (n *ManualNetwork) Deliver(req *Request) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, err := n.lookup("Deliver", req)
	if err != nil {
		return err
	}
	if t.delivered {
		return fmt.Errorf("xfer: Deliver of a transfer delivered before: %w", ErrNotAllowed)
	}
	t.moved, t.delivered = true, true
	in := t.in
	if in == nil {
		return t.err // refused, cut, or the target closed: nothing lands
	}
	t.in = nil
	w := t.w
	verb := "write to"
	if w.read {
		verb = "read from"
	}
	f := w.fault
	if f.Kind == FaultHang {
		f = Fault{} // the driver already decides when a transfer moves
	}
	limit := f.limit(w.total)
	_ = forRange(w.srcs, 0, limit, func(i int, off uint64, p []byte) error {
		if w.read {
			copy(p, in.dst[i][off:])
		} else {
			copy(in.dst[i][off:], p)
		}
		return nil
	})
	switch f.Kind {
	case FaultFailAfter:
		in.end(limit, fmt.Errorf("initiator fault: cut after %d bytes", limit))
		t.err = fmt.Errorf("xfer: %s %q cut after %d of %d bytes: %w", verb, w.peer.name, limit, w.total, ErrRemoteDisconnect)
	case FaultLoseAck:
		in.end(w.total, nil)
		t.err = fmt.Errorf("xfer: %s %q: acknowledgement lost: %w", verb, w.peer.name, ErrRemoteDisconnect)
	default:
		in.end(w.total, nil)
	}
	return t.err
}

// Cut breaks req's connection now: bytes not yet delivered never land (the
// target ends an accepted transfer as broken, 0 bytes landed), and the
// transfer will fail with ErrRemoteDisconnect, also when it was delivered
// already (its acknowledgement is lost with the connection). It returns
// that error. ErrInvalidParam if req is not a pending transfer of n.
func (n *ManualNetwork) Cut(req *Request) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, err := n.lookup("Cut", req)
	if err != nil {
		return err
	}
	n.cutLocked(t, "connection cut")
	return t.err
}

// cutLocked ends t's accepted transfer as broken and fails it. Caller holds n.mu.
func (n *ManualNetwork) cutLocked(t *manualTransfer, why string) {
	t.moved = true
	if t.in != nil {
		t.in.end(0, fmt.Errorf("%s before any byte landed", why))
		t.in = nil
	}
	if t.err == nil {
		t.err = fmt.Errorf("xfer: transfer with %q: %s: %w", t.w.peer.name, why, ErrRemoteDisconnect)
	}
}

// Complete ends req's post as the initiator sees it: from now on Status
// answers StatusDone (Deliver landed every byte and the acknowledgement
// came back) or the error Deliver or Cut returned; a transfer neither
// delivered nor cut is cut first (ErrRemoteDisconnect, nothing lands). The
// request may then be released or posted again. It returns the outcome.
// ErrInvalidParam if req is not a pending transfer of n.
func (n *ManualNetwork) Complete(req *Request) error {
	n.mu.Lock()
	t, err := n.lookup("Complete", req)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	if !t.moved || t.in != nil {
		n.cutLocked(t, "completed before delivery")
	}
	delete(n.pending, req)
	n.mu.Unlock()
	t.c.finish(t.r, t.err)
	return t.err
}

// lookup finds req's pending transfer. Caller holds n.mu.
func (n *ManualNetwork) lookup(op string, req *Request) (*manualTransfer, error) {
	t := n.pending[req]
	if t == nil {
		return nil, fmt.Errorf("xfer: %s of a request that is not a pending transfer of this network: %w", op, ErrInvalidParam)
	}
	return t, nil
}

// manual is the transport of NewManual: loopback's peers and registry, with
// every transfer held for the network's owner.
type manual struct {
	loopback
	n *ManualNetwork
}

func (m *manual) inline(Fault) bool { return false }

// hold records a posted transfer (core.Post, for a holding transport): the
// target accepts or refuses it now, the bytes move at Deliver.
func (m *manual) hold(r *Request, w *outbound) {
	t := &manualTransfer{c: m.c, r: r, w: w}
	if target := m.reg.lookup(w.peer.name); target == nil {
		t.moved = true
		t.err = fmt.Errorf("xfer: loopback peer %q is gone: %w", w.peer.name, ErrRemoteDisconnect)
	} else if in, err := target.beginInbound(w.from, w.peer.name, w.remote, w.read, nil); err != nil {
		t.moved = true
		t.err = fmt.Errorf("xfer: transfer with %q refused by the target: %w", w.peer.name, ErrBackend)
	} else {
		t.in = in
	}
	m.n.mu.Lock()
	m.n.pending[r] = t
	m.n.mu.Unlock()
}

// abandon ends every pending transfer this agent initiated with
// ErrCanceled (core.Close, before it waits for its writers).
func (m *manual) abandon() {
	m.n.mu.Lock()
	var mine []*manualTransfer
	for r, t := range m.n.pending {
		if t.c != m.c {
			continue
		}
		if t.in != nil {
			t.in.end(0, fmt.Errorf("initiator closed"))
			t.in = nil
		}
		t.err = fmt.Errorf("xfer: transfer with %q cancelled by Close: %w", t.w.peer.name, ErrCanceled)
		delete(m.n.pending, r)
		mine = append(mine, t)
	}
	m.n.mu.Unlock()
	for _, t := range mine {
		t.c.finish(t.r, t.err)
	}
}

// close leaves the registry and ends the transfers this agent accepted as
// targets as broken, so core.Close does not wait for them.
func (m *manual) close() error {
	err := m.loopback.close()
	m.n.mu.Lock()
	defer m.n.mu.Unlock()
	for _, t := range m.n.pending {
		if t.in != nil && t.in.c == m.c {
			m.n.cutLocked(t, "target agent closed")
		}
	}
	return err
}

// holder is a transport whose transfers wait for an outside driver
// (manual): Post hands them over instead of running them.
type holder interface {
	hold(r *Request, w *outbound)
	abandon()
}

var _ holder = (*manual)(nil)
