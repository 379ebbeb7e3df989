package world

import (
	"fmt"

	"github.com/baton-dev/baton/engine/xfer"
)

// EntryRecord is the ground truth about one entry: what really happened to
// its storage, independent of what the core's tables or the clients believe.
// Whoever changes its Consumptions, OkCalls, Aborted, RemovedCause,
// Abandoned or Published calls its ledger's Touch.
type EntryRecord struct {
	Id string
	// Instance is the producer instance that reserved it (its directory).
	Instance     string
	H            int
	PayloadBytes int64
	ExpiresMs    int64
	// CommittedMs is the tick of CommitPublish (a slow write commits an
	// entry whose expiry was computed before it, possibly already past).
	CommittedMs int64
	Published   bool
	Abandoned   bool
	// Consumptions lists every receive that really got the entry's data
	// (a won rename, a read, a WRITE that landed), in order.
	Consumptions []string
	// RemovedCause is set when a producer removal WON (the storage was there).
	RemovedCause string
	RemoveFailed bool // a removal of the entry failed
	Vanished     bool
	Quarantined  bool // its source was quarantined after a failed transfer
	// OkCalls are the (client, call) pairs whose consume answer OK reached
	// a client; aborted counts the ABORTED answers given.
	OkCalls [][2]int64
	Aborted int
	// CancelledBeforeReady: the publish's stream was cancelled before its
	// encoder step completed, yet the entry was published (only a broken
	// driver does that, C-2); readyUndelivered: its EncoderReady was never
	// delivered (a cancelled stream or a failed send), so nobody holds its
	// reference (C-3, C-7).
	CancelledBeforeReady, ReadyUndelivered bool
	// sealedTag caches the real tag of the entry's sealed reference (reference.go).
	sealedTag string
	// Media is the entry's items as published (media.go; nil without media).
	Media *PublishedMedia
	// touched: the entry is on its ledger's Touched list (Ledger.Touch).
	touched bool
}

// Terminal reports whether the entry has ended (CONTRACT section 2).
func (e *EntryRecord) Terminal() bool {
	return e.Abandoned || len(e.Consumptions) > 0 || e.RemovedCause != "" || e.RemoveFailed || e.Vanished || e.Quarantined
}

// ledger maps entry ids to their ground truth; all lists them in the order
// they were reserved, so checks run in a deterministic order.
type ledger struct {
	Entries map[string]*EntryRecord
	All     []*EntryRecord
	// recs is where add allocates records, a block at a time (never
	// grown in place: records are referred to by pointer).
	recs []EntryRecord
	// consumptions is where AddConsumption takes the records' first
	// consumptions, a block at a time.
	consumptions []string
	// okCalls is where AddOkCall takes the records' first OK calls.
	okCalls [][2]int64
	// last is the record Get or Add gave last: a step's handlers look the
	// same entry up several times in a row (a consume: its check, its
	// claim, its media), and a map lookup each was most of Get's cost.
	// Add, which alone changes Entries, keeps it Entries[last.Id].
	last *EntryRecord
	// Publications counts the records set Published (sim/nodes bumps it
	// with each): X-2's scan is skipped while it and the earliest due
	// expiry it last saw say nothing new can be overdue (check_answers.go).
	Publications int
	// RemoveFailures counts removals that failed with an I/O error.
	RemoveFailures int
	// Cancelled lists the entries whose publish was cancelled or whose
	// EncoderReady was never delivered, for the C-2 and C-3 checks.
	Cancelled []*EntryRecord
	// Touched lists, once each, the entries whose Consumptions, OkCalls,
	// Aborted, RemovedCause, Abandoned or Published changed since the
	// SU-1/SU-3 step check last looked (Touch, Untouch): only they can
	// have come to break those rules (check_singleuse.go's checkEntries).
	Touched []*EntryRecord

	// ---- what the answer checks judge once each (check_answers.go) ----

	// Reused lists (earlier, later) entries reserved under one id (SU-6).
	Reused [][2]*EntryRecord
	// Unpublished lists the publishes that ended before publication, with
	// the rule under which they did (C-6 encoder failure, C-1, S-2, L-5).
	Unpublished []Unpublished
	// Takes lists every consumption with the call and reference form that
	// made it; rejected maps the calls answered a rejection of their
	// reference (L-4, L-1, SU-4, N-1, SU-5) to that answer.
	Takes    []Take
	Rejected map[CallKey]int64
	// HealthRefused holds the consume calls a consumer refused for its
	// health (S-2, X-1, Q-4: UNAVAILABLE), which CONTRACT's order puts
	// before every check of the reference: a probe refused so was never
	// judged on its reference (checkProbeAnswers).
	HealthRefused map[CallKey]bool
}

// Unpublished is a publish that ended with nothing published.
type Unpublished struct {
	Rec       *EntryRecord
	Rule, Why string
}

// RejectCall records that call was answered res, a rejection of its reference.
func (l *ledger) RejectCall(call CallKey, res int64) {
	if l.Rejected == nil {
		l.Rejected = map[CallKey]int64{}
	}
	l.Rejected[call] = res
}

// RefuseForHealth records that call was refused for the consumer's health.
func (l *ledger) RefuseForHealth(call CallKey) {
	if l.HealthRefused == nil {
		l.HealthRefused = map[CallKey]bool{}
	}
	l.HealthRefused[call] = true
}

func (l *ledger) Add(id string, h int, payloadBytes int64) *EntryRecord {
	if len(l.recs) == cap(l.recs) {
		l.recs = make([]EntryRecord, 0, max(16, 2*cap(l.recs)))
	}
	l.recs = append(l.recs, EntryRecord{Id: id, H: h, PayloadBytes: payloadBytes})
	e := &l.recs[len(l.recs)-1]
	if old, ok := l.Entries[id]; ok {
		l.Reused = append(l.Reused, [2]*EntryRecord{old, e})
	}
	l.Entries[id] = e
	l.last = e
	l.All = append(l.All, e)
	return e
}

// AddConsumption appends key to e.Consumptions. A record's first
// consumption takes a one-string slice of the ledger's block (issue #16:
// an entry is consumed once, so that was an allocation each); a second
// one, which single use forbids, grows it as append does.
func (l *ledger) AddConsumption(e *EntryRecord, key string) {
	if e.Consumptions != nil {
		e.Consumptions = append(e.Consumptions, key)
		return
	}
	if len(l.consumptions) == cap(l.consumptions) {
		l.consumptions = make([]string, 0, max(16, 2*cap(l.consumptions)))
	}
	l.consumptions = append(l.consumptions, key)
	n := len(l.consumptions)
	e.Consumptions = l.consumptions[n-1 : n : n]
}

// AddOkCall appends call (client, rpc) to e.OkCalls, the first one from
// the ledger's block as AddConsumption does.
func (l *ledger) AddOkCall(e *EntryRecord, call [2]int64) {
	if e.OkCalls != nil {
		e.OkCalls = append(e.OkCalls, call)
		return
	}
	if len(l.okCalls) == cap(l.okCalls) {
		l.okCalls = make([][2]int64, 0, max(16, 2*cap(l.okCalls)))
	}
	l.okCalls = append(l.okCalls, call)
	n := len(l.okCalls)
	e.OkCalls = l.okCalls[n-1 : n : n]
}

// Touch records that e's Consumptions, OkCalls, Aborted, RemovedCause,
// Abandoned or Published changed: whoever changes one of them calls it,
// so the SU-1/SU-3 step check looks at e again (Touched).
func (l *ledger) Touch(e *EntryRecord) {
	if !e.touched {
		e.touched = true
		l.Touched = append(l.Touched, e)
	}
}

// Untouch empties Touched once the SU-1/SU-3 step check has looked at it.
func (l *ledger) Untouch() {
	for _, e := range l.Touched {
		e.touched = false
	}
	clear(l.Touched)
	l.Touched = l.Touched[:0]
}

// Get returns the record of entry id, which must be in the ledger.
func (l *ledger) Get(id string) *EntryRecord {
	if e := l.last; e != nil && e.Id == id {
		return e
	}
	e, ok := l.Entries[id]
	if !ok {
		panic(fmt.Sprintf("sim: entry %s not in the ledger", id))
	}
	l.last = e
	return e
}

// sourceState is a transfer source buffer on the producer (registered memory).
type sourceState int

const (
	SourceLive sourceState = iota + 1
	SourceFreed
	SourceQuarantined
)

// Xreq is one TransferEncoderCache request: what the consumer registered.
type Xreq struct {
	H     int    // the client's index
	Rpc   int64  // its consume call's number
	C     int    // the consumer (index)
	Inc   int64  // the consumer's incarnation
	Buf   int    // the receive buffer (-1: none yet)
	Entry string // the entry asked
	Key   string
	Form  RefForm // the form of the presented reference
	// Claimed: the producer took the entry out of its table for this
	// request (ClaimForTransfer); from then on it is never answered
	// INVALID_ARGUMENT.
	Claimed bool
	// Md and Targets are what the request carries of the consumer's xfer
	// agent: its metadata and the registered buffer's descriptors.
	Md      []byte
	Targets []xfer.Descriptor
	// Revoked: the consumer quarantined the receive and revoked the
	// registration of its buffer.
	Revoked bool
	// Carrier is the consumer's control connection to E the request was
	// sent over: it may carry the transfer until it closes (Q-6's "every
	// connection that carried the transfer has closed": the consumer
	// retired it and no call uses it any more, or either process is gone;
	// ctrlConn).
	Carrier *CtrlConn
}
