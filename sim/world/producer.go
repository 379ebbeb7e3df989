package world

import (
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/xfer"
)

// producerNode is E: the core's ProducerTable and Health, driven in the
// real engine's order over a store: the real engine/cache/shareddir code on
// a simulated disk (shared_disk.go) or source buffers registered with its
// real engine/xfer agent on a simulated transport (transport.go);
// handoff.FailTransfer decides a transfer that failed past the claim
// and handoff's Health.CleanupFailed a failed removal.
type producerNode struct {
	InstanceID string
	// Observed is the table's Published ids as sim/nodes' observeClaims
	// and collect last listed them (Published), reused from pass to pass.
	Observed []string
	// observedVer is the table's version when Observed was listed
	// (observedOK: it was, for this table).
	observedVer uint64
	observedOK  bool
	// Checked is what checkCore last checked of the table.
	Checked CheckedCore
	// key is the instance's HMAC key for reference tags (SU-5), as kept in
	// the shared directory's 0600 key file.
	key    []byte
	Table  *handoff.ProducerTable
	Health *handoff.Health
	// Publishing counts publishes between Reserve and CommitPublish/AbandonPublish.
	Publishing int
	// Cleanups counts removals between the table's decision and RemovalDone.
	Cleanups int
	Stopped  bool
	// Agent is the instance's transfer agent (the transfer backend only).
	Agent xfer.Agent
	// Quarantines are the sources quarantined until their WRITE ends, by
	// entry, with that WRITE (quarantine.go; ): Health is NOT_READY
	// while one is held.
	Quarantines map[string]*Write
	// Qver counts the changes of quarantines (check_proof.go).
	Qver int
	// ReleaseWaits are the releases waiting, by entry, for a removal in
	// flight to end: the core's ProducerTable.Release answered
	// handoff.ReleaseWait, and each asks it again once RemovalDone or
	// RemovalFailed ended that removal (the engine's release waits on a
	// channel; the world on its event queue).
	ReleaseWaits map[string][]ReleaseWaiter
	// table and health are what Table and Health point to: the
	// instance's own (issue #16: two allocations an instance).
	table  handoff.ProducerTable
	health handoff.Health
}

// Published returns the table's Published ids, sorted
// (ProducerTable.AppendPublished), in p.Observed: the same list as at the
// last call while the table's version is unchanged since (every change of
// an entry's state bumps it). The collector's passes and every release
// list them, mostly of a table unchanged since the last look, and listing
// iterates the table's map and sorts. The list is valid until the next
// call; a caller must not change it.
func (p *producerNode) Published() []string {
	if v := p.Table.Version(); !p.observedOK || v != p.observedVer {
		p.Observed = p.Table.AppendPublished(p.Observed[:0])
		p.observedVer, p.observedOK = v, true
	}
	return p.Observed
}

// ReleaseWaiter is a release call waiting for a removal in flight.
type ReleaseWaiter struct {
	H   int   // the waiting client's index
	Rpc int64 // its release call's number
}

// NewProducerNode starts a new producer instance of w.
func NewProducerNode(w *World) *producerNode { return newProducerNode(w, nil) }

// newProducerNode is NewProducerNode reusing p, when not nil, and its
// key's, lists' and table's buffers (releaseBufs zeroes all else of it).
func newProducerNode(w *World, p *producerNode) *producerNode {
	if p == nil {
		p = new(producerNode)
	}
	key, observed, table := p.key[:0], p.Observed[:0], p.table
	*p = producerNode{
		InstanceID: w.NewInstanceID(),
		Observed:   observed,
		table:      table, // a pooled one's maps (releaseBufs), or the zero table
	}
	// NewProducerTable's table (Reset: keeping a pooled one's maps'
	// storage) and NewHealth's value (inlined: its storage stays on the
	// stack), in p
	p.table.Reset(handoff.ProducerConfig{
		QuotaBytes: w.Set.ProducerQuotaBytes, DefaultTTLMs: w.Set.DefaultTTLMs, MaxTTLMs: w.Set.MaxTTLMs,
	})
	p.health = *handoff.NewHealth()
	p.Table, p.Health = &p.table, &p.health
	if n := len(refKeyPrefix) + len(p.InstanceID); cap(key) < n {
		key = make([]byte, 0, n) // one allocation, not one an append
	}
	p.key = append(append(key, refKeyPrefix...), p.InstanceID...)
	w.Sd.openProducer(p)
	if w.Set.Backend == BackendTransfer {
		p.Agent = w.newAgent(w.Concat("E-", p.InstanceID), false)
	}
	p.Health.Started()
	return p
}

// refKeyPrefix starts an instance's reference key (newProducerNode).
const refKeyPrefix = "baton-sim reference key\x00"

// NewEntryID draws 128 bits from the ids stream (SU-5 shape: 32 lowercase hex).
func (w *World) NewEntryID() string {
	var b [16]byte
	if cell := &w.rngs[1]; w.idRNG == &cell.r {
		// idRNG.Uint32() is the top half of its source's next Uint64:
		// drawn from the cell's PCG directly, the same values without an
		// interface call per byte.
		for i := range b {
			b[i] = byte(cell.pcg.Uint64() >> 32)
		}
	} else {
		for i := range b {
			b[i] = byte(w.idRNG.Uint32())
		}
	}
	return w.Hex(b[:]) // one allocation a chunk of the run's text (text.go)
}

// NewInstanceID draws a lowercase UUID from the ids stream.
func (w *World) NewInstanceID() string {
	h := w.NewEntryID()
	b := w.text(36) // in the run's text, as the id's hex is (text.go)
	b = append(append(b, h[0:8]...), '-')
	b = append(append(b, h[8:12]...), '-')
	b = append(append(b, h[12:16]...), '-')
	b = append(append(b, h[16:20]...), '-')
	return w.keep(append(b, h[20:32]...))
}

// Codes carried in reply events (field b).
const (
	ResOK    int64 = iota + 1
	ResSpent       // INVALID_ARGUMENT, SU-2: spent reference
	ResUnavailable
	ResExhausted // RESOURCE_EXHAUSTED (L-5)
	ResInternal  // INTERNAL
	ResAborted
	ResAlreadyFinished
	ResBeforeWrite
	ResCancelled // CANCELLED (C-4)
	// Rejections of a presented reference (CONTRACT precedence L-4, L-1,
	// SU-4, N-1, SU-5): the gRPC code and the rule its message names.
	resTooLarge      // INVALID_ARGUMENT, L-1
	resMalformed     // INVALID_ARGUMENT, SU-4 (H-3)
	resForeign       // INVALID_ARGUMENT, SU-5
	resBackend       // FAILED_PRECONDITION, N-1
	resWrongRole     // FAILED_PRECONDITION, L-4
	ResPlainInvalid  // INVALID_ARGUMENT without the before-write trailer (Q-2: uncertain)
	ResUnimplemented // UNIMPLEMENTED (L-3: a modality E cannot encode)
	// ResUnavailableBeforeWrite: UNAVAILABLE with the before-write trailer,
	// a producer that refused for its health (S-2, X-1, Q-4) before
	// looking at the reference: definite, relayed as UNAVAILABLE.
	ResUnavailableBeforeWrite
)

var ResNames = map[int64]string{ResOK: "OK", ResSpent: "INVALID_ARGUMENT(SU-2)", ResUnavailable: "UNAVAILABLE",
	ResExhausted: "RESOURCE_EXHAUSTED", ResInternal: "INTERNAL", ResAborted: "ABORTED", ResAlreadyFinished: "ALREADY_FINISHED",
	ResBeforeWrite: "INVALID_ARGUMENT+before-write", ResCancelled: "CANCELLED",
	resTooLarge: "INVALID_ARGUMENT(L-1)", resMalformed: "INVALID_ARGUMENT(SU-4)", resForeign: "INVALID_ARGUMENT(SU-5)",
	resBackend: "FAILED_PRECONDITION(N-1)", resWrongRole: "FAILED_PRECONDITION(L-4)", ResPlainInvalid: "INVALID_ARGUMENT(no trailer)", ResUnimplemented: "UNIMPLEMENTED",
	ResUnavailableBeforeWrite: "UNAVAILABLE+before-write"}

// ResOf maps a core rejection to a reply code through handoff.Classify.
func ResOf(err error) int64 {
	rule, code := handoff.Classify(err)
	switch code {
	case handoff.CodeInvalidArgument:
		switch rule {
		case "L-1":
			return resTooLarge
		case "SU-4", "H-3":
			return resMalformed
		case "SU-5":
			return resForeign
		}
		return ResSpent
	case handoff.CodeFailedPrecondition:
		if rule == "N-1" {
			return resBackend
		}
		return resWrongRole
	case handoff.CodeResourceExhausted:
		return ResExhausted
	case handoff.CodeUnavailable:
		return ResUnavailable
	}
	return ResInternal
}

var CauseNames = map[handoff.RemovalCause]string{handoff.CauseRelease: "released", handoff.CauseExpiry: "expired", handoff.CauseDrain: "drained"}

// DecideShutdown is E's S-1 decision for Shutdown(expected); the S-1
// mutant accepts any non-empty id as its own.
func (w *World) DecideShutdown(expected string) (handoff.ShutdownStatus, error) {
	return w.Prod.Health.DecideShutdownWith(expected, w.Prod.InstanceID, w.Decisions)
}

// ---- transfer backend, producer side (the core decides Q-3: handoff.FailTransfer) ----

// Short abbreviates an id for notes.
func Short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// Phrases of an answer made once per code, not per answer (issue #16).
var (
	producerAnswered = prefixedResNames("producer answered ")
	publishFailedAs  = prefixedResNames("publish failed: ")
)

// prefixedResNames maps each code of ResNames to p followed by its name.
func prefixedResNames(p string) map[int64]string {
	m := make(map[int64]string, len(ResNames))
	for res, name := range ResNames {
		m[res] = p + name
	}
	return m
}

// ProducerAnswered is "producer answered " and res's name (ResNames).
func ProducerAnswered(res int64) string {
	if s, ok := producerAnswered[res]; ok {
		return s
	}
	return "producer answered " + ResNames[res]
}

// publishFailed is "publish failed: " and res's name (ResNames).
func publishFailed(res int64) string {
	if s, ok := publishFailedAs[res]; ok {
		return s
	}
	return "publish failed: " + ResNames[res]
}
