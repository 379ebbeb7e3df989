package handoff

import (
	"bytes"
	"errors"
	"slices"
)

// This file holds the core's admission of a presented reference: which of
// the contract's rules rejects it, and which wins when several apply
// (CONTRACT "which code wins": health -> L-4 -> L-6 -> L-1 -> SU-4 -> H-3 ->
// N-1 -> SE-3 -> SU-5 -> SU-2 -> L-5). A driver (engine/server on the wire,
// the simulator over its own world) hands in plain values and the checks
// only it can run (a parse of the bytes it holds, a look-up in its own
// configuration, the key it loaded); the core runs them in the contract's
// order and returns the first rejection, one of this package's sentinel
// errors. On a consumer, health (S-2, X-1, Q-4) and L-4 come before
// AdmitConsume, in the driver (Health.Admit); AdmitTransfer runs the
// producer's health itself (TransferAdmission.Health) as its first check.
// SU-2's claim and L-5's reservation come after (AdmitReceive).

// ConsumeAdmission is what a consumer knows of one reference presented in
// encoder.consume, before it claims the entry.
type ConsumeAdmission struct {
	// OpaqueBytes is the opaque state's length; MaxBytes its bound (L-1;
	// 0: MaxOpaqueStateBytes).
	OpaqueBytes, MaxBytes int
	// Parse decodes the reference (SU-4 malformed, H-3 hash): it runs only
	// past L-1, so it never reads an oversize reference.
	Parse func() (Reference, error)
	// Accepts reports whether this consumer accepts a backend (N-1);
	// Accepted lists them, for the message.
	Accepts  func(backend string) bool
	Accepted []string
	// Transfer reports whether a backend is a transfer backend: the
	// producer holds the key and checks the tag itself (SU-5), so the
	// consumer checks the producer endpoint (SE-3) and the ids (the keyless
	// part of SU-5, Reference.CheckIDs) instead of the tag.
	Transfer func(backend string) bool
	// Trust is SE-3 on a transfer backend's producer endpoint, before any
	// connection (nil: every endpoint is trusted).
	Trust func(Reference) error
	// Known is SU-5 on the shared directory: the producer instance is one
	// the consumer knows (its key loads). nil: every instance is known.
	Known func(Reference) error
	// Verify is SU-5 on the shared directory: the tag under the producer's
	// key.
	Verify func(Reference) error
	// Mutants switches the admission's decisions to broken ones
	// (NoReferenceLimit, AnyBackend, UnsignedReferences,
	// RejectedReferenceClaims); the zero value is the contract's.
	Mutants Mutants
	// Discard carries out Mutants.RejectedReferenceClaims (SU-4): it claims
	// the entry a rejected reference names and throws it away. ref is the
	// parsed reference whose tag did not verify, or, for a malformed one
	// (malformed true), the zero Reference: the driver reads the id a
	// lenient parser would from the bytes it holds. nil: nothing to claim.
	// The core calls it only under the switch.
	Discard func(ref Reference, malformed bool)
}

// ReadOpaqueState is how a consumer reads a presented opaque state before
// AdmitConsume parses it, and the L-1 bound the parse applies (0:
// MaxOpaqueStateBytes): the contract's consumer takes the bytes as they
// are (SU-5: the tag covers every byte). Under NoReferenceLimit (breaks
// L-1) there is no bound and an oversize state is read as a JSON decoder
// would, the whitespace around it skipped.
func (m Mutants) ReadOpaqueState(opaque []byte) (state []byte, maxBytes int) {
	if !m.NoReferenceLimit {
		return opaque, 0
	}
	if len(opaque) > MaxOpaqueStateBytes {
		opaque = bytes.TrimSpace(opaque)
	}
	return opaque, noReferenceLimit
}

// noReferenceLimit is the L-1 bound under Mutants.NoReferenceLimit.
const noReferenceLimit = 1 << 30

// AdmitConsume applies L-1, SU-4 and H-3, N-1, SE-3 (transfer backends)
// and SU-5 to a presented reference in the contract's order and returns
// it, or the first rule's rejection.
func AdmitConsume(a ConsumeAdmission) (Reference, error) {
	m := a.Mutants
	limit := a.MaxBytes
	if limit <= 0 {
		limit = MaxOpaqueStateBytes
	}
	if m.NoReferenceLimit {
		limit = noReferenceLimit // the L-1 mutant
	}
	if a.OpaqueBytes > limit {
		return Reference{}, rejectf(ErrTooLarge, "L-1 opaque_state is %d bytes, limit %d", a.OpaqueBytes, limit)
	}
	ref, err := a.Parse()
	if err != nil {
		if m.RejectedReferenceClaims && a.Discard != nil && errors.Is(err, ErrMalformedReference) {
			a.Discard(Reference{}, true) // the SU-4 mutant
		}
		return Reference{}, err // SU-4, H-3
	}
	if !a.Accepts(ref.Backend) && !m.AnyBackend {
		return Reference{}, rejectf(ErrBackendNotAccepted, "N-1 backend %.40q, this consumer accepts %v", ref.Backend, a.Accepted)
	}
	if a.Transfer != nil && a.Transfer(ref.Backend) {
		if a.Trust != nil {
			if err := a.Trust(ref); err != nil {
				return Reference{}, err // SE-3: before any connection
			}
		}
		if err := ref.CheckIDs(); err != nil {
			return Reference{}, err // SU-5, keyless
		}
		return ref, nil
	}
	err = nil
	if a.Known != nil {
		err = a.Known(ref)
	}
	if err == nil && !m.UnsignedReferences { // the SU-5 mutant checks no tag
		err = a.Verify(ref)
	}
	if err != nil {
		if m.RejectedReferenceClaims && a.Discard != nil {
			a.Discard(ref, false) // the SU-4 mutant
		}
		return Reference{}, err // SU-5
	}
	return ref, nil
}

// TransferAdmission is what a producer knows of one TransferEncoderCache
// call before it claims the entry for the transfer.
type TransferAdmission struct {
	// Health is the producer's admission (S-2, X-1, Q-4; nil: admitted).
	Health func() error
	// OpaqueBytes is the opaque state's length (L-1, MaxOpaqueStateBytes).
	OpaqueBytes int
	// Parse decodes the reference (SU-4, H-3), only past L-1.
	Parse func() (Reference, error)
	// Serves lists the backends TransferEncoderCache serves: a reference
	// for another is malformed for this call (SU-4).
	Serves []string
	// Agent checks the call's consumer agent: malformed metadata
	// (ErrBadRequest) before an untrusted agent (SE-3, before any
	// connection). nil: nothing to check.
	Agent func() error
	// Self is this producer's instance id: a reference naming another is
	// SU-5.
	Self string
	// Verify is the SU-5 tag check under this producer's key.
	Verify func(Reference) error
	// NowUnixMs is the producer's clock, for SU-2's expiry.
	NowUnixMs int64
	// Targets checks the target regions against the reference (ErrBadRequest; nil: none).
	Targets func(Reference) error
}

// AdmitTransfer applies, in the contract's order, health, L-1, SU-4 and
// H-3, the backend, the consumer agent (malformed, then SE-3), SU-5 (the
// instance, then the tag), SU-2 (expired) and the targets to a transfer
// request, and returns its reference or the first rejection. Every
// rejection is made before the claim: handoff.BeforeWrite says which carry
// the before-write trailer. An ErrSpentReference means the reference
// expired: the caller expires its table.
func AdmitTransfer(a TransferAdmission) (Reference, error) {
	if a.Health != nil {
		if err := a.Health(); err != nil {
			return Reference{}, err // S-2, X-1, Q-4
		}
	}
	if a.OpaqueBytes > MaxOpaqueStateBytes {
		return Reference{}, rejectf(ErrTooLarge, "L-1 opaque_state is %d bytes, limit %d", a.OpaqueBytes, MaxOpaqueStateBytes)
	}
	ref, err := a.Parse()
	if err != nil {
		return ref, err // SU-4, H-3
	}
	if !slices.Contains(a.Serves, ref.Backend) {
		return ref, rejectf(ErrMalformedReference, "SU-4 reference for backend %.40q sent to TransferEncoderCache", ref.Backend)
	}
	if a.Agent != nil {
		if err := a.Agent(); err != nil {
			return ref, err // malformed, then SE-3
		}
	}
	if ref.ProducerInstanceID != a.Self {
		return ref, rejectf(ErrForeignReference, "SU-5 reference names producer %s, this is %s", ref.ProducerInstanceID, a.Self)
	}
	if err := a.Verify(ref); err != nil {
		return ref, err // SU-5
	}
	if ref.Expired(a.NowUnixMs) {
		return ref, rejectS(ErrSpentReference, "SU-2 reference ", ref.EntryID, " expired", true)
	}
	if a.Targets != nil {
		if err := a.Targets(ref); err != nil {
			return ref, err
		}
	}
	return ref, nil
}

// shortID abbreviates an id for messages.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8] + ".."
	}
	return id
}

// AdmitReceive decides a shared-directory receive's SU-2 and L-5 in the
// contract's order (SU-2 before L-5): the consumer looks whether the
// entry's file is still there (the driver's look, shareddir.EntryExists:
// exists and lookErr, taken before this call, so the core does no I/O)
// before it reserves receive bytes (preflight: ConsumerReceives.Preflight,
// Q-4 and L-5), so a spent reference is answered INVALID_ARGUMENT, never
// RESOURCE_EXHAUSTED. A look that failed (lookErr != nil) decides nothing:
// the claim by rename will tell.
func AdmitReceive(entryID string, exists bool, lookErr error, preflight func() error) error {
	if lookErr == nil && !exists {
		return rejectS(ErrSpentReference, "SU-2 reference ", entryID, " was already consumed, released or expired", true)
	}
	return preflight()
}

// AdmitUnexpired decides SU-2's expiry at a consumer, after the
// reference was admitted (AdmitConsume) and before its receive starts, on
// every backend: a reference whose expiry (expiresUnixMs, ms since the
// epoch; the simulator's ticks) is at or before nowUnixMs is spent.
// Errors: ErrSpentReference (INVALID_ARGUMENT), "SU-2 reference <id>
// expired" (CONTRACT SU-2).
func AdmitUnexpired(entryID string, expiresUnixMs, nowUnixMs int64) error {
	if (Reference{ExpiresUnixMs: expiresUnixMs}).Expired(nowUnixMs) {
		return rejectS(ErrSpentReference, "SU-2 reference ", entryID, " expired", true)
	}
	return nil
}

// AdmitRole applies L-4: violation is the driver's finding that the
// request is one its role does not serve (an ErrWrongRole; nil: it
// serves it), and the request is rejected with it. Under
// Mutants.RoleUnchecked (breaks L-4) it is served anyway.
func AdmitRole(violation error, m Mutants) error {
	if m.RoleUnchecked {
		return nil // the L-4 mutant
	}
	return violation
}

// AdmitModality applies L-3 to one media item: violation is the driver's
// finding that the item is not an image (an ErrModalityUnsupported; nil:
// it is one), and the request is rejected with it before anything is
// reserved. Under Mutants.VideoAsImage (breaks L-3) the item is served as
// an image.
func AdmitModality(violation error, m Mutants) error {
	if m.VideoAsImage {
		return nil // the L-3 mutant
	}
	return violation
}
