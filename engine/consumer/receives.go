// Package consumer is the reference engine's consumer driver state: the
// lifecycle core of its receives (handoff.ConsumerReceives), reached only
// through Receives' checked transitions, and the quarantines that keep
// memory a WRITE (or a read of a source) may still touch until the backend
// proves nothing can (CONTRACT ); and Driver, the
// receive buffers' life on the core's decisions: the tcp receive's
// (register, release, quarantine: tcp.go) and the cuda_ipc receive's
// (allocate, free, quarantine after an uncertain call or a failed copy:
// cudaipc.go). engine/server makes the call to the producer, gives a
// cuda_ipc loan back and maps the wire (gRPC codes, trailers); this
// package imports no gRPC.
//
// Locking: Receives has no lock of its own. Every method is called with
// the driver's lock held (engine/server: Engine.mu), which is never held
// across I/O; so there is one lock and no order to invert. The
// functions it is handed (Quarantine.End) run under that lock and must
// not block or take it; OnProof runs its end function without it.
package consumer

import (
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/invariants"
)

// Receives is the consumer's receives table (handoff.ConsumerReceives:
// C-4, L-5) and the engine's quarantines. Reads of the core
// (Inflight, Quarantine, ...) are promoted from it; every transition goes
// through one of Receives' own methods (checked.go), which under -tags
// invariants runs the core's CheckInvariants after it and panics with an
// *invariants.Violation on the "consumer receives". Not safe for
// concurrent use: the caller's lock guards it.
type Receives struct {
	*handoff.ConsumerReceives
	quarantines map[string]*Quarantine
}

// New returns an empty receives table with cfg's in-flight quota (L-5) and
// no quarantine.
func New(cfg handoff.ConsumerConfig) *Receives {
	return &Receives{ConsumerReceives: handoff.NewConsumerReceives(cfg), quarantines: map[string]*Quarantine{}}
}

// checked runs the core's invariants after the transition op (id) when
// built with -tags invariants.
func (r *Receives) checked(op, id string) {
	if invariants.On {
		invariants.MustHold("consumer receives", op, id, r.ConsumerReceives)
	}
}
