package server

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// The engine's lifecycle core (handoff.ProducerTable, handoff.ConsumerReceives)
// is reached only through the two wrappers below, the types of Engine.table
// and Engine.receives: every transition the engine makes, under e.mu, goes
// through one of their methods. Built with -tags invariants (invariants_on.go;
// `make e2e-invariants`), each of them runs the core's CheckInvariants right
// after the transition, still under e.mu, and panics on a violation: the
// process crashes at the transition that broke the table instead of
// answering from it (what raft and TigerBeetle do with their assertions).
// Without the tag, invariantsOn is a constant false and each wrapper is a
// plain call of the core's method.
//
// Only transitions are wrapped; reads (Entries, Counters, State, ...) are the
// core's own methods, promoted through the embedded pointer. The tag also
// turns on the executor core's checks (execDriver.checkLocked), which
// Config.ExecutorInvariants turns on at run time.

// checkedProducerTable is the producer table as the engine uses it.
type checkedProducerTable struct{ *handoff.ProducerTable }

// checkedReceives is the consumer's receives table as the engine uses it.
type checkedReceives struct{ *handoff.ConsumerReceives }

// invariantChecker is a lifecycle table with CheckInvariants.
type invariantChecker interface{ CheckInvariants() error }

// InvariantViolation is the value the engine panics with when a transition
// leaves a lifecycle table violating its invariants (-tags invariants).
type InvariantViolation struct {
	// Table is "producer table" or "consumer receives".
	Table string
	// Op is the transition and the id it was called with:
	// `ClaimForTransfer("3f2a...")`, or `Drain`.
	Op string
	// Err is CheckInvariants' error.
	Err error
}

func (v *InvariantViolation) Error() string {
	return fmt.Sprintf("baton: invariant violated after %s on the %s: %v", v.Op, v.Table, v.Err)
}

func (v *InvariantViolation) Unwrap() error { return v.Err }

// mustHoldInvariants panics with an *InvariantViolation when c's invariants
// do not hold after op. Callers guard it with invariantsOn.
func mustHoldInvariants(table, op, id string, c invariantChecker) {
	if err := c.CheckInvariants(); err != nil {
		if id != "" {
			op = fmt.Sprintf("%s(%q)", op, id)
		}
		panic(&InvariantViolation{Table: table, Op: op, Err: err})
	}
}

func (t checkedProducerTable) checked(op, id string) {
	if invariantsOn {
		mustHoldInvariants("producer table", op, id, t.ProducerTable)
	}
}

func (c checkedReceives) checked(op, id string) {
	if invariantsOn {
		mustHoldInvariants("consumer receives", op, id, c.ConsumerReceives)
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

// ---- consumer receives transitions ----

func (c checkedReceives) Preflight(id string, payloadBytes int64) error {
	err := c.ConsumerReceives.Preflight(id, payloadBytes)
	c.checked("Preflight", id)
	return err
}

func (c checkedReceives) SetBuffers(id string, n int) error {
	err := c.ConsumerReceives.SetBuffers(id, n)
	c.checked("SetBuffers", id)
	return err
}

func (c checkedReceives) Registered(id string) error {
	err := c.ConsumerReceives.Registered(id)
	c.checked("Registered", id)
	return err
}

func (c checkedReceives) Requested(id string) error {
	err := c.ConsumerReceives.Requested(id)
	c.checked("Requested", id)
	return err
}

func (c checkedReceives) Succeeded(id string) error {
	err := c.ConsumerReceives.Succeeded(id)
	c.checked("Succeeded", id)
	return err
}

func (c checkedReceives) Rejected(id string) error {
	err := c.ConsumerReceives.Rejected(id)
	c.checked("Rejected", id)
	return err
}

func (c checkedReceives) Uncertain(id string) error {
	err := c.ConsumerReceives.Uncertain(id)
	c.checked("Uncertain", id)
	return err
}

func (c checkedReceives) EndQuarantine(id string) error {
	err := c.ConsumerReceives.EndQuarantine(id)
	c.checked("EndQuarantine", id)
	return err
}

func (c checkedReceives) EndTransfer(ev handoff.TransferEnded, m handoff.Mutants) (handoff.ReceiveDecision, error) {
	d, err := c.ConsumerReceives.EndTransfer(ev, m)
	c.checked("EndTransfer", ev.ReceiveID)
	return d, err
}

func (c checkedReceives) ClientCancelled(id string, m handoff.Mutants) (handoff.ReceiveDecision, bool, error) {
	d, ended, err := c.ConsumerReceives.ClientCancelled(id, m)
	c.checked("ClientCancelled", id)
	return d, ended, err
}

func (c checkedReceives) EndCopy(ev handoff.CopyEnded) (handoff.ReceiveDecision, error) {
	d, err := c.ConsumerReceives.EndCopy(ev)
	c.checked("EndCopy", ev.ReceiveID)
	return d, err
}
