package world

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// refForm is how a presented reference differs from the one its producer
// sealed into EncoderReady. A client holds the sealed reference; the probes
// of its plan present altered copies, as the conformance harness does
// (CONTRACT SU-4, SU-5, L-1, N-1). The world carries the form, not the
// bytes: the reference's fields and tag follow from the entry's ledger
// record, and every node hands them to the core's admission
// (handoff.AdmitConsume, handoff.AdmitTransfer), which decides.
type refForm uint8

const (
	// FormIssued is the sealed reference, unchanged.
	FormIssued refForm = iota
	// formForged names the same entry with a tag the producer never computed (SU-5).
	formForged
	// FormOversize is the sealed reference with bytes appended past
	// handoff.MaxOpaqueStateBytes (L-1, decided before the bytes are read).
	FormOversize
	// formRelabelled is the sealed reference with a backend no consumer
	// lists (N-1); its tag covers the old backend.
	formRelabelled
)

var refFormNames = [...]string{FormIssued: "issued", formForged: "forged", FormOversize: "oversize", formRelabelled: "relabelled"}

func (f refForm) String() string { return refFormNames[f] }

// unlistedBackend is the backend of a relabelled reference: no node lists it.
const unlistedBackend = "baton-sim-unlisted"

// sealedRefBytes is the size of a sealed one-item reference's opaque state
// (about 200 bytes; the exact number does not matter under the L-1 bound).
const sealedRefBytes = 200

// refItems are the items every simulated reference carries (one image; the
// shape is symbolic, the tag covers it).
var refItems = []handoff.ItemMeta{{Rows: 1, Cols: 1}}

// opaqueBytes is the length of the presented opaque state.
func (f refForm) opaqueBytes() int {
	if f == FormOversize {
		return handoff.MaxOpaqueStateBytes + 1
	}
	return sealedRefBytes
}

// backend is the backend field the presented reference carries.
func (w *World) refBackend(f refForm) string {
	if f == formRelabelled {
		return unlistedBackend
	}
	return w.Set.Backend
}

// presented is the decoded reference a node sees for entry rec in form f.
// Its tag is only computed for a form whose tag is not the sealed one's
// (a sealed reference verifies: engine/handoff's Seal/Verify pair), so the
// common path costs no HMAC.
func (w *World) presented(rec *EntryRecord, f refForm) handoff.Reference {
	ref := handoff.Reference{Backend: w.refBackend(f), ProducerInstanceID: w.Prod.InstanceID, EntryID: rec.Id, ExpiresUnixMs: rec.ExpiresMs, Items: refItems}
	switch f {
	case formForged:
		sum := sha256.Sum256([]byte("baton-sim forged tag\x00" + rec.Id))
		ref.Tag = hex.EncodeToString(sum[:])
	case formRelabelled:
		ref.Tag = w.sealedTag(rec)
	}
	return ref
}

// sealedTag is the tag the producer sealed into rec's reference: the real
// handoff.Reference.Seal under the producer's key, decoded back with
// handoff.ParseReference (only for a relabelled probe; cached).
func (w *World) sealedTag(rec *EntryRecord) string {
	if rec.sealedTag == "" {
		sealed := handoff.Reference{Backend: w.Set.Backend, ProducerInstanceID: w.Prod.InstanceID, EntryID: rec.Id, ExpiresUnixMs: rec.ExpiresMs, Items: refItems}
		ref, err := handoff.ParseReference(sealed.Backend, sealed.ProducerInstanceID, sealed.Endpoint, sealed.Seal(w.Prod.key), 0)
		if err != nil {
			panic(fmt.Sprintf("sim: a sealed reference does not parse: %v", err))
		}
		rec.sealedTag = ref.Tag
	}
	return rec.sealedTag
}

// verifyTag is the SU-5 tag check (handoff.Reference.Verify under the
// producer's key) of rec's reference in form f. An oversize form only
// gets here past a missing L-1 bound (the no-reference-limit mutant),
// whose reader, like a JSON decoder, skips the appended whitespace: what
// is left is the sealed reference.
func (w *World) verifyTag(rec *EntryRecord, f refForm) error {
	if f == FormIssued || f == FormOversize {
		return nil // the sealed fields and tag: Verify accepts what Seal made
	}
	return w.presented(rec, f).Verify(w.Prod.key)
}

// ConsumerCheckRef is a consumer's admission of the presented reference:
// the core's handoff.AdmitConsume (engine/handoff/admit.go) decides it and
// its order (L-1 size, SU-4 malformed: every form parses, N-1 backend,
// then SU-5: the tag on the shared directory; over a transfer backend the
// producer verifies its own tag and the consumer checks the ids). The
// world supplies its form of the reference and the core's switches the
// mutant sets (handoff.Mutants: NoReferenceLimit, AnyBackend,
// UnsignedReferences, RejectedReferenceClaims, whose claim of a rejected
// reference's entry claimAndDiscard carries out).
func (w *World) ConsumerCheckRef(c *ConsumerNode, rec *EntryRecord, f refForm, h int32, rpc int64) error {
	a := &w.admit
	if a.adm.Parse == nil {
		a.bind(w)
	}
	a.c, a.rec, a.f, a.h, a.rpc = c, rec, f, h, rpc
	adm := a.adm
	adm.OpaqueBytes = f.opaqueBytes()
	_, err := handoff.AdmitConsume(adm)
	a.c, a.rec = nil, nil
	return err
}

// consumeAdmission is consumerCheckRef's handoff.ConsumeAdmission with its
// callbacks made once per world (a consume made five closures and a slice
// each time, issue #16); they read the presented reference from the
// fields, which consumerCheckRef sets before each admission.
type consumeAdmission struct {
	adm handoff.ConsumeAdmission
	c   *ConsumerNode
	rec *EntryRecord
	f   refForm
	h   int32
	rpc int64
}

func (a *consumeAdmission) bind(w *World) {
	a.adm = handoff.ConsumeAdmission{
		Parse:    func() (handoff.Reference, error) { return w.parsed(a.rec, a.f), nil },
		Accepts:  func(b string) bool { return b == w.Set.Backend },
		Accepted: []string{w.Set.Backend},
		Transfer: func(b string) bool { return b == BackendTransfer },
		Verify:   func(handoff.Reference) error { return w.verifyTag(a.rec, a.f) },
		Mutants:  w.Decisions,
		Discard:  func(handoff.Reference, bool) { w.claimAndDiscard(a.c, a.rec, a.h, a.rpc, a.f) },
	}
}

// parsed is the reference a node decodes from rec's reference in form f,
// without its tag (verifyTag checks that, computing it only where the form
// needs it).
func (w *World) parsed(rec *EntryRecord, f refForm) handoff.Reference {
	return handoff.Reference{Backend: w.refBackend(f), ProducerInstanceID: w.Prod.InstanceID, EntryID: rec.Id, ExpiresUnixMs: rec.ExpiresMs, Items: refItems}
}

// claimAndDiscard carries out handoff.Mutants.RejectedReferenceClaims (the
// SU-4 mutant): it claims the named entry by rename and throws it away.
func (w *World) claimAndDiscard(c *ConsumerNode, rec *EntryRecord, h int32, rpc int64, f refForm) {
	if w.Set.Backend != BackendSharedDir {
		return
	}
	if w.Sd.Claim(w.Sd.Cons[c.Idx], c.Idx, rec, false) == ClaimWon {
		w.Took(rec, fmt.Sprintf("discard/%d/%d", h, rpc), h, rpc, f)
		if w.Tracing {
			w.Notef("claimed and discarded %s for a rejected reference", Short(rec.Id))
		}
	}
}

// ProducerCheckRef is the producer's admission of a TransferEncoderCache
// call up to the claim: the core's handoff.AdmitTransfer decides it and
// its order (L-1, the backend: SU-4 for another backend sent to
// TransferEncoderCache, the SU-5 instance and tag, SU-2 expired), after
// the producer's health (S-2, X-1, Q-4: UNAVAILABLE), as the engine's
// TransferEncoderCache. The world has no consumer agent or targets to
// check. Each rejection is a pre-write one; an ErrSpentReference
// means the reference expired.
func (w *World) ProducerCheckRef(rec *EntryRecord, f refForm) error {
	_, err := handoff.AdmitTransfer(handoff.TransferAdmission{
		Health:      w.Prod.Health.Admit,
		OpaqueBytes: f.opaqueBytes(),
		Parse:       func() (handoff.Reference, error) { return w.parsed(rec, f), nil },
		Serves:      []string{BackendTransfer},
		Self:        w.Prod.InstanceID,
		Verify:      func(handoff.Reference) error { return w.verifyTag(rec, f) },
		NowUnixMs:   w.Now,
	})
	return err
}

// Took records that a call's presented reference got rec's data (a won
// rename, a read, a landed WRITE): the ground truth the SU-1, SU-4 and SU-5
// checks judge.
func (w *World) Took(rec *EntryRecord, key string, h int32, rpc int64, f refForm) {
	rec.Consumptions = append(rec.Consumptions, key)
	w.Ledger.Takes = append(w.Ledger.Takes, take{Rec: rec, Key: key, Call: CallKey{h, rpc}, Form: f})
}

// take is one consumption as the reference checks see it.
type take struct {
	Rec  *EntryRecord
	Key  string
	Call CallKey
	Form refForm
}

// CallKey is a client call: client index and call number (0: a racing call).
type CallKey struct {
	H   int32
	Rpc int64
}
