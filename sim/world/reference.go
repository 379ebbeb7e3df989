package world

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// RefForm is how a presented reference differs from the one its producer
// sealed into EncoderReady. A client holds the sealed reference; the probes
// of its plan present altered copies, as the conformance harness does
// (CONTRACT SU-4, SU-5, L-1, N-1). The world carries the form, not the
// bytes: the reference's fields and tag follow from the entry's ledger
// record, and every node hands them to the core's admission
// (handoff.AdmitConsume, handoff.AdmitTransfer), which decides.
type RefForm uint8

const (
	// FormIssued is the sealed reference, unchanged.
	FormIssued RefForm = iota
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

// String names the form as the trace and failures print it.
func (f RefForm) String() string { return refFormNames[f] }

// unlistedBackend is the backend of a relabelled reference: no node lists it.
const unlistedBackend = "baton-sim-unlisted"

// sealedRefBytes is the size of a sealed one-item reference's opaque state
// (about 200 bytes; the exact number does not matter under the L-1 bound).
const sealedRefBytes = 200

// refItems are the items every simulated reference carries (one image; the
// shape is symbolic, the tag covers it).
var refItems = []handoff.ItemMeta{{Rows: 1, Cols: 1}}

// OpaqueBytes is the length of the presented opaque state.
func (f RefForm) OpaqueBytes() int {
	if f == FormOversize {
		return handoff.MaxOpaqueStateBytes + 1
	}
	return sealedRefBytes
}

// backend is the backend field the presented reference carries.
func (w *World) refBackend(f RefForm) string {
	if f == formRelabelled {
		return unlistedBackend
	}
	return w.Set.Backend
}

// presented is the decoded reference a node sees for entry rec in form f.
// Its tag is only computed for a form whose tag is not the sealed one's
// (a sealed reference verifies: engine/handoff's Seal/Verify pair), so the
// common path costs no HMAC.
func (w *World) presented(rec *EntryRecord, f RefForm) handoff.Reference {
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

// VerifyTag is the SU-5 tag check (handoff.Reference.Verify under the
// producer's key) of rec's reference in form f. An oversize form only
// gets here past a missing L-1 bound (the no-reference-limit mutant),
// whose reader, like a JSON decoder, skips the appended whitespace: what
// is left is the sealed reference.
func (w *World) VerifyTag(rec *EntryRecord, f RefForm) error {
	if f == FormIssued || f == FormOversize {
		return nil // the sealed fields and tag: Verify accepts what Seal made
	}
	return w.presented(rec, f).Verify(w.Prod.key)
}

// ConsumeAdmission is sim/nodes' consumerCheckRef's
// handoff.ConsumeAdmission with its callbacks made once per world (a
// consume made five closures and a slice each time, issue #16); they read
// the presented reference from the fields (the consumer C, the entry Rec,
// the form F, the call H, Rpc), which consumerCheckRef sets before each
// admission.
type ConsumeAdmission struct {
	Adm handoff.ConsumeAdmission // the admission, its callbacks bound
	C   *ConsumerNode            // the admitting consumer
	Rec *EntryRecord             // the entry the reference names
	F   RefForm                  // the form presented
	H   int32                    // the calling client
	Rpc int64                    // its call number
}

// TransferAdmission is sim/nodes' producerCheckRef's
// handoff.TransferAdmission with its callbacks made once per world (an
// admission made three closures and a slice each time, issue #16); they
// read the producer from the World and the presented reference from the
// fields (the entry Rec, the form F), which producerCheckRef sets before
// each admission.
type TransferAdmission struct {
	Adm handoff.TransferAdmission // the admission, its callbacks bound
	Rec *EntryRecord              // the entry the reference names
	F   RefForm                   // the form presented
}

// Parsed is the reference a node decodes from rec's reference in form f,
// without its tag (verifyTag checks that, computing it only where the form
// needs it).
func (w *World) Parsed(rec *EntryRecord, f RefForm) handoff.Reference {
	return handoff.Reference{Backend: w.refBackend(f), ProducerInstanceID: w.Prod.InstanceID, EntryID: rec.Id, ExpiresUnixMs: rec.ExpiresMs, Items: refItems}
}

// Take is one consumption as the reference checks see it.
type Take struct {
	Rec  *EntryRecord
	Key  string
	Call CallKey
	Form RefForm // the form of the reference presented
}

// CallKey is a client call: client index and call number (0: a racing call).
type CallKey struct {
	H   int32
	Rpc int64
}
