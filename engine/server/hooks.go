package server

import (
	"crypto/tls"
	"image"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/contenthash"
	"github.com/baton-dev/baton/engine/executor"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/metadata"
)

// Hooks replace one decision of the engine each. A nil field keeps the
// contract's decision. They exist so conformance/mutants can build
// deliberately broken engines from the real one (ARCHITECTURE.md: never a copy
// of the engine); production code never sets them.
type Hooks struct {
	// Decisions switches the core's own decisions to broken ones
	// (handoff.Mutants: the end of a transfer on either side, Q-1, Q-2,
	// Q-3; a failed cleanup, X-1; the consumer's admission of a reference,
	// L-1, SU-4, SU-5, N-1; the Shutdown and Abort(encoder_cache) answers,
	// S-1, SU-3; the collector's expiry, X-2; the role check, L-4; the
	// entry id, SU-6; a failed encoder step, C-6; the drain's end, S-2;
	// the modality check, L-3; the end of a publish, C-2, C-3, C-7).
	// The simulator's mutants set the same switches, so the same broken
	// decision runs in both: a broken decision of the core has this one
	// name (the quarantine's end and the consumer's retiring of the
	// connections that carried an uncertain transfer, Q-6; a refused
	// connection, Q-2; the
	// source after a failed WRITE, Q-3; a cancelled receive, C-4 included).
	Decisions handoff.Mutants
	// SharedDir switches the shared-directory backend's decisions to broken
	// ones (shareddir.Mutants: the claim by rename, SU-1). The simulator,
	// which runs engine/cache/shareddir over its simulated file system,
	// sets the same switches (sim.Mutant.SharedDirDecisions).
	SharedDir shareddir.Mutants
	// Claim replaces the consumer's claim by atomic rename (SU-1, SU-2).
	Claim func(e *Engine, ref handoff.Reference) (items []ClaimedItem, err error)
	// ConsumerTransferDefinite replaces how the consumer reads the Q-2
	// trailer: whether a failed TransferEncoderCache carries the
	// before-write mark (handoff.TransferEnded.BeforeWrite). The core then
	// decides (release the buffers, or quarantine them, Q-1). The
	// conformance mutants set Decisions instead.
	ConsumerTransferDefinite func(err error, trailer metadata.MD) bool
	// ProducerTransferFailure replaces the error the producer answers for a
	// transfer that failed after the entry left the table, after the
	// core decided it (handoff.FailTransfer; the conformance mutant that
	// answers INVALID_ARGUMENT sets Decisions.InvalidArgumentAfterRemoval).
	ProducerTransferFailure func(err error) error
	// HoldLockAcrossTransfer holds the engine's lock across the consumer's
	// TransferEncoderCache call (the Q-5 mutant).
	HoldLockAcrossTransfer bool
	// Model switches how the language model keys an image and its prefix
	// cache to broken decisions (lm.Mutants: the uuid for the content
	// hash, H-5; the token ids alone, B-2; without fresh identities, H-2).
	// The simulator's consumer keys with the same functions and its
	// mutants set the same switches (sim.Mutant.ModelDecisions).
	Model lm.Mutants
	// ContentHashing switches the H-1 content hash of one decoded image to
	// a broken one (contenthash.Mutants: premultiplied pixels, H-1; the wire
	// bytes, H-4). The simulator's producer hashes with the same package
	// and its mutants set the same switches
	// (sim.Mutant.ContentHashDecisions).
	ContentHashing contenthash.Mutants
	// ExecutorMutation breaks one decision of the executor core (the C-2,
	// C-3 and release-idempotency mutants; the context computed twice per
	// admission, R-1; a recompute without the encoder, R-2). The
	// simulator's executor world runs the same mutations.
	ExecutorMutation executor.Mutation
	// TrustProducer replaces the consumer's SE-3 check of a transfer
	// reference's producer endpoint; it returns the address to dial (the
	// SE-3 mutant trusts every endpoint).
	TrustProducer func(ep *pb.KvEndpoint) (string, error)
	// TrustConsumerAgent replaces the tcp producer's SE-3 check of the
	// consumer agent's address (the SE-3 producer mutant trusts every one).
	TrustConsumerAgent func(address string) error
	// SharedAgentTable makes the tcp producer load every
	// TransferEncoderCache's consumer_agent into its transfer agent's
	// table of peers by agent name, before the claim, never forgetting it,
	// and create the WRITE by that name, as the engine did before the
	// attack run's A4 fix: a client's call that pairs a consumer's agent
	// name (its public instance id) with another trusted agent's address,
	// loaded between that consumer's load and its WRITE, redirects the
	// consumer's WRITE (it fails past the claim: the consumer quarantines,
	// its entry is gone), and every name a client invents stays loaded
	// (A3). The contract's engine creates each WRITE from its own call's
	// metadata (xfer CreateWriteTo). Killed by
	// TestA4NoCallRedirectsAnothersWrite in engine/server.
	SharedAgentTable bool
	// NoDecodeBudget decodes every request's media at once, without
	// reserving its decoded bytes in the decode budget or taking one of its
	// decode slots (the SE-4 decode mutant: the engine before the global
	// budget, where many heavy images together exhaust it).
	NoDecodeBudget bool
	// NoJPEGScanBound decodes a JPEG of any number of scans: the media
	// limits' scan bound (encoder.Limits.MaxJPEGScans) is raised to
	// noJPEGScanBound, far above any image's (the SE-4 scan mutant: the
	// engine before attack F1's fix, where a few KB of empty progressive
	// scans hold a decode slot, and the decode budget they reserved, for
	// as long as the scans take).
	NoJPEGScanBound bool
	// SkipDeadInstanceSweep never removes dead producers' instance
	// directories from the shared directory, neither at start nor from the
	// collector (the orphan-sweep-skipped mutant, hardening_test.go: the
	// engine before issue 15's finding 7, where every crash leaked its
	// directory, its entries and a live hmac.key).
	SkipDeadInstanceSweep bool
	// StorageFullInternal answers an entry write that failed for want of
	// space (ENOSPC) as any other failed write: INTERNAL, with Health READY
	// and no cache_dir check (the enospc-internal mutant: finding 8).
	StorageFullInternal bool
	// ChmodCacheDir sets --cache-dir to 0700 once the producer has opened
	// it, whoever created it and whatever its mode (the cache-dir-chmod
	// mutant: finding 9, a 1777 directory losing its sticky bit).
	ChmodCacheDir bool
	// UnlimitedRejectionLog logs every rejection, without the per-rule rate
	// limit (the log-unlimited mutant: finding 11, a flood of bad requests
	// filling the disk).
	UnlimitedRejectionLog bool
	// UnboundedReferenceFields skips the consumer's SU-4 bounds on a
	// reference's outer fields (backend, producer_instance_id,
	// producer_endpoint) and its bound on the TransferEncoderCacheRequest
	// it sends, so a padded reference is forwarded to the producer as it
	// came, larger than the producer accepts (the SE-4 mutant of attack
	// A1: the producer's transport refuses it without the before-write
	// trailer and the consumer quarantines).
	UnboundedReferenceFields bool
	// StaticGRPCHealth sets grpc.health.v1 only at start (SERVING) and at
	// the drain (NOT_SERVING), whatever Health says (the SE-5 mutant).
	StaticGRPCHealth bool
	// ServerTLS adjusts the listeners' TLS configuration after it is built
	// (the SE-1 mutant: client certificates requested but not required).
	ServerTLS func(cfg *tls.Config)
	// PlaintextMetrics serves /metrics without TLS although the engine
	// serves TLS (the SE-1 metrics mutant).
	PlaintextMetrics bool
	// AuthorizeOperator replaces the SE-2 decision whether a caller may make
	// an operator call ("Shutdown", "Abort(all_requests)"); operator says
	// whether it holds the operator's credential.
	AuthorizeOperator func(call string, operator bool) bool
	// AbortOwner replaces the SE-2 decision whether a caller (callerID, ""
	// when anonymous) may cancel a request started by owner.
	AbortOwner func(owner, callerID string, operator bool) bool

	// The hooks below break the decisions the race and near-pair cases of
	// conformance/suite check (races.go, baseline.go there).

	// ReleaseAnswersFromTable answers Abort(encoder_cache) from the
	// producer's table alone: without first looking at which entries
	// consumers claimed, and with ABORTED for an entry the table lists as
	// published even when the removal found it already claimed (the SU-3
	// race mutant: ABORTED and tokens for one reference).
	ReleaseAnswersFromTable bool
	// CollectorTrustsTable makes the collector expire entries from its
	// table without first looking at which of them consumers claimed, and
	// report a removal that finds its entry gone as a failed cleanup (the
	// X-2 race mutant: collection that does not tolerate entries that
	// vanished concurrently).
	CollectorTrustsTable bool
	// PublishedContentHash replaces the content hash the producer publishes
	// (in EncoderReady and in the entry the consumer reads) for an item whose
	// H-1 hash is hash and decoded pixels img; the baseline keeps the
	// contract's hash (the B-2 mutants: a producer whose hash two different
	// images can share).
	PublishedContentHash func(hash string, img image.Image) string
}

// decisions returns the core's mutant switches this engine runs with
// (Hooks.CoreDecisions).
func (e *Engine) decisions() handoff.Mutants { return e.cfg.Hooks.CoreDecisions() }

// CoreDecisions returns the lifecycle core's mutant switches (handoff.Mutants)
// these hooks run the engine with: Hooks.Decisions. The zero value is the
// correct core. The kill table
// compares it with the simulator mutant's (sim.Mutant.Decisions) to show
// that both run the same broken decision.
func (h Hooks) CoreDecisions() handoff.Mutants { return h.Decisions }

// coreRefused logs a transition the core refused (an error of a
// handoff table method). It is a bug of this driver: the core's ordering
// contract was broken (a receive ended twice, a transfer not in flight).
// It reports whether err was one.
func (e *Engine) coreRefused(op string, err error) bool {
	if err == nil {
		return false
	}
	e.log.Error("BUG: the lifecycle core refused a transition", "op", op, "err", err)
	return true
}
