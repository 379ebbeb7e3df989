package server

import (
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/invariants"
)

// The engine's lifecycle core is reached only through checked tables: the
// producer table through checkedProducerTable below (the type of
// Engine.table), the consumer receives through consumer.Receives (the
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

// checkedProducerTable is the producer table as the engine uses it.
type checkedProducerTable struct{ *handoff.ProducerTable }

// InvariantViolation is the value the engine panics with when a transition
// leaves a lifecycle table violating its invariants (-tags invariants):
// invariants.Violation, whose Table is "producer table" or "consumer
// receives".
type InvariantViolation = invariants.Violation

func (t checkedProducerTable) checked(op, id string) {
	if invariantsOn {
		invariants.MustHold("producer table", op, id, t.ProducerTable)
	}
}

// ---- producer table transitions ----

func (t checkedProducerTable) Reserve(id string, payloadBytes int64) error {
	err := t.ProducerTable.Reserve(id, payloadBytes)
	t.checked("Reserve", id)
	return err
}

func (t checkedProducerTable) CommitPublish(id string, expiresMs int64) error {
	err := t.ProducerTable.CommitPublish(id, expiresMs)
	t.checked("CommitPublish", id)
	return err
}

func (t checkedProducerTable) AbandonPublish(id string) {
	t.ProducerTable.AbandonPublish(id)
	t.checked("AbandonPublish", id)
}

func (t checkedProducerTable) Release(id string) handoff.ReleaseOutcome {
	out := t.ProducerTable.Release(id)
	t.checked("Release", id)
	return out
}

func (t checkedProducerTable) RemovalDone(id string, won bool) handoff.ReleaseOutcome {
	out := t.ProducerTable.RemovalDone(id, won)
	t.checked("RemovalDone", id)
	return out
}

func (t checkedProducerTable) RemovalFailed(id string) {
	t.ProducerTable.RemovalFailed(id)
	t.checked("RemovalFailed", id)
}

func (t checkedProducerTable) ObserveGone(id string) {
	t.ProducerTable.ObserveGone(id)
	t.checked("ObserveGone", id)
}

func (t checkedProducerTable) Expire(nowMs int64) []string {
	ids := t.ProducerTable.Expire(nowMs)
	t.checked("Expire", "")
	return ids
}

func (t checkedProducerTable) Collect(nowMs int64, m handoff.Mutants) []string {
	ids := t.ProducerTable.Collect(nowMs, m)
	t.checked("Collect", "")
	return ids
}

func (t checkedProducerTable) EncoderFailed(id string, m handoff.Mutants) bool {
	abandoned := t.ProducerTable.EncoderFailed(id, m)
	t.checked("EncoderFailed", id)
	return abandoned
}

func (t checkedProducerTable) ExpireBeforeRelease(refExpiresMs, nowMs int64) []string {
	ids := t.ProducerTable.ExpireBeforeRelease(refExpiresMs, nowMs)
	t.checked("ExpireBeforeRelease", "")
	return ids
}

func (t checkedProducerTable) Drain() []string {
	ids := t.ProducerTable.Drain()
	t.checked("Drain", "")
	return ids
}

func (t checkedProducerTable) ClaimForTransfer(id string) error {
	err := t.ProducerTable.ClaimForTransfer(id)
	t.checked("ClaimForTransfer", id)
	return err
}

func (t checkedProducerTable) TransferDone(id string) error {
	err := t.ProducerTable.TransferDone(id)
	t.checked("TransferDone", id)
	return err
}

func (t checkedProducerTable) TransferFailed(id string) error {
	err := t.ProducerTable.TransferFailed(id)
	t.checked("TransferFailed", id)
	return err
}

func (t checkedProducerTable) FailTransfer(ev handoff.TransferFailure, m handoff.Mutants) (handoff.TransferFailedDecision, error) {
	d, err := t.ProducerTable.FailTransfer(ev, m)
	t.checked("FailTransfer", ev.EntryID)
	return d, err
}
