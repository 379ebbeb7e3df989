package xfer

import (
	"sync"
)

// FaultHook is a test hook: the initiating agent calls it once per Post
// (without locks held) and the write (or READ, WriteInfo.Read) misbehaves
// as the returned Fault says.
// The faults are carried out by the initiator, on both backends, after the
// target has accepted the write (key and bounds checked), so the bytes they
// let through really land in the target's registered memory. Leave nil in
// production.
type FaultHook func(w WriteInfo) Fault

// WriteInfo describes the write a FaultHook is deciding about.
type WriteInfo struct {
	// Seq counts this agent's posts, from 1.
	Seq uint64
	// Peer is the target agent's name.
	Peer string
	// Bytes is the write's total length.
	Bytes uint64
	// Segments is the number of descriptor pairs.
	Segments int
	// Read is true for a READ (CreateRead). The faults then act on the
	// bytes read into the initiator's local memory: FaultFailAfter lets
	// AfterBytes bytes land locally, FaultHang stops after them, and
	// FaultLoseAck reports a failure after every byte landed.
	Read bool
}

// FaultKind selects a misbehaviour.
type FaultKind int

const (
	// FaultNone: the write runs normally.
	FaultNone FaultKind = iota
	// FaultFailAfter: AfterBytes bytes land (in segment order), then the
	// connection is cut; the write fails with ErrRemoteDisconnect. The
	// target's region holds those bytes and nothing past them.
	FaultFailAfter
	// FaultHang: AfterBytes bytes are sent, then the write stops and stays
	// in flight (Status StatusInProgress, Release refused, Deregister of
	// both sides' regions refused) until Hang.Cancel (it fails with
	// ErrCanceled), Hang.Resume (it completes normally) or the agent's
	// Close. With AfterBytes >= the write's length the whole payload is
	// sent and the write hangs before the acknowledgement.
	FaultHang
	// FaultLoseAck: every byte lands and the target acknowledges, but the
	// acknowledgement is lost: the write fails with ErrRemoteDisconnect
	// although the data is complete (the uncertain outcome of CONTRACT Q-1).
	FaultLoseAck
)

// Fault is what a FaultHook returns.
type Fault struct {
	// Kind is the fault to inject; FaultNone lets the write run normally.
	Kind FaultKind
	// AfterBytes is how many bytes get through before FaultFailAfter or
	// FaultHang strikes; values past the write's length mean all of them.
	AfterBytes uint64
	// Hang controls a FaultHang (required for it; made by NewHang). One
	// Hang serves one write.
	Hang *Hang
}

// Hang is the test's handle on a write stopped by FaultHang.
type Hang struct {
	reached  chan struct{}
	release  chan struct{}
	once     sync.Once
	reachOne sync.Once
	cancel   bool
}

// NewHang makes a Hang for one Fault{Kind: FaultHang}.
func NewHang() *Hang {
	return &Hang{reached: make(chan struct{}), release: make(chan struct{})}
}

// Reached is closed once the write has stopped: the target has accepted it
// (so its region counts a write in flight) and AfterBytes bytes were sent.
func (h *Hang) Reached() <-chan struct{} { return h.reached }

// Cancel ends the hang by cutting the write: it fails with ErrCanceled.
// Calls after the first Cancel or Resume do nothing.
func (h *Hang) Cancel() { h.end(true) }

// Resume ends the hang by letting the write continue normally. Calls after
// the first Cancel or Resume do nothing.
func (h *Hang) Resume() { h.end(false) }

func (h *Hang) end(cancel bool) {
	h.once.Do(func() {
		h.cancel = cancel
		close(h.release)
	})
}

func (h *Hang) markReached() { h.reachOne.Do(func() { close(h.reached) }) }

// limit is how many of total bytes the fault lets through before it strikes.
func (f Fault) limit(total uint64) uint64 {
	switch f.Kind {
	case FaultFailAfter, FaultHang:
		return min(f.AfterBytes, total)
	}
	return total
}
