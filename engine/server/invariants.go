package server

import "github.com/baton-dev/baton/engine/invariants"

// The engine's lifecycle core is reached only through checked tables: the
// producer table through producer.Table (the type of Engine.table,
// engine/producer), the consumer receives through consumer.Receives (the
// type of Engine.receives, engine/consumer). Every transition the engine
// makes, under e.mu, goes through one of their methods. Built with -tags
// invariants (engine/invariants; `make e2e-invariants`), each of them runs
// the core's CheckInvariants right after the transition, still under
// e.mu, and panics with an *InvariantViolation: the process crashes at the
// transition that broke the table instead of answering from it (what raft
// and TigerBeetle do with their assertions). Without the tag,
// invariantsOn is a constant false and each wrapper is a plain call of the
// core's method.
//
// Only transitions are wrapped; reads (Entries, Counters, State, ...) are the
// core's own methods, promoted through the embedded pointer. The tag also
// turns on the executor core's checks (execDriver.checkLocked), which
// Config.ExecutorInvariants turns on at run time.

// invariantsOn is invariants.On: true when built with -tags invariants.
const invariantsOn = invariants.On

// InvariantViolation is the value the engine panics with when a transition
// leaves a lifecycle table violating its invariants (-tags invariants):
// invariants.Violation, whose Table is "producer table" or "consumer
// receives".
type InvariantViolation = invariants.Violation
