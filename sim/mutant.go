package sim

import (
	"fmt"
	"sort"
	"strings"
)

// Mutant names one broken decision the simulator's driver can make instead
// of the right one (a hook in this package, never in engine/handoff). The
// checkers must catch each; Mutants lists them with the rule each breaks.
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
	// is in flight waits for it instead of being admitted (breaks Q-5).
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
	// stream nobody listens to (breaks C-2).
	MutantLateCompletionRevives Mutant = "late-completion-revives"
	// MutantKeepOutputAfterCancel: a published entry whose EncoderReady
	// never reached its client is kept (until its TTL or the drain) instead
	// of released (breaks C-3; C-7 on the stream).
	MutantKeepOutputAfterCancel Mutant = "keep-output-after-cancel"
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
	// media model
	MutantPremultipliedHash:        "H-1",
	MutantWireBytesHash:            "H-4",
	MutantUUIDIdentity:             "H-5",
	MutantMissingHashKeyedByTokens: "H-2",
	MutantTextKeyedCache:           "B-2",
	MutantVideoAsImage:             "L-3",
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
