// Package producer is the reference engine's producer driver state and
// the decisions it carries out: the lifecycle core of its published
// entries (handoff.ProducerTable), reached only through Table's checked
// transitions (checked.go); and Driver, which, reaching the engine
// through Env (its lock, X-1, the quarantine entry, the mutant switches),
// owns a tcp transfer's source after the claim (transfer.go: the WRITE,
// free or quarantine on handoff.FailTransfer's decision, Q-3, Q-6), an
// entry's removal (removal.go: store.Remove, RemovalDone or RemovalFailed
// and X-1), the collector pass (collect.go: X-2), the drain (drain.go:
// S-2, S-4) and a cuda_ipc source after the claim (cudaipc.go: the lend,
// its quarantine on handoff.FailTransfer's decision, the loan's return).
// engine/server serves the calls (the checks before the claim, gRPC
// codes, trailers, the wire mapping); this package imports no gRPC.
//
// Locking: Table has no lock of its own. Every method is called with the
// driver's lock held (engine/server: Engine.mu, Env's Locker), which is
// never held across I/O: Driver takes it around each transition and
// drops it before the store's or the agent's calls; so there is one lock
// and no order to invert. Env's ...Locked methods run under it.
package producer

import (
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/invariants"
)

// Table is the producer's entry table (handoff.ProducerTable: SU-1, SU-3,
// S-2, L-5, C-1..C-7). Reads of the core (Published, TTL,
// Counters, ...) are promoted from it; every transition goes through one
// of Table's own methods (checked.go), which under -tags invariants runs
// the core's CheckInvariants after it and panics with an
// *invariants.Violation on the "producer table". Not safe for concurrent
// use: the caller's lock guards it.
type Table struct {
	*handoff.ProducerTable
}

// New returns an empty producer table with cfg's quota and TTLs.
func New(cfg handoff.ProducerConfig) *Table {
	return &Table{ProducerTable: handoff.NewProducerTable(cfg)}
}

// checked runs the core's invariants after the transition op (id) when
// built with -tags invariants.
func (t *Table) checked(op, id string) {
	if invariants.On {
		invariants.MustHold("producer table", op, id, t.ProducerTable)
	}
}
