package world

import (
	"fmt"
	"sort"
	"strings"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/contenthash"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
)

// Mutant names one broken decision the simulator can make instead of the
// right one. Most are switches of the code the simulator runs that the
// real engine's test hooks set too, so the same broken decision runs in
// both: handoff.Mutants for the lifecycle core's decisions (Decisions: the
// end of a transfer on either side, a failed cleanup, the admission of a
// reference, the answers, the collector, the drain), shareddir.Mutants
// (SharedDirDecisions), contenthash.Mutants (ContentHashDecisions) and
// lm.Mutants (ModelDecisions). One is a self-test of this package's driver
// (lock-across-transfer): the engine's Q-5 decision lives in its
// goroutines, which the simulator does not have, so the kill table's Q-5
// row says n/a (driver) and names this mutant as the test of the Q-5
// checker (conformance/mutants Mutant.SimSelfTest). The checkers must catch each; Mutants lists
// them with the rule each breaks.
type Mutant string

// Mutants.
const (
	// MutantNone is the correct driver.
	MutantNone Mutant = ""
	// MutantConsumerFreesOnTransferError: the consumer ends a transfer whose
	// outcome is uncertain (deadline, UNAVAILABLE, lost reply) with Rejected and
	// frees its buffers for reuse instead of Uncertain + quarantine (breaks Q-1).
	MutantConsumerFreesOnTransferError Mutant = "consumer-frees-on-transfer-error"
	// MutantReadWithoutClaim: the shared-directory consumer reads an entry's
	// file without claiming it by rename, so a replayed reference is consumed
	// twice (breaks SU-1).
	MutantReadWithoutClaim Mutant = "read-without-claim"
	// MutantProducerFreesSourceOnFailure: the producer frees a transfer's
	// source after a failure past the claim instead of quarantining it, while
	// the WRITE may still read it (breaks Q-3).
	MutantProducerFreesSourceOnFailure Mutant = "producer-frees-source-on-failure"
	// MutantLockAcrossTransfer: the consumer holds its lock across the
	// TransferEncoderCache call, so a consume that arrives while a transfer
	// is in flight waits for it instead of being admitted (breaks Q-5). A
	// self-test of the simulator's Q-5 checker: the broken decision is
	// this driver's, not the engine's (its Q-5 mutant's sim cell is n/a
	// (driver)), and no core switch is shared.
	MutantLockAcrossTransfer Mutant = "lock-across-transfer"
	// MutantCleanupFailureSwallowed: a removal that fails with an I/O error
	// is logged and forgotten: Health stays READY and new handoffs are
	// admitted (breaks X-1).
	MutantCleanupFailureSwallowed Mutant = "cleanup-failure-swallowed"
	// MutantShutdownBeforeCleanup: the producer's drain exits once it has
	// started the removals of its unconsumed entries, before they finish
	// (breaks S-2).
	MutantShutdownBeforeCleanup Mutant = "shutdown-before-cleanup"
	// MutantLateCompletionRevives: an encoder step that completes after its
	// publish was cancelled publishes the entry anyway and answers the
	// stream nobody listens to (breaks C-2): the core's
	// ReviveLateCompletion switch.
	MutantLateCompletionRevives Mutant = "late-completion-revives"
	// MutantKeepOutputAfterCancel: a published entry whose EncoderReady
	// never reached its client is kept (until its TTL or the drain) instead
	// of released (breaks C-3; C-7 on the stream): the core's
	// KeepOutputAfterCancel switch.
	MutantKeepOutputAfterCancel Mutant = "keep-output-after-cancel"

	// ---- handoff-lifecycle mutants (references, answers, collection) ----

	// MutantReleaseAlwaysAborted: Abort(encoder_cache) answers ABORTED every
	// time, also for an entry already consumed, released or expired (breaks SU-3).
	MutantReleaseAlwaysAborted Mutant = "release-always-aborted"
	// MutantRejectedReferenceClaims: a reference the consumer rejects (its tag
	// does not verify) still claims the entry it names and throws it away, so
	// the valid reference it imitates is spent (breaks SU-4).
	MutantRejectedReferenceClaims Mutant = "rejected-reference-claims"
	// MutantUnsignedReferences: the shared-directory consumer does not verify
	// a reference's tag, so a forged reference consumes the entry it names
	// (breaks SU-5).
	MutantUnsignedReferences Mutant = "unsigned-references"
	// MutantEntryIDFromContent: the producer derives entry ids from the
	// published content, so a second publish of the same media reuses the id
	// of the first entry (breaks SU-6).
	MutantEntryIDFromContent Mutant = "entry-id-from-content"
	// MutantShutdownIgnoresID: Shutdown accepts any non-empty
	// expected_instance_id (breaks S-1).
	MutantShutdownIgnoresID Mutant = "shutdown-ignores-id"
	// MutantPlainInvalidArgumentDefinite: the consumer treats INVALID_ARGUMENT
	// without the before-write trailer as a definite rejection and frees its
	// buffers (breaks Q-2).
	MutantPlainInvalidArgumentDefinite Mutant = "plain-invalid-argument-definite"
	// MutantInvalidArgumentAfterRemoval: the producer answers INVALID_ARGUMENT
	// (no trailer) for a transfer that failed after the entry left its table
	// (breaks Q-3).
	MutantInvalidArgumentAfterRemoval Mutant = "invalid-argument-after-removal"
	// MutantFreeOnCancel: a consumer whose client cancels during a transfer
	// frees its buffers at once instead of waiting for the outcome (breaks C-4).
	MutantFreeOnCancel Mutant = "free-on-cancel"
	// MutantEncoderFailureKeepsReservation: a publish whose encoder step fails
	// is answered INTERNAL but keeps its reserved bytes and table entry (no
	// AbandonPublish; breaks C-6).
	MutantEncoderFailureKeepsReservation Mutant = "encoder-failure-keeps-reservation"
	// MutantNoExpiryCollection: the producer's collector never expires entries
	// past their TTL (breaks X-2).
	MutantNoExpiryCollection Mutant = "no-expiry-collection"
	// MutantNoReferenceLimit: the consumer puts no size limit on a
	// reference's opaque state (breaks L-1).
	MutantNoReferenceLimit Mutant = "no-reference-limit"
	// MutantRoleUnchecked: the producer serves a consume sent to it instead
	// of rejecting it with FAILED_PRECONDITION (breaks L-4).
	MutantRoleUnchecked Mutant = "role-unchecked"
	// MutantAnyBackend: the consumer accepts references for any backend
	// (breaks N-1).
	MutantAnyBackend Mutant = "any-backend"
)

// Mutants of the media model (media.go): the producer's content hash, the
// consumer's identities and prefix-cache key, the L-3 modality check.
const (
	// MutantPremultipliedHash: the producer hashes premultiplied 16-bit
	// pixels, so colours under alpha 0 collide (breaks H-1).
	MutantPremultipliedHash Mutant = "premultiplied-hash"
	// MutantWireBytesHash: the producer hashes the wire bytes, so pixel-equal
	// items in other encodings hash differently (breaks H-4).
	MutantWireBytesHash Mutant = "wire-bytes-hash"
	// MutantUUIDIdentity: the consumer keys an item that has a
	// MediaItem.uuid by the uuid instead of its content hash (breaks H-5).
	MutantUUIDIdentity Mutant = "uuid-identity"
	// MutantMissingHashKeyedByTokens: the consumer leaves the fresh
	// identities of items without content hash out of the prefix-cache key,
	// so they are keyed by their placeholder tokens alone (breaks H-2).
	MutantMissingHashKeyedByTokens Mutant = "missing-hash-keyed-by-tokens"
	// MutantTextKeyedCache: the consumer's prefix cache is keyed by the
	// token ids only, so two images with one prompt share an answer (breaks B-2).
	MutantTextKeyedCache Mutant = "text-keyed-cache"
	// MutantVideoAsImage: the producer treats video and audio items as
	// images and publishes them (breaks L-3).
	MutantVideoAsImage Mutant = "video-as-image"
)

// MutantQuarantineNeverEnds: a quarantine lasts for the life of the
// process even once the backend proved that nothing can touch its memory
// any more (the revocation done, the WRITE ended): the core's
// NeverEndQuarantine switch (breaks Q-6).
const MutantQuarantineNeverEnds Mutant = "quarantine-never-ends"

// MutantKeepCarrierOpen: the consumer keeps the control connection that
// carried a transfer with an uncertain outcome open and in use instead of
// retiring it, so its quarantine lasts while E lives (the core's
// KeepCarrierOpen switch; breaks Q-6).
const MutantKeepCarrierOpen Mutant = "keep-carrier-open"

// MutantCancelCancelsTransfer: a client's cancel cancels the consumer's
// TransferEncoderCache call (handoff.CancelReachesCall), whose outcome is
// then uncertain, so the consumer quarantines its buffers and leaves
// READY: a client that abandons its transfers takes it offline (the
// core's CancelCancelsTransfer switch; breaks SE-4).
const MutantCancelCancelsTransfer Mutant = "cancel-cancels-transfer"

// Decisions returns the lifecycle core's switches (handoff.Mutants) this
// mutant sets: the same broken decision the engine runs under the
// conformance mutant that names this one (its Hooks.CoreDecisions); zero
// for a mutant of the simulator's driver.
func (m Mutant) Decisions() handoff.Mutants { return m.decisions() }

func (m Mutant) decisions() handoff.Mutants {
	var d handoff.Mutants
	switch m {
	case MutantConsumerFreesOnTransferError:
		d.ReleaseOnUncertain = true
	case MutantPlainInvalidArgumentDefinite:
		d.PlainInvalidArgumentDefinite = true
	case MutantProducerFreesSourceOnFailure:
		d.FreeSourceOnTransferFailure = true
	case MutantInvalidArgumentAfterRemoval:
		d.InvalidArgumentAfterRemoval = true
	case MutantCleanupFailureSwallowed:
		d.SwallowCleanupFailure = true
	case MutantFreeOnCancel:
		d.FreeOnCancel = true
	case MutantQuarantineNeverEnds:
		d.NeverEndQuarantine = true
	case MutantKeepCarrierOpen:
		d.KeepCarrierOpen = true
	case MutantCancelCancelsTransfer:
		d.CancelCancelsTransfer = true
	case MutantNoReferenceLimit:
		d.NoReferenceLimit = true
	case MutantRejectedReferenceClaims:
		d.RejectedReferenceClaims = true
	case MutantUnsignedReferences:
		d.UnsignedReferences = true
	case MutantAnyBackend:
		d.AnyBackend = true
	case MutantShutdownIgnoresID:
		d.ShutdownIgnoresID = true
	case MutantReleaseAlwaysAborted:
		d.ReleaseAlwaysAborted = true
	case MutantNoExpiryCollection:
		d.NoExpiryCollection = true
	case MutantRoleUnchecked:
		d.RoleUnchecked = true
	case MutantEntryIDFromContent:
		d.EntryIDFromContent = true
	case MutantEncoderFailureKeepsReservation:
		d.KeepReservationOnEncoderFailure = true
	case MutantShutdownBeforeCleanup:
		d.DrainBeforeCleanup = true
	case MutantVideoAsImage:
		d.VideoAsImage = true
	case MutantLateCompletionRevives:
		d.ReviveLateCompletion = true
	case MutantKeepOutputAfterCancel:
		d.KeepOutputAfterCancel = true
	}
	return d
}

// SharedDirDecisions returns the shared-directory backend's switches
// (shareddir.Mutants) this mutant sets: the same broken decision the engine
// runs under the conformance mutant that names this one (its
// Hooks.SharedDir), in the engine/cache/shareddir code the simulator runs
// over its simulated file system; zero for the other mutants.
func (m Mutant) SharedDirDecisions() shareddir.Mutants {
	return shareddir.Mutants{ReadWithoutClaim: m == MutantReadWithoutClaim}
}

// ContentHashDecisions returns the content hash's switches
// (contenthash.Mutants) this mutant sets: the same broken hash the engine
// runs under the conformance mutant that names this one (its
// Hooks.ContentHashing); zero for the other mutants.
func (m Mutant) ContentHashDecisions() contenthash.Mutants {
	return contenthash.Mutants{Premultiplied: m == MutantPremultipliedHash, WireBytes: m == MutantWireBytesHash}
}

// ModelDecisions returns the language model's switches (lm.Mutants) this
// mutant sets: the same broken identity or prefix-cache key the engine
// runs under the conformance mutant that names this one (its Hooks.Model);
// zero for the other mutants.
func (m Mutant) ModelDecisions() lm.Mutants {
	return lm.Mutants{UUIDIdentity: m == MutantUUIDIdentity, TokensOnlyKey: m == MutantTextKeyedCache, DropFreshIdentities: m == MutantMissingHashKeyedByTokens}
}

// Mutants maps each mutant to the rule it breaks.
var Mutants = map[Mutant]string{
	MutantConsumerFreesOnTransferError: "Q-1",
	MutantReadWithoutClaim:             "SU-1",
	MutantProducerFreesSourceOnFailure: "Q-3",
	MutantLockAcrossTransfer:           "Q-5",
	MutantCleanupFailureSwallowed:      "X-1",
	MutantShutdownBeforeCleanup:        "S-2",
	MutantLateCompletionRevives:        "C-2",
	MutantKeepOutputAfterCancel:        "C-3",

	// ---- handoff-lifecycle mutants ----
	MutantReleaseAlwaysAborted:           "SU-3",
	MutantRejectedReferenceClaims:        "SU-4",
	MutantUnsignedReferences:             "SU-5",
	MutantEntryIDFromContent:             "SU-6",
	MutantShutdownIgnoresID:              "S-1",
	MutantPlainInvalidArgumentDefinite:   "Q-2",
	MutantInvalidArgumentAfterRemoval:    "Q-3",
	MutantFreeOnCancel:                   "C-4",
	MutantEncoderFailureKeepsReservation: "C-6",
	MutantNoExpiryCollection:             "X-2",
	MutantNoReferenceLimit:               "L-1",
	MutantRoleUnchecked:                  "L-4",
	MutantAnyBackend:                     "N-1",
	// media model
	MutantPremultipliedHash:        "H-1",
	MutantWireBytesHash:            "H-4",
	MutantUUIDIdentity:             "H-5",
	MutantMissingHashKeyedByTokens: "H-2",
	MutantTextKeyedCache:           "B-2",
	MutantVideoAsImage:             "L-3",
	// quarantines end by proof
	MutantQuarantineNeverEnds: "Q-6",
	MutantKeepCarrierOpen:     "Q-6",
	// abandoned transfers
	MutantCancelCancelsTransfer: "SE-4",
}

// ParseMutant returns the mutant named s ("" or "none" is MutantNone).
// Error: an unknown name, listing the known ones.
func ParseMutant(s string) (Mutant, error) {
	if s == "" || s == "none" {
		return MutantNone, nil
	}
	if _, ok := Mutants[Mutant(s)]; ok {
		return Mutant(s), nil
	}
	names := make([]string, 0, len(Mutants))
	for m := range Mutants {
		names = append(names, string(m))
	}
	sort.Strings(names)
	return MutantNone, fmt.Errorf("%w: unknown mutant %q (known: %s)", ErrBadSettings, s, strings.Join(names, ", "))
}
