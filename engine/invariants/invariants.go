// Package invariants is the engine's switch for its lifecycle cores'
// invariant checks (Pebble's internal/invariants): built with -tags
// invariants (`make e2e-invariants`), On is true and the drivers that own a
// core (engine/server's producer table, engine/consumer's receives) run the
// core's CheckInvariants after every transition they make and panic with a
// *Violation when it fails: the process crashes at the transition that
// broke the table instead of answering from it. Without the tag On is a
// constant false and the checks compile away.
package invariants

import "fmt"

// Checker is a lifecycle table with CheckInvariants (handoff.ProducerTable,
// handoff.ConsumerReceives).
type Checker interface{ CheckInvariants() error }

// Violation is the value a driver panics with when a transition leaves a
// lifecycle table violating its invariants (-tags invariants).
type Violation struct {
	// Table is "producer table" or "consumer receives".
	Table string
	// Op is the transition and the id it was called with:
	// `ClaimForTransfer("3f2a...")`, or `Drain`.
	Op string
	// Err is CheckInvariants' error.
	Err error
}

// Error names the transition, the table and CheckInvariants' error.
func (v *Violation) Error() string {
	return fmt.Sprintf("baton: invariant violated after %s on the %s: %v", v.Op, v.Table, v.Err)
}

// Unwrap returns CheckInvariants' error, for errors.Is and errors.As.
func (v *Violation) Unwrap() error { return v.Err }

// MustHold panics with a *Violation when c's invariants do not hold after
// op (called with id, "" for none). Callers guard it with On, so that a
// build without the tag checks nothing.
func MustHold(table, op, id string, c Checker) {
	if err := c.CheckInvariants(); err != nil {
		if id != "" {
			op = fmt.Sprintf("%s(%q)", op, id)
		}
		panic(&Violation{Table: table, Op: op, Err: err})
	}
}
