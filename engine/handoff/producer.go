package handoff

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// EntryState is where a published output stands in the producer's table
// (CONTRACT section 2). Reserved, Published and Removing entries are live;
// the others are terminal and leave the table.
type EntryState int

// Entry states.
const (
	// EntryReserved: bytes reserved, storage being written; not yet visible to anyone.
	EntryReserved EntryState = iota + 1
	// EntryPublished: visible through its reference; may be claimed.
	EntryPublished
	// EntryRemoving: the producer is removing its storage (release, expiry, drain);
	// a consumer may still win the race for it.
	EntryRemoving
	// EntryConsumed: a consumer claimed it (terminal).
	EntryConsumed
	// EntryReleased: Abort(encoder_cache) or cancellation released it (terminal).
	EntryReleased
	// EntryExpired: its TTL passed and it was collected (terminal).
	EntryExpired
	// EntryTransferring: out of the table, a WRITE to a consumer in flight.
	EntryTransferring
	// EntryQuarantined: a transfer failed after the WRITE may have been posted;
	// the source buffers are never freed (terminal, Q-3).
	EntryQuarantined
)

var entryStateNames = map[EntryState]string{
	EntryReserved: "RESERVED", EntryPublished: "PUBLISHED", EntryRemoving: "REMOVING",
	EntryConsumed: "CONSUMED", EntryReleased: "RELEASED", EntryExpired: "EXPIRED",
	EntryTransferring: "TRANSFERRING", EntryQuarantined: "QUARANTINED",
}

func (s EntryState) String() string {
	if n, ok := entryStateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("EntryState(%d)", int(s))
}

// RemovalCause says why the producer removes an entry's storage; it decides the
// terminal state when the removal wins.
type RemovalCause int

// Removal causes.
const (
	CauseRelease RemovalCause = iota + 1 // Abort(encoder_cache) (SU-3) or a cancelled publish (C-7)
	CauseExpiry                          // TTL passed
	CauseDrain                           // shutdown releases unconsumed outputs (S-2)
)

// ReleaseOutcome is the answer to Abort(encoder_cache) (CONTRACT SU-3).
type ReleaseOutcome int

// Release outcomes.
const (
	// ReleaseRemove: the entry is live; remove its storage (RemoveStorage) and report
	// the result with RemovalDone, whose outcome is the answer.
	ReleaseRemove ReleaseOutcome = iota + 1
	// ReleaseAborted: this call released the entry (ABORTED).
	ReleaseAborted
	// ReleaseAlreadyFinished: the entry was already consumed, released or expired (ALREADY_FINISHED).
	ReleaseAlreadyFinished
	// ReleaseCleanupFailed: an earlier removal of the entry failed
	// (RemovalFailed), so its storage may still be there and claimable:
	// the release is answered with the X-1 failure (UNAVAILABLE), never
	// ALREADY_FINISHED, which would tell the client the entry is spent
	// while a consumer can still claim it (SU-2, SU-3). Found by the
	// simulator (seed 192999).
	ReleaseCleanupFailed
	// ReleaseWait: the entry's storage is being removed (an earlier
	// release, its expiry or the drain moved it to Removing) and the
	// removal has not ended: a consumer may still win the race for the
	// storage (its claim by rename lands first) or the removal may fail
	// (X-1, the storage stays claimable). No answer is true yet, so the
	// caller answers nothing now: it waits until the removal ended
	// (RemovalDone or RemovalFailed was called for the entry), then calls
	// Release again, which answers ReleaseAlreadyFinished or
	// ReleaseCleanupFailed. Answering ALREADY_FINISHED at once told the
	// client the reference was spent while a consumer could still claim
	// it (SU-2, SU-3). Found by the simulator (seeds 576264, 954255).
	ReleaseWait
)

// ProducerConfig bounds the producer's table.
type ProducerConfig struct {
	// QuotaBytes bounds the payload bytes held by live entries (CONTRACT L-5). 0 means no bound.
	QuotaBytes int64
	// DefaultTTLMs is the TTL of an entry published without EncoderPublish.ttl_ms.
	DefaultTTLMs int64
	// MaxTTLMs caps a requested TTL.
	MaxTTLMs int64
}

// ProducerCounters are the producer's lifetime counters. Every entry published
// ends in exactly one of Consumed, Released, Expired (CONTRACT section 2).
type ProducerCounters struct {
	Published, Consumed, Released, Expired, Quarantined, Abandoned uint64
	// QuarantinedBytes is the payload of entries whose source buffers were
	// quarantined after a failed transfer.
	QuarantinedBytes int64
}

type producerEntry struct {
	id           string
	payloadBytes int64
	expiresMs    int64
	state        EntryState
	cause        RemovalCause
	// prev and next link the table's live entries (ProducerTable.live).
	prev, next *producerEntry
}

// ProducerTable is the producer's table of published encoder outputs: a pure
// state machine (no goroutines, no clock, no I/O). The caller owns storage:
// it writes after Reserve, removes when told to, and reports what it saw.
//
// Ordering contracts for the caller:
//   - Reserve BEFORE writing storage; CommitPublish only AFTER the storage is
//     durable under its final name; AbandonPublish if writing failed or the
//     request was cancelled first (C-1, C-7).
//   - On ReleaseRemove or a Removal returned by Expire/Drain: remove the storage,
//     THEN call RemovalDone with whether this producer's removal won.
//   - ObserveGone when the storage of a Published entry is found missing (a
//     consumer claimed it: shared-directory backend).
type ProducerTable struct {
	cfg       ProducerConfig
	entries   map[string]*producerEntry
	transfers map[string]*producerEntry // removed from entries BEFORE the WRITE is posted
	heldBytes int64
	counters  ProducerCounters
	// version counts the changes made by mutating methods (Version).
	version uint64
	// failedRemovals are the entries whose removal failed (RemovalFailed).
	failedRemovals map[string]struct{}
	// live and liveTail are the first and last of the live entries (those
	// of entries and transfers), linked in the order they were reserved:
	// the walks over every live entry (CheckInvariants, Expire, Drain,
	// AppendPublished, PendingRemovals) follow the links, not the maps (a
	// map walk cost several times as much: the simulator checks the
	// invariants after every step that changed the table).
	live, liveTail *producerEntry
	// slab allocates the entries.
	slab slab[producerEntry]
}

// Version counts the calls of the table's mutating methods (Reserve,
// CommitPublish, AbandonPublish, Release, RemovalDone, RemovalFailed,
// ObserveGone, Drain, ClaimForTransfer, TransferDone, TransferFailed,
// Expire) that changed it: a call that returns before changing anything (a
// rejected Reserve, a Release of an entry that is not live, a collector
// pass that expired nothing) leaves it as it was. While it is unchanged the
// table is, so a caller that checks invariants after every step (the
// simulator) may skip an unchanged table.
func (t *ProducerTable) Version() uint64 { return t.version }

// NewProducerTable returns an empty table.
func NewProducerTable(cfg ProducerConfig) *ProducerTable {
	return &ProducerTable{cfg: cfg, entries: map[string]*producerEntry{}} // transfers: made at the first transfer (a table may never transfer)
}

// Reset empties t for reuse under cfg: from then on it is the table
// NewProducerTable(cfg) returns, but its maps keep their storage (the
// simulator starts a table every run). Everything t held before is
// forgotten.
func (t *ProducerTable) Reset(cfg ProducerConfig) {
	entries, transfers, failed := t.entries, t.transfers, t.failedRemovals
	clear(entries)
	clear(transfers)
	clear(failed)
	*t = ProducerTable{cfg: cfg, entries: entries, transfers: transfers, failedRemovals: failed}
	if t.entries == nil {
		t.entries = map[string]*producerEntry{}
	}
}

// Reserve claims payloadBytes of the quota for a new entry id before its storage
// is written. Errors: ErrQuotaExceeded (L-5, nothing reserved), ErrBadRequest
// for an invalid or duplicate id.
func (t *ProducerTable) Reserve(id string, payloadBytes int64) error {
	if !ValidEntryID(id) {
		return rejectf(ErrBadRequest, "entry id %q is not 32 lowercase hex digits", id)
	}
	if _, busy := t.transfers[id]; busy {
		return rejectS(ErrBadRequest, "entry id ", id, " is being transferred", false)
	}
	if _, dup := t.entries[id]; dup {
		return rejectS(ErrBadRequest, "entry id ", id, " already in the table", false)
	}
	if payloadBytes <= 0 {
		return rejectf(ErrBadRequest, "payload of %d bytes", payloadBytes)
	}
	if t.cfg.QuotaBytes > 0 && t.heldBytes+payloadBytes > t.cfg.QuotaBytes {
		return rejectf(ErrQuotaExceeded, "L-5 publishing %d bytes would hold %d of %d", payloadBytes, t.heldBytes+payloadBytes, t.cfg.QuotaBytes)
	}
	t.version++
	e := t.slab.new()
	*e = producerEntry{id: id, payloadBytes: payloadBytes, state: EntryReserved, prev: t.liveTail}
	if t.liveTail != nil {
		t.liveTail.next = e
	} else {
		t.live = e
	}
	t.liveTail = e
	t.entries[id] = e
	t.heldBytes += payloadBytes
	return nil
}

// TTL returns the TTL in ms an entry gets for a requested ttl_ms (0 = default),
// capped at MaxTTLMs.
func (t *ProducerTable) TTL(requestedMs int64) int64 {
	ttl := requestedMs
	if ttl <= 0 {
		ttl = t.cfg.DefaultTTLMs
	}
	if t.cfg.MaxTTLMs > 0 && ttl > t.cfg.MaxTTLMs {
		ttl = t.cfg.MaxTTLMs
	}
	return ttl
}

// CommitPublish makes a Reserved entry Published, expiring at expiresMs.
func (t *ProducerTable) CommitPublish(id string, expiresMs int64) error {
	e, ok := t.entries[id]
	if !ok || e.state != EntryReserved {
		return fmt.Errorf("handoff: commit of %s which is not reserved", id)
	}
	t.version++
	e.state = EntryPublished
	e.expiresMs = expiresMs
	t.counters.Published++
	return nil
}

// AbandonPublish drops a Reserved entry whose storage was never made visible
// (write failed, request cancelled before publication: C-1, C-6). It returns
// its bytes to the quota.
func (t *ProducerTable) AbandonPublish(id string) {
	e, ok := t.entries[id]
	if !ok || e.state != EntryReserved {
		return
	}
	t.version++
	t.drop(e)
	t.counters.Abandoned++
}

// Release decides Abort(encoder_cache=ref) for a reference whose tag verified
// (CONTRACT SU-3). A live Published entry moves to Removing and the answer is
// ReleaseRemove; anything not live (consumed, released, expired, unknown to
// this table, or out of the table for a transfer) is
// ReleaseAlreadyFinished, or ReleaseCleanupFailed after its removal failed
// . An entry already being removed (by an earlier release, expiry or
// drain) is ReleaseWait: this call did not release it, and whether the
// entry is spent is known only once that removal ends; the caller asks
// again then, and the answer is ReleaseAlreadyFinished (or
// ReleaseCleanupFailed), never ReleaseAborted.
func (t *ProducerTable) Release(id string) ReleaseOutcome {
	e, ok := t.entries[id]
	if ok && e.state == EntryRemoving {
		return ReleaseWait
	}
	if !ok || e.state != EntryPublished {
		if _, failed := t.failedRemovals[id]; failed {
			return ReleaseCleanupFailed
		}
		return ReleaseAlreadyFinished
	}
	t.version++
	e.state = EntryRemoving
	e.cause = CauseRelease
	return ReleaseRemove
}

// RemovalDone reports the result of removing an entry's storage. won is true
// when the producer's removal took the storage (it existed), false when it was
// already gone (a consumer claimed it first: CONSUMED). It returns the answer
// for a release: ReleaseAborted when the release won, ReleaseAlreadyFinished otherwise.
func (t *ProducerTable) RemovalDone(id string, won bool) ReleaseOutcome {
	e, ok := t.entries[id]
	if !ok || e.state != EntryRemoving {
		return ReleaseAlreadyFinished
	}
	t.version++
	t.drop(e)
	if !won {
		t.counters.Consumed++
		return ReleaseAlreadyFinished
	}
	switch e.cause {
	case CauseExpiry:
		t.counters.Expired++
	default:
		t.counters.Released++
	}
	if e.cause == CauseRelease {
		return ReleaseAborted
	}
	return ReleaseAlreadyFinished
}

// RemovalFailed reports that removing an entry's storage failed with an I/O
// error. The entry leaves the table (its bytes are no longer counted as
// published) and the caller must mark the cleanup failure on its Health.
func (t *ProducerTable) RemovalFailed(id string) {
	e, ok := t.entries[id]
	if !ok || e.state != EntryRemoving {
		return
	}
	t.version++
	t.drop(e)
	t.counters.Released++
	if t.failedRemovals == nil {
		t.failedRemovals = map[string]struct{}{}
	}
	t.failedRemovals[id] = struct{}{}
}

// ObserveGone reports that the storage of entry id was found missing while it
// was Published: a consumer claimed it (shared-directory backend), so it is CONSUMED.
func (t *ProducerTable) ObserveGone(id string) {
	e, ok := t.entries[id]
	if !ok || e.state != EntryPublished {
		return
	}
	t.version++
	t.drop(e)
	t.counters.Consumed++
}

// Expire moves every Published entry whose expiry is at or before nowMs to
// Removing and returns their ids, sorted. The caller removes each and calls
// RemovalDone (CONTRACT X-2).
func (t *ProducerTable) Expire(nowMs int64) []string {
	var ids []string
	for e := t.live; e != nil; e = e.next {
		if e.state == EntryPublished && e.expiresMs <= nowMs {
			e.state = EntryRemoving
			e.cause = CauseExpiry
			ids = append(ids, e.id)
		}
	}
	if len(ids) > 0 {
		t.version++ // a pass that expired nothing left the table as it was
	}
	slices.Sort(ids)
	return ids
}

// EntryID is the id of a new entry: random, the driver's 128 random bits
// as 32 hex digits (SU-5, SU-6). Under Mutants.EntryIDFromContent (breaks
// SU-6) it is derived from content, the driver's text of what the publish
// carries (its items' content hashes), so the same media get the same id.
func EntryID(random, content string, m Mutants) string {
	if !m.EntryIDFromContent {
		return random
	}
	sum := sha256.Sum256([]byte("su6-mutant\x00" + content)) // the SU-6 mutant
	return hex.EncodeToString(sum[:16])
}

// EncoderFailed ends a Reserved publish whose encoder step failed (C-6):
// it abandons it (AbandonPublish: the reserved bytes and the table entry
// go) and reports true. Under Mutants.KeepReservationOnEncoderFailure
// (breaks C-6) it keeps both and reports false.
func (t *ProducerTable) EncoderFailed(id string, m Mutants) (abandoned bool) {
	if m.KeepReservationOnEncoderFailure {
		return false // the C-6 mutant
	}
	t.AbandonPublish(id)
	return true
}

// DrainDone reports whether a draining producer may stop (S-2, S-4): no
// entry is left in its table (the removals the drain started ended),
// removalsPending (the driver's removals not yet reported) is 0 and no
// publish is in flight (publishing). Under Mutants.DrainBeforeCleanup
// (breaks S-2) the removals do not count: it may stop once no entry is
// published and no publish is in flight.
func (t *ProducerTable) DrainDone(removalsPending, publishing int, m Mutants) bool {
	if m.DrainBeforeCleanup {
		return len(t.Published()) == 0 && publishing == 0 // the S-2 mutant
	}
	return t.Entries() == 0 && removalsPending == 0 && publishing == 0
}

// Collect is the expiry step of one pass of the producer's collector
// Expire at nowMs, or nothing under Mutants.NoExpiryCollection
// (breaks X-2).
func (t *ProducerTable) Collect(nowMs int64, m Mutants) []string {
	if m.NoExpiryCollection {
		return nil // the X-2 mutant
	}
	return t.Expire(nowMs)
}

// AnswerRelease is the answer an Abort(encoder_cache) gives for the
// outcome the table decided (SU-3): ABORTED only when this call released
// the entry (ReleaseAborted), ALREADY_FINISHED (ReleaseAlreadyFinished)
// after. Under Mutants.ReleaseAlwaysAborted (breaks SU-3) every
// ALREADY_FINISHED is answered ABORTED.
func AnswerRelease(out ReleaseOutcome, m Mutants) ReleaseOutcome {
	if out == ReleaseAlreadyFinished && m.ReleaseAlwaysAborted {
		return ReleaseAborted // the SU-3 mutant
	}
	return out
}

// ExpireBeforeRelease is the producer's first step of an
// Abort(encoder_cache) (SU-3, X-2): when the presented reference's TTL
// (refExpiresMs) has passed at nowMs, every entry expired by then is
// expired now (Expire) and returned for the caller to remove, so the
// Release that follows answers ALREADY_FINISHED (once the removal ended:
// ReleaseWait), never ABORTED, for an entry a consumer may already have
// been refused as expired (SU-2). Before the TTL it changes nothing and
// returns nil. Found by the simulator's history check.
func (t *ProducerTable) ExpireBeforeRelease(refExpiresMs, nowMs int64) []string {
	if nowMs < refExpiresMs {
		return nil
	}
	return t.Expire(nowMs)
}

// Drain moves every Published entry to Removing for shutdown (CONTRACT S-2) and
// returns their ids, sorted.
func (t *ProducerTable) Drain() []string {
	t.version++
	var ids []string
	for e := t.live; e != nil; e = e.next {
		if e.state == EntryPublished {
			e.state = EntryRemoving
			e.cause = CauseDrain
			ids = append(ids, e.id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Published returns the ids of Published entries, sorted (for the caller's
// look at which of them consumers have claimed).
func (t *ProducerTable) Published() []string { return t.AppendPublished(nil) }

// AppendPublished is Published appending to dst (so a caller that looks
// often can reuse one slice): dst with the Published ids appended, those
// sorted.
func (t *ProducerTable) AppendPublished(dst []string) []string {
	n := len(dst)
	for e := t.live; e != nil; e = e.next {
		if e.state == EntryPublished {
			dst = append(dst, e.id)
		}
	}
	slices.Sort(dst[n:])
	return dst
}

// State returns the state of a live entry, or 0 when id is not in the table.
func (t *ProducerTable) State(id string) EntryState {
	if e, ok := t.entries[id]; ok {
		return e.state
	}
	return 0
}

// Entries is the number of live entries (reserved, published, being removed or transferred):
// the `encoder.exports.entries` observable (CONTRACT section 4).
func (t *ProducerTable) Entries() int { return len(t.entries) + len(t.transfers) }

// HeldBytes is the payload bytes of live entries: `encoder.exports.bytes`.
func (t *ProducerTable) HeldBytes() int64 { return t.heldBytes }

// PendingRemovals is the number of entries being removed: part of `encoder.cleanup.pending`.
func (t *ProducerTable) PendingRemovals() int {
	n := 0
	for e := t.live; e != nil; e = e.next {
		if e.state == EntryRemoving {
			n++
		}
	}
	return n
}

// Counters returns the lifetime counters.
func (t *ProducerTable) Counters() ProducerCounters { return t.counters }

func (t *ProducerTable) drop(e *producerEntry) {
	delete(t.entries, e.id)
	t.unlink(e)
	t.heldBytes -= e.payloadBytes
}

// unlink takes e, which left the table, out of the live entries.
func (t *ProducerTable) unlink(e *producerEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		t.live = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		t.liveTail = e.prev
	}
	e.prev, e.next = nil, nil
}

// ClaimForTransfer takes a Published entry OUT of the table for a
// TransferEncoderCache WRITE (CONTRACT Q-3: the producer removes the entry
// BEFORE it posts the WRITE, so no second claim, release or expiry can touch
// it). From here the caller must end it with TransferDone or TransferFailed.
// Error: ErrSpentReference (SU-2) when the entry is not Published (consumed,
// released, expired, being removed or transferred); the caller answers
// INVALID_ARGUMENT with the trailer `baton-transfer-rejected: before-write`.
func (t *ProducerTable) ClaimForTransfer(id string) error {
	e, ok := t.entries[id]
	if !ok || e.state != EntryPublished {
		return rejectS(ErrSpentReference, "SU-2 entry ", id, " is not published (consumed, released, expired or in transfer)", false)
	}
	t.version++
	delete(t.entries, id)
	e.state = EntryTransferring
	if t.transfers == nil {
		t.transfers = map[string]*producerEntry{}
	}
	t.transfers[id] = e
	return nil
}

// TransferDone ends a transfer whose WRITE completed: the entry is CONSUMED
// and its source buffers may be freed.
func (t *ProducerTable) TransferDone(id string) error {
	e, ok := t.transfers[id]
	if !ok {
		return fmt.Errorf("handoff: transfer %s is not in flight", id)
	}
	t.version++
	delete(t.transfers, id)
	t.unlink(e)
	t.heldBytes -= e.payloadBytes
	t.counters.Consumed++
	return nil
}

// TransferFailed ends a transfer that failed AFTER the entry left the table
// the entry stays spent and the caller's answer must never be
// INVALID_ARGUMENT (the WRITE may have been posted). What happens to the
// source buffers (freed once the WRITE provably ended, else quarantined
// until it does, or for good) and to Health is
// FailTransfer's decision, which calls this; drivers call FailTransfer.
func (t *ProducerTable) TransferFailed(id string) error {
	e, ok := t.transfers[id]
	if !ok {
		return fmt.Errorf("handoff: transfer %s is not in flight", id)
	}
	t.version++
	delete(t.transfers, id)
	t.unlink(e)
	t.heldBytes -= e.payloadBytes
	t.counters.Quarantined++
	t.counters.QuarantinedBytes += e.payloadBytes
	return nil
}

// Transfers is the number of transfers in flight.
func (t *ProducerTable) Transfers() int { return len(t.transfers) }

// CheckInvariants verifies the table (ARCHITECTURE.md "Invariant checks are code"):
//  1. held bytes equal the sum of live entries' payloads and stay within the quota;
//  2. only live states are in the table;
//  3. every committed publish is live or ended exactly once:
//     Published == Consumed + Released + Expired + live non-reserved entries.
func (t *ProducerTable) CheckInvariants() error {
	// The walk is over the live list; that it lists exactly the maps'
	// entries is checked too: each listed entry is its map's entry for its
	// id (so listed entries fill distinct map slots), and there are as many
	// listed as the maps hold.
	var sum int64
	live := uint64(0)
	n, held := 0, len(t.entries)+len(t.transfers)
	var prev *producerEntry
	for e := t.live; e != nil; e = e.next {
		if n++; n > held {
			return fmt.Errorf("handoff: more entries listed live than the table's %d", held)
		}
		if e.prev != prev {
			return fmt.Errorf("handoff: live list broken at entry %s", e.id)
		}
		prev = e
		in := t.entries
		switch e.state {
		case EntryReserved:
		case EntryPublished, EntryRemoving:
			live++
		case EntryTransferring:
			if _, dup := t.entries[e.id]; dup {
				return fmt.Errorf("handoff: Q-3 entry %s both in the table and in transfer", e.id)
			}
			in = t.transfers
			live++
		default:
			return fmt.Errorf("handoff: terminal entry %s (%v) still in the table", e.id, e.state)
		}
		if in[e.id] != e {
			return fmt.Errorf("handoff: live entry %s (%v) is not the table's entry for its id", e.id, e.state)
		}
		sum += e.payloadBytes
	}
	if prev != t.liveTail || n != held {
		return fmt.Errorf("handoff: %d entries listed live, the table holds %d", n, held)
	}
	if sum != t.heldBytes {
		return fmt.Errorf("handoff: held bytes %d, entries sum to %d", t.heldBytes, sum)
	}
	if t.cfg.QuotaBytes > 0 && t.heldBytes > t.cfg.QuotaBytes {
		return fmt.Errorf("handoff: L-5 held bytes %d over quota %d", t.heldBytes, t.cfg.QuotaBytes)
	}
	c := t.counters
	if c.Published != c.Consumed+c.Released+c.Expired+c.Quarantined+live {
		return fmt.Errorf("handoff: SU-1 published %d != consumed %d + released %d + expired %d + quarantined %d + live %d",
			c.Published, c.Consumed, c.Released, c.Expired, c.Quarantined, live)
	}
	return nil
}
