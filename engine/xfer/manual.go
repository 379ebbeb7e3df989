package xfer

import (
	"cmp"
	"fmt"
	"slices"
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
	seq     uint64 // transfers recorded so far (manualTransfer.seq)
}

// manualTransfer is one posted transfer of a ManualNetwork.
type manualTransfer struct {
	seq uint64 // the order it was recorded in: a scan of pending ends transfers in this order
	c   *core  // the initiator
	r   *Request
	w   *outbound // &out
	out outbound
	in  *inboundWrite // accepted by the target and not yet ended; nil otherwise
	// inbound holds *in, in the transfer's own allocation (issue #16).
	inbound inboundWrite
	// moved: Deliver or Cut has run (or the target refused or closed);
	// delivered: Deliver has run.
	moved, delivered bool
	// err is what Status will answer once Complete runs (nil: StatusDone).
	err error
}

// NewManualNetwork makes an empty manual network.
func NewManualNetwork() *ManualNetwork {
	// The network and its registry in one allocation (the simulator
	// makes a network a run).
	both := new(struct {
		n   ManualNetwork
		reg Registry
	})
	both.reg.init()
	both.n = ManualNetwork{reg: &both.reg, pending: map[*Request]*manualTransfer{}}
	return &both.n
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
	a := new(manualAgent)
	if err := a.c.init(BackendLoopback, opts); err != nil {
		return nil, err
	}
	c := &a.c
	a.m = manual{loopback: loopback{reg: n.reg, c: c}, n: n}
	c.tr = &a.m
	n.reg.mu.Lock()
	defer n.reg.mu.Unlock()
	if n.reg.agents[c.name] != nil {
		return nil, fmt.Errorf("xfer: manual agent %q already exists in this network: %w", c.name, ErrInvalidParam)
	}
	n.reg.agents[c.name] = c
	return c, nil
}

// manualAgent is a manual agent's core and transport in one allocation
// (the simulator starts several agents a run).
type manualAgent struct {
	c core
	m manual
}

// Pending is the number of posted transfers not yet completed (0 for a
// nil network).
func (n *ManualNetwork) Pending() int {
	if n == nil {
		return 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.pending)
}

// errNoNetwork answers a step of a nil network.
func errNoNetwork(op string) error {
	return fmt.Errorf("xfer: %s of a nil ManualNetwork: %w", op, ErrInvalidParam)
}

// inEnd is an accepted transfer its target must end. The network decides
// it under n.mu and runs it after unlocking: ending calls the target's
// Options.OnInbound, which is promised to run without locks held (a hook
// may call Pending, Post or Close, which take n.mu).
type inEnd struct {
	in     *inboundWrite
	landed uint64
	err    error
}

func (e inEnd) run() {
	if e.in != nil {
		e.in.end(e.landed, e.err)
	}
}

// Deliver moves the posted transfer req now: the source bytes land in the
// target's registered memory (a READ: the target's bytes in the local
// destinations), all of them or, under FaultFailAfter, the first
// AfterBytes, and the target ends the transfer (OnInbound reports it). It
// returns the outcome Complete will report: nil, ErrRemoteDisconnect
// (FaultFailAfter; FaultLoseAck, whose bytes all landed), or the error of a
// transfer the target refused (ErrBackend) or could not be reached or
// closed before the bytes arrived (ErrRemoteDisconnect), which moves
// nothing, as does a transfer Cut before. ErrInvalidParam if n is nil or
// req is not a pending transfer of n; ErrNotAllowed if it was delivered
// before.
func (n *ManualNetwork) Deliver(req *Request) error {
	if n == nil {
		return errNoNetwork("Deliver")
	}
	n.mu.Lock()
	end, err := n.deliverLocked(req)
	n.mu.Unlock()
	end.run()
	return err
}

// deliverLocked is Deliver under n.mu; the target's end is left to the caller.
func (n *ManualNetwork) deliverLocked(req *Request) (inEnd, error) {
	t, err := n.lookup("Deliver", req)
	if err != nil {
		return inEnd{}, err
	}
	if t.delivered {
		return inEnd{}, fmt.Errorf("xfer: Deliver of a transfer delivered before: %w", ErrNotAllowed)
	}
	t.moved, t.delivered = true, true
	in := t.in
	if in == nil {
		return inEnd{}, t.err // refused, cut, or the target closed: nothing lands
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
	end := inEnd{in: in, landed: w.total}
	switch f.Kind {
	case FaultFailAfter:
		end.landed, end.err = limit, fmt.Errorf("initiator fault: cut after %d bytes", limit)
		t.err = fmt.Errorf("xfer: %s %q cut after %d of %d bytes: %w", verb, w.peer.name, limit, w.total, ErrRemoteDisconnect)
	case FaultLoseAck:
		t.err = fmt.Errorf("xfer: %s %q: acknowledgement lost: %w", verb, w.peer.name, ErrRemoteDisconnect)
	}
	return end, t.err
}

// Cut breaks req's connection now: bytes not yet delivered never land (the
// target ends an accepted transfer as broken, 0 bytes landed), and the
// transfer will fail with ErrRemoteDisconnect, also when it was delivered
// already (its acknowledgement is lost with the connection). It returns
// that error. ErrInvalidParam if n is nil or req is not a pending transfer
// of n.
func (n *ManualNetwork) Cut(req *Request) error {
	if n == nil {
		return errNoNetwork("Cut")
	}
	n.mu.Lock()
	t, err := n.lookup("Cut", req)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	end := n.cutLocked(t, "connection cut")
	err = t.err
	n.mu.Unlock()
	end.run()
	return err
}

// cutLocked fails t and takes its accepted transfer from it, to be ended
// as broken by the caller once n.mu is released. Caller holds n.mu.
func (n *ManualNetwork) cutLocked(t *manualTransfer, why string) inEnd {
	t.moved = true
	var end inEnd
	if t.in != nil {
		end = inEnd{in: t.in, err: fmt.Errorf("%s before any byte landed", why)}
		t.in = nil
	}
	if t.err == nil {
		t.err = fmt.Errorf("xfer: transfer with %q: %s: %w", t.w.peer.name, why, ErrRemoteDisconnect)
	}
	return end
}

// Complete ends req's post as the initiator sees it: from now on Status
// answers StatusDone (Deliver landed every byte and the acknowledgement
// came back) or the error Deliver or Cut returned; a transfer neither
// delivered nor cut is cut first (ErrRemoteDisconnect, nothing lands). The
// request may then be released or posted again. It returns the outcome.
// ErrInvalidParam if n is nil or req is not a pending transfer of n.
func (n *ManualNetwork) Complete(req *Request) error {
	if n == nil {
		return errNoNetwork("Complete")
	}
	n.mu.Lock()
	t, err := n.lookup("Complete", req)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	var end inEnd
	if !t.moved || t.in != nil {
		end = n.cutLocked(t, "completed before delivery")
	}
	delete(n.pending, req)
	n.mu.Unlock()
	end.run()
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
func (m *manual) hold(r *Request, w outbound) {
	m.record(r, m.accept(w))
}

// accept asks w's target to accept it (beginInbound, which reports a
// refusal to the target's OnInbound: no lock of the network is held).
func (m *manual) accept(out outbound) *manualTransfer {
	t := &manualTransfer{c: m.c, out: out}
	t.w = &t.out
	w := t.w
	if target := m.reg.lookup(w.peer.name); target == nil {
		t.moved = true
		t.err = fmt.Errorf("xfer: loopback peer %q is gone: %w", w.peer.name, ErrRemoteDisconnect)
	} else if in, err := target.beginInbound(w.from, w.peer.name, w.remote, w.read, nil, &t.inbound); err != nil {
		t.moved = true
		t.err = fmt.Errorf("xfer: transfer with %q refused by the target: %w", w.peer.name, ErrBackend)
	} else {
		t.in = in
	}
	return t
}

// record makes t, accepted or refused for r, a pending transfer of the
// network. Either agent may have closed since Post checked the initiator
// and accept the target, their Close having scanned the pending transfers
// before t was among them: an initiator closed by now ends t at once with
// ErrCanceled (its Close waits for it), a target closed by now has it cut
// (its Close waits for the accepted transfer), as abandon and close would
// have. The check and the recording happen under n.mu, which abandon and
// close take after their agent is marked closed, so each transfer is
// either seen by their scan or sees the agent closed.
func (m *manual) record(r *Request, t *manualTransfer) {
	t.r = r
	var end inEnd
	m.n.mu.Lock()
	m.n.seq++
	t.seq = m.n.seq
	canceled := m.c.isClosed()
	switch {
	case canceled:
		end = abandonLocked(t)
	case t.in != nil && t.in.c.isClosed():
		end = m.n.cutLocked(t, "target agent closed")
		m.n.pending[r] = t
	default:
		m.n.pending[r] = t
	}
	m.n.mu.Unlock()
	end.run()
	if canceled {
		t.c.finish(t.r, t.err)
	}
}

// abandonLocked fails t with ErrCanceled as its initiator's Close does and
// takes its accepted transfer from it, to be ended by the caller once n.mu
// is released. Caller holds n.mu.
func abandonLocked(t *manualTransfer) inEnd {
	var end inEnd
	if t.in != nil {
		end = inEnd{in: t.in, err: fmt.Errorf("initiator closed")}
		t.in = nil
	}
	t.err = fmt.Errorf("xfer: transfer with %q cancelled by Close: %w", t.w.peer.name, ErrCanceled)
	return end
}

// abandon ends every pending transfer this agent initiated with
// ErrCanceled (core.Close, before it waits for its writers): the targets
// end their accepted transfers, then the posts finish, in the order of the
// scan, after n.mu is released.
func (m *manual) abandon() {
	m.n.mu.Lock()
	var mine []*manualTransfer
	var ends []inEnd
	for _, t := range m.n.inOrderLocked() {
		if t.c != m.c {
			continue
		}
		ends = append(ends, abandonLocked(t))
		delete(m.n.pending, t.r)
		mine = append(mine, t)
	}
	m.n.mu.Unlock()
	for _, e := range ends {
		e.run()
	}
	for _, t := range mine {
		t.c.finish(t.r, t.err)
	}
}

// close leaves the registry and ends the transfers this agent accepted as
// targets as broken, so core.Close does not wait for them; they end after
// n.mu is released, in the order of the scan.
func (m *manual) close() error {
	err := m.loopback.close()
	m.n.mu.Lock()
	var ends []inEnd
	for _, t := range m.n.inOrderLocked() {
		if t.in != nil && t.in.c == m.c {
			ends = append(ends, m.n.cutLocked(t, "target agent closed"))
		}
	}
	m.n.mu.Unlock()
	for _, e := range ends {
		e.run()
	}
	return err
}

// inOrderLocked returns the pending transfers in the order they were
// recorded, so a Close that ends several ends them (and calls their
// targets' OnInbound) in the same order on every run: the simulator's
// traces depend on it. Caller holds n.mu.
func (n *ManualNetwork) inOrderLocked() []*manualTransfer {
	ts := make([]*manualTransfer, 0, len(n.pending))
	for _, t := range n.pending {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b *manualTransfer) int { return cmp.Compare(a.seq, b.seq) })
	return ts
}

// holder is a transport whose transfers wait for an outside driver
// (manual): Post hands them over instead of running them.
type holder interface {
	hold(r *Request, w outbound)
	abandon()
}

var _ holder = (*manual)(nil)
