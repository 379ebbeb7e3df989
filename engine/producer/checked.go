package producer

import "github.com/baton-dev/baton/engine/handoff"

// The transitions of handoff.ProducerTable, each checked after it (-tags
// invariants). engine/server's TestCheckedTablesWrapEveryTransition fails
// when the core gains a transition that is not wrapped here (or listed as
// a read there).

// ---- producer table transitions ----

func (t *Table) Reserve(id string, payloadBytes int64) error {
	err := t.ProducerTable.Reserve(id, payloadBytes)
	t.checked("Reserve", id)
	return err
}

func (t *Table) CommitPublish(id string, expiresMs int64) error {
	err := t.ProducerTable.CommitPublish(id, expiresMs)
	t.checked("CommitPublish", id)
	return err
}

func (t *Table) AbandonPublish(id string) {
	t.ProducerTable.AbandonPublish(id)
	t.checked("AbandonPublish", id)
}

func (t *Table) Release(id string) handoff.ReleaseOutcome {
	out := t.ProducerTable.Release(id)
	t.checked("Release", id)
	return out
}

func (t *Table) RemovalDone(id string, won bool) handoff.ReleaseOutcome {
	out := t.ProducerTable.RemovalDone(id, won)
	t.checked("RemovalDone", id)
	return out
}

func (t *Table) RemovalFailed(id string) {
	t.ProducerTable.RemovalFailed(id)
	t.checked("RemovalFailed", id)
}

func (t *Table) ObserveGone(id string) {
	t.ProducerTable.ObserveGone(id)
	t.checked("ObserveGone", id)
}

func (t *Table) Expire(nowMs int64) []string {
	ids := t.ProducerTable.Expire(nowMs)
	t.checked("Expire", "")
	return ids
}

func (t *Table) Collect(nowMs int64, m handoff.Mutants) []string {
	ids := t.ProducerTable.Collect(nowMs, m)
	t.checked("Collect", "")
	return ids
}

func (t *Table) EncoderFailed(id string, m handoff.Mutants) bool {
	abandoned := t.ProducerTable.EncoderFailed(id, m)
	t.checked("EncoderFailed", id)
	return abandoned
}

func (t *Table) ExpireBeforeRelease(refExpiresMs, nowMs int64) []string {
	ids := t.ProducerTable.ExpireBeforeRelease(refExpiresMs, nowMs)
	t.checked("ExpireBeforeRelease", "")
	return ids
}

func (t *Table) Drain() []string {
	ids := t.ProducerTable.Drain()
	t.checked("Drain", "")
	return ids
}

func (t *Table) ClaimForTransfer(id string) error {
	err := t.ProducerTable.ClaimForTransfer(id)
	t.checked("ClaimForTransfer", id)
	return err
}

func (t *Table) TransferDone(id string) error {
	err := t.ProducerTable.TransferDone(id)
	t.checked("TransferDone", id)
	return err
}

func (t *Table) TransferFailed(id string) error {
	err := t.ProducerTable.TransferFailed(id)
	t.checked("TransferFailed", id)
	return err
}

func (t *Table) FailTransfer(ev handoff.TransferFailure, m handoff.Mutants) (handoff.TransferFailedDecision, error) {
	d, err := t.ProducerTable.FailTransfer(ev, m)
	t.checked("FailTransfer", ev.EntryID)
	return d, err
}
