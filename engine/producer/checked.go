package producer

import "github.com/baton-dev/baton/engine/handoff"

// The transitions of handoff.ProducerTable, each checked after it (-tags
// invariants). engine/server's TestCheckedTablesWrapEveryTransition fails
// when the core gains a transition that is not wrapped here (or listed as
// a read there).

// ---- producer table transitions ----

// Reset empties the table for reuse under cfg, its maps kept
// (handoff.ProducerTable.Reset), checked.
func (t *Table) Reset(cfg handoff.ProducerConfig) {
	t.ProducerTable.Reset(cfg)
	t.checked("Reset", "")
}

// Reserve claims payloadBytes (bytes) of the quota for a new entry id before
// its storage is written (handoff.ProducerTable.Reserve, checked). Errors:
// handoff.ErrQuotaExceeded (CONTRACT L-5, RESOURCE_EXHAUSTED; nothing
// reserved), handoff.ErrBadRequest for an invalid or duplicate id.
func (t *Table) Reserve(id string, payloadBytes int64) error {
	err := t.ProducerTable.Reserve(id, payloadBytes)
	t.checked("Reserve", id)
	return err
}

// CommitPublish makes the Reserved entry id Published, expiring at expiresMs
// (ms on the table's clock), checked. Error: id is not Reserved (a driver bug).
func (t *Table) CommitPublish(id string, expiresMs int64) error {
	err := t.ProducerTable.CommitPublish(id, expiresMs)
	t.checked("CommitPublish", id)
	return err
}

// AbandonPublish drops the Reserved entry id whose storage was never made
// visible and returns its bytes to the quota (CONTRACT C-1, C-6), checked.
func (t *Table) AbandonPublish(id string) {
	t.ProducerTable.AbandonPublish(id)
	t.checked("AbandonPublish", id)
}

// Release decides Abort(encoder_cache=ref) for a tag-verified reference
// (CONTRACT SU-3, X-1), checked: ReleaseRemove for a live Published entry (now
// Removing), ReleaseWait while another removal of it is in flight,
// ReleaseAlreadyFinished or ReleaseCleanupFailed otherwise.
func (t *Table) Release(id string) handoff.ReleaseOutcome {
	out := t.ProducerTable.Release(id)
	t.checked("Release", id)
	return out
}

// RemovalDone reports the end of the removal of entry id's storage (won: the
// removal took the storage; false: a consumer claimed it first), checked. It
// returns the release's answer: ReleaseAborted when a release won,
// ReleaseAlreadyFinished otherwise.
func (t *Table) RemovalDone(id string, won bool) handoff.ReleaseOutcome {
	out := t.ProducerTable.RemovalDone(id, won)
	t.checked("RemovalDone", id)
	return out
}

// RemovalFailed reports that removing entry id's storage failed (CONTRACT X-1):
// the entry leaves the table and the caller must mark the cleanup failure on
// Health. Checked.
func (t *Table) RemovalFailed(id string) {
	t.ProducerTable.RemovalFailed(id)
	t.checked("RemovalFailed", id)
}

// ObserveGone reports that the Published entry id's storage was found missing:
// a consumer claimed it (shared_dir), so it is CONSUMED. Checked.
func (t *Table) ObserveGone(id string) {
	t.ProducerTable.ObserveGone(id)
	t.checked("ObserveGone", id)
}

// Expire moves every Published entry expiring at or before nowMs (ms) to
// Removing and returns their ids, sorted, for the caller to remove (CONTRACT
// Checked.
func (t *Table) Expire(nowMs int64) []string {
	ids := t.ProducerTable.Expire(nowMs)
	t.checked("Expire", "")
	return ids
}

// Collect is the expiry step of one collector pass at nowMs (CONTRACT X-2):
// Expire, or nothing under Mutants.NoExpiryCollection. It returns the ids to
// remove. Checked.
func (t *Table) Collect(nowMs int64, m handoff.Mutants) []string {
	ids := t.ProducerTable.Collect(nowMs, m)
	t.checked("Collect", "")
	return ids
}

// EncoderFailed ends the Reserved publish id whose encoder step failed
// (CONTRACT C-6): it abandons the entry and its reserved bytes and reports
// true; under Mutants.KeepReservationOnEncoderFailure it keeps both and reports
// false. Checked.
func (t *Table) EncoderFailed(id string, m handoff.Mutants) bool {
	abandoned := t.ProducerTable.EncoderFailed(id, m)
	t.checked("EncoderFailed", id)
	return abandoned
}

// ExpireBeforeRelease is an Abort(encoder_cache)'s first step (CONTRACT SU-3,
// once the reference's TTL (refExpiresMs) has passed at nowMs it expires
// every entry due by then and returns their ids to remove; before, it returns
// nil. Checked.
func (t *Table) ExpireBeforeRelease(refExpiresMs, nowMs int64) []string {
	ids := t.ProducerTable.ExpireBeforeRelease(refExpiresMs, nowMs)
	t.checked("ExpireBeforeRelease", "")
	return ids
}

// Drain moves every Published entry to Removing for shutdown (CONTRACT S-2) and
// returns their ids, sorted. Checked.
func (t *Table) Drain() []string {
	ids := t.ProducerTable.Drain()
	t.checked("Drain", "")
	return ids
}

// ClaimForTransfer takes the Published entry id out of the table before the
// WRITE is posted (CONTRACT Q-3); the caller must end it with TransferDone or
// FailTransfer. Error: handoff.ErrSpentReference (SU-2, INVALID_ARGUMENT with
// the before-write trailer) when id is not Published. Checked.
func (t *Table) ClaimForTransfer(id string) error {
	err := t.ProducerTable.ClaimForTransfer(id)
	t.checked("ClaimForTransfer", id)
	return err
}

// TransferDone ends the transfer of id whose WRITE completed: the entry is
// CONSUMED and its source may be freed. Error: id is not in transfer (a driver
// bug). Checked.
func (t *Table) TransferDone(id string) error {
	err := t.ProducerTable.TransferDone(id)
	t.checked("TransferDone", id)
	return err
}

// TransferFailed ends the transfer of id that failed after the claim (CONTRACT
// the entry stays spent. Drivers call FailTransfer, which calls this.
// Error: id is not in transfer (a driver bug). Checked.
func (t *Table) TransferFailed(id string) error {
	err := t.ProducerTable.TransferFailed(id)
	t.checked("TransferFailed", id)
	return err
}

// FailTransfer decides what follows a transfer failed after the claim (CONTRACT
// free the source only when the WRITE provably ended, else
// quarantine it; the answer is UNAVAILABLE, never INVALID_ARGUMENT. Mutants m
// replace the decision by broken ones. Error: ev.EntryID is not in transfer (a
// driver bug); the decision is returned all the same. Checked.
func (t *Table) FailTransfer(ev handoff.TransferFailure, m handoff.Mutants) (handoff.TransferFailedDecision, error) {
	d, err := t.ProducerTable.FailTransfer(ev, m)
	t.checked("FailTransfer", ev.EntryID)
	return d, err
}
