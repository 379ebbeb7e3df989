package sim

import (
	"io"

	"github.com/baton-dev/baton/sim/world"
)

// GateMinSeeds is the sweep length from which the coverage gate applies:
// a sweep (or a merge of shards) of at least this many seeds fails unless
// every fault site fired and every sometimes state was reached.
const GateMinSeeds = world.GateMinSeeds

// SometimesState is an interleaving a sweep must reach at least once.
type SometimesState = world.SometimesState

// SometimesStates lists every sometimes state, in table order.
var SometimesStates = world.SometimesStates

// Coverage adds up the coverage of runs. Pass one as Options.Coverage and
// each run adds its counts when it ends; it is not safe for concurrent use
// (Explore gives every worker its own and adds them with Add).
type Coverage = world.Coverage

// SiteCoverage is one fault site's row: fires in all, seeds it fired in,
// and fires per lifecycle point (only points where it fired).
type SiteCoverage = world.SiteCoverage

// SometimesCoverage is one sometimes state's row: times reached, seeds it
// was reached in.
type SometimesCoverage = world.SometimesCoverage

// Driver runs a fault-free world one client call at a time, for adapters
// that answer synchronous requests (conformance/target/simtarget): each
// call starts one client's RPC and steps the world until that RPC is
// answered, with every checker after every step. The world is the same one
// a seeded run uses (the real engine/handoff core behind the simulated
// network, disk and processes), with no client drawn and no fault enabled.
type Driver = world.Driver

// DriverConfig configures NewDriver; zero fields take the defaults noted.
type DriverConfig = world.DriverConfig

// NewDriver returns a driver over a fresh world seeded with seed.
func NewDriver(seed uint64, cfg DriverConfig) (*Driver, error) { return world.NewDriver(seed, cfg) }

// Answer is a call's outcome: a core code (handoff.CodeOK, ...) and, for a
// release, whether it was ABORTED (false: ALREADY_FINISHED).
type Answer = world.Answer

// ErrDriver wraps a checker's failure or a call that was never answered:
// the simulated engine broke a rule, or the simulator itself did.
var ErrDriver = world.ErrDriver

// Load is a node's CONTRACT section 4 observables, and the quarantines a
// consumer incarnation entered (QuarantinesEntered, the reference
// engine's optional encoder.quarantine.entered: a quarantine that Q-6
// ended before anyone looked still shows).
type Load = world.Load

// DirectedFault is a fault a Driver's caller puts on the next transfer
// calls (TransferEncoderCache) of the world, the simulator's counterpart of
// the harness's fault proxy (conformance/faultproxy): the property suites
// choose where a fault lands instead of the seed's BUGGIFY sites.
type DirectedFault = world.DirectedFault

// DirectedNone: the call goes through untouched.
const DirectedNone = world.DirectedNone

// DirectedDropRequest: never delivered; the consumer's deadline passes.
const DirectedDropRequest = world.DirectedDropRequest

// DirectedDropReply: delivered, the producer acts on it, the reply is lost.
const DirectedDropReply = world.DirectedDropReply

// DirectedDelay: delivered; the reply is held for the delay given to
// SetTransferFaults (virtual ms), past the consumer's deadline if longer.
const DirectedDelay = world.DirectedDelay

// DirectedCut: delivered; once the producer answered, the connection is
// cut and the consumer sees UNAVAILABLE.
const DirectedCut = world.DirectedCut

// DirectedUnavailable: never delivered; answered UNAVAILABLE at once.
const DirectedUnavailable = world.DirectedUnavailable

// DirectedInvalidArgument: never delivered; answered INVALID_ARGUMENT
// without the before-write trailer (still uncertain, Q-2).
const DirectedInvalidArgument = world.DirectedInvalidArgument

// DirectedCall is what the world saw of one transfer call since the last
// SetTransferFaults.
type DirectedCall = world.DirectedCall

// Pending is a consume started by StartConsume whose answer is not in yet.
type Pending = world.Pending

// DefaultKeepFailures is how many failing runs a Summary keeps by default:
// the ones with the lowest seeds (the rest are counted in FailuresOmitted),
// so a sweep's memory does not grow with its range even under a mutant
// that fails every seed.
const DefaultKeepFailures = world.DefaultKeepFailures

// MaxDivergences is how many divergent seeds a Summary keeps with their
// two traces (the rest are counted in Diverged).
const MaxDivergences = world.MaxDivergences

// DeterminismOneIn is the determinism sample's rate: one passing seed in
// DeterminismOneIn is run a second time and its trace compared byte for
// byte with the first run's (madsim's check).
const DeterminismOneIn = world.DeterminismOneIn

// DeterminismSampled reports whether seed is in the determinism sample: a
// function of the seed alone, so every shard, every --jobs and every
// re-run of a range pick the same seeds.
func DeterminismSampled(seed uint64) bool { return world.DeterminismSampled(seed) }

// Divergence is a sampled seed whose two runs wrote different traces (a
// determinism bug: a replay of it would not reproduce).
type Divergence = world.Divergence

// Summary is the outcome of exploring a seed range.
type Summary = world.Summary

// SweepConfig configures Sweep.
type SweepConfig = world.SweepConfig

// Explore runs seeds from..to (inclusive) on jobs goroutines with mutant
// m; progress, if set, is called after each run (see SweepConfig). The
// summary does not depend on jobs.
func Explore(from, to uint64, jobs int, m Mutant, progress func(Result)) Summary {
	return world.Explore(from, to, jobs, m, progress)
}

// Sweep runs cfg's seeds and returns their summary, which does not depend
// on cfg.Jobs. Memory is independent of the range's length: seeds are
// handed out by a counter, each worker adds its runs into its own counts
// and keeps only failing runs (at most KeepFailures of them) and the
// determinism sample's traces of the seed it is on.
func Sweep(cfg SweepConfig) Summary { return world.Sweep(cfg) }

// WriteTrace re-runs r's seed (with its settings and mutant) writing the
// JSONL trace to dir/seed-<N>.jsonl, and returns the path. Error: the file
// could not be written, or the re-run did not reproduce r's verdict (a
// determinism bug).
func WriteTrace(dir string, r Result) (string, error) { return world.WriteTrace(dir, r) }

// WriteDivergence writes d's two traces to dir/seed-<N>.run1.jsonl and
// dir/seed-<N>.run2.jsonl and returns the paths.
func WriteDivergence(dir string, d Divergence) ([2]string, error) {
	return world.WriteDivergence(dir, d)
}

// WriteRunPair writes a sampled seed's two runs to dir/<name>.run1.<ext>
// and dir/<name>.run2.<ext>, creating dir.
func WriteRunPair(dir, name, ext string, first, second []byte) ([2]string, error) {
	return world.WriteRunPair(dir, name, ext, first, second)
}

// Site is a BUGGIFY fault site: a place in the world where a fault may fire.
// Every site models a fault the contract must survive.
type Site = world.Site

// SiteNetDelay delays a message by up to Settings.LongDelayMaxMs extra.
const SiteNetDelay = world.SiteNetDelay

// SiteNetDrop drops a request before it arrives (nothing happened).
const SiteNetDrop = world.SiteNetDrop

// SiteLostReply drops a reply AFTER its request took effect (the uncertain outcome, Q-1).
const SiteLostReply = world.SiteLostReply

// SiteDupReply delivers a reply twice (the second must be ignored).
const SiteDupReply = world.SiteDupReply

// SiteSlowWrite makes a WRITE land late, possibly after both sides' deadlines.
const SiteSlowWrite = world.SiteSlowWrite

// SiteWriteError makes a WRITE fail after the entry left the table; it may have landed.
const SiteWriteError = world.SiteWriteError

// SiteEncoderFail fails an encoder step (C-6).
const SiteEncoderFail = world.SiteEncoderFail

// SiteEncoderLate makes an encoder step complete late (C-1, C-2 for the publish path).
const SiteEncoderLate = world.SiteEncoderLate

// SiteENOSPC fails writing a published entry's file (nothing published).
const SiteENOSPC = world.SiteENOSPC

// SiteSlowRemove delays a removal so a consumer's claim can race it (SU-1, SU-3).
const SiteSlowRemove = world.SiteSlowRemove

// SiteVanish makes a published file vanish (another process; X-2).
const SiteVanish = world.SiteVanish

// SiteRemoveError fails a removal with an I/O error.
const SiteRemoveError = world.SiteRemoveError

// SiteConsumerCrash crashes a consumer, which restarts later; on the
// shared directory it may also die inside shareddir.Claim after the
// rename won, leaving an orphan for E's CollectOrphans.
const SiteConsumerCrash = world.SiteConsumerCrash

// SiteLateCancel cancels a client while its consume is in flight (C-4).
const SiteLateCancel = world.SiteLateCancel

// SiteDupRelease sends a client's Abort twice (SU-3).
const SiteDupRelease = world.SiteDupRelease

// SiteShutdown sends Shutdown to the producer at a random time (S-1, S-2).
const SiteShutdown = world.SiteShutdown

// SiteSendFails fails the send of EncoderReady after publication (C-7).
const SiteSendFails = world.SiteSendFails

// SitePlainInvalid replaces a TransferEncoderCache reply with a plain
// INVALID_ARGUMENT without the before-write trailer (a proxy's answer;
// the request may have taken effect: Q-2 says it is uncertain).
const SitePlainInvalid = world.SitePlainInvalid

// AllSites lists every fault site, sorted.
var AllSites = world.AllSites

// OpKind is a client-visible operation of the history check.
type OpKind = world.OpKind

const OpPublish = world.OpPublish

const OpConsume = world.OpConsume

const OpRelease = world.OpRelease

// ReturnUnknown is the Return tick of an operation whose answer never
// reached its client (deadline, cancellation, lost reply): it may take
// effect at any time after its call (etcd's robustness tests do the same).
const ReturnUnknown = world.ReturnUnknown

// HistoryOp is one client-visible operation: who called what about which
// entry, its call and return ticks (virtual ms) and its answer (a reply code,
// 0 when unknown).
type HistoryOp = world.HistoryOp

// CheckHistory checks that ops are linearizable against the per-entry model
// (SU-1..SU-3 as clients see them). It returns "" when they are, else a
// description of the first entry whose operations are not.
func CheckHistory(ops []HistoryOp) string { return world.CheckHistory(ops) }

// WriteHistoryHTML checks ops and, when they are not linearizable, writes
// porcupine's HTML visualization to path. It returns whether it wrote one.
func WriteHistoryHTML(path string, ops []HistoryOp) (bool, error) {
	return world.WriteHistoryHTML(path, ops)
}

// WriteHistory re-runs r's seed (its settings and mutant, with opts'
// checker choice) keeping its history and, when the history is not
// linearizable, writes porcupine's visualization to
// dir/seed-<N>.history.html and returns the path ("" when linearizable).
func WriteHistory(dir string, r Result, opts Options) (string, error) {
	return world.WriteHistory(dir, r, opts)
}

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
type Mutant = world.Mutant

// MutantNone is the correct driver.
const MutantNone = world.MutantNone

// MutantConsumerFreesOnTransferError: the consumer ends a transfer whose
// outcome is uncertain (deadline, UNAVAILABLE, lost reply) with Rejected and
// frees its buffers for reuse instead of Uncertain + quarantine (breaks Q-1).
const MutantConsumerFreesOnTransferError = world.MutantConsumerFreesOnTransferError

// MutantReadWithoutClaim: the shared-directory consumer reads an entry's
// file without claiming it by rename, so a replayed reference is consumed
// twice (breaks SU-1).
const MutantReadWithoutClaim = world.MutantReadWithoutClaim

// MutantProducerFreesSourceOnFailure: the producer frees a transfer's
// source after a failure past the claim instead of quarantining it, while
// the WRITE may still read it (breaks Q-3).
const MutantProducerFreesSourceOnFailure = world.MutantProducerFreesSourceOnFailure

// MutantLockAcrossTransfer: the consumer holds its lock across the
// TransferEncoderCache call, so a consume that arrives while a transfer
// is in flight waits for it instead of being admitted (breaks Q-5). A
// self-test of the simulator's Q-5 checker: the broken decision is
// this driver's, not the engine's (its Q-5 mutant's sim cell is n/a
// (driver)), and no core switch is shared.
const MutantLockAcrossTransfer = world.MutantLockAcrossTransfer

// MutantCleanupFailureSwallowed: a removal that fails with an I/O error
// is logged and forgotten: Health stays READY and new handoffs are
// admitted (breaks X-1).
const MutantCleanupFailureSwallowed = world.MutantCleanupFailureSwallowed

// MutantShutdownBeforeCleanup: the producer's drain exits once it has
// started the removals of its unconsumed entries, before they finish
// (breaks S-2).
const MutantShutdownBeforeCleanup = world.MutantShutdownBeforeCleanup

// MutantLateCompletionRevives: an encoder step that completes after its
// publish was cancelled publishes the entry anyway and answers the
// stream nobody listens to (breaks C-2): the core's
// ReviveLateCompletion switch.
const MutantLateCompletionRevives = world.MutantLateCompletionRevives

// MutantKeepOutputAfterCancel: a published entry whose EncoderReady
// never reached its client is kept (until its TTL or the drain) instead
// of released (breaks C-3; C-7 on the stream): the core's
// KeepOutputAfterCancel switch.
const MutantKeepOutputAfterCancel = world.MutantKeepOutputAfterCancel

// MutantReleaseAlwaysAborted: Abort(encoder_cache) answers ABORTED every
// time, also for an entry already consumed, released or expired (breaks SU-3).
const MutantReleaseAlwaysAborted = world.MutantReleaseAlwaysAborted

// MutantRejectedReferenceClaims: a reference the consumer rejects (its tag
// does not verify) still claims the entry it names and throws it away, so
// the valid reference it imitates is spent (breaks SU-4).
const MutantRejectedReferenceClaims = world.MutantRejectedReferenceClaims

// MutantUnsignedReferences: the shared-directory consumer does not verify
// a reference's tag, so a forged reference consumes the entry it names
// (breaks SU-5).
const MutantUnsignedReferences = world.MutantUnsignedReferences

// MutantEntryIDFromContent: the producer derives entry ids from the
// published content, so a second publish of the same media reuses the id
// of the first entry (breaks SU-6).
const MutantEntryIDFromContent = world.MutantEntryIDFromContent

// MutantShutdownIgnoresID: Shutdown accepts any non-empty
// expected_instance_id (breaks S-1).
const MutantShutdownIgnoresID = world.MutantShutdownIgnoresID

// MutantPlainInvalidArgumentDefinite: the consumer treats INVALID_ARGUMENT
// without the before-write trailer as a definite rejection and frees its
// buffers (breaks Q-2).
const MutantPlainInvalidArgumentDefinite = world.MutantPlainInvalidArgumentDefinite

// MutantInvalidArgumentAfterRemoval: the producer answers INVALID_ARGUMENT
// (no trailer) for a transfer that failed after the entry left its table
// (breaks Q-3).
const MutantInvalidArgumentAfterRemoval = world.MutantInvalidArgumentAfterRemoval

// MutantFreeOnCancel: a consumer whose client cancels during a transfer
// frees its buffers at once instead of waiting for the outcome (breaks C-4).
const MutantFreeOnCancel = world.MutantFreeOnCancel

// MutantEncoderFailureKeepsReservation: a publish whose encoder step fails
// is answered INTERNAL but keeps its reserved bytes and table entry (no
// AbandonPublish; breaks C-6).
const MutantEncoderFailureKeepsReservation = world.MutantEncoderFailureKeepsReservation

// MutantNoExpiryCollection: the producer's collector never expires entries
// past their TTL (breaks X-2).
const MutantNoExpiryCollection = world.MutantNoExpiryCollection

// MutantNoReferenceLimit: the consumer puts no size limit on a
// reference's opaque state (breaks L-1).
const MutantNoReferenceLimit = world.MutantNoReferenceLimit

// MutantRoleUnchecked: the producer serves a consume sent to it instead
// of rejecting it with FAILED_PRECONDITION (breaks L-4).
const MutantRoleUnchecked = world.MutantRoleUnchecked

// MutantAnyBackend: the consumer accepts references for any backend
// (breaks N-1).
const MutantAnyBackend = world.MutantAnyBackend

// MutantPremultipliedHash: the producer hashes premultiplied 16-bit
// pixels, so colours under alpha 0 collide (breaks H-1).
const MutantPremultipliedHash = world.MutantPremultipliedHash

// MutantWireBytesHash: the producer hashes the wire bytes, so pixel-equal
// items in other encodings hash differently (breaks H-4).
const MutantWireBytesHash = world.MutantWireBytesHash

// MutantUUIDIdentity: the consumer keys an item that has a
// MediaItem.uuid by the uuid instead of its content hash (breaks H-5).
const MutantUUIDIdentity = world.MutantUUIDIdentity

// MutantMissingHashKeyedByTokens: the consumer leaves the fresh
// identities of items without content hash out of the prefix-cache key,
// so they are keyed by their placeholder tokens alone (breaks H-2).
const MutantMissingHashKeyedByTokens = world.MutantMissingHashKeyedByTokens

// MutantTextKeyedCache: the consumer's prefix cache is keyed by the
// token ids only, so two images with one prompt share an answer (breaks B-2).
const MutantTextKeyedCache = world.MutantTextKeyedCache

// MutantVideoAsImage: the producer treats video and audio items as
// images and publishes them (breaks L-3).
const MutantVideoAsImage = world.MutantVideoAsImage

// MutantQuarantineNeverEnds: a quarantine lasts for the life of the
// process even once the backend proved that nothing can touch its memory
// any more (the revocation done, the WRITE ended): the core's
// NeverEndQuarantine switch (breaks Q-6).
const MutantQuarantineNeverEnds = world.MutantQuarantineNeverEnds

// MutantKeepCarrierOpen: the consumer keeps the control connection that
// carried a transfer with an uncertain outcome open and in use instead of
// retiring it, so its quarantine lasts while E lives (the core's
// KeepCarrierOpen switch; breaks Q-6).
const MutantKeepCarrierOpen = world.MutantKeepCarrierOpen

// MutantCancelCancelsTransfer: a client's cancel cancels the consumer's
// transfer call, whose outcome is then uncertain, so the consumer
// quarantines (the core's CancelCancelsTransfer switch; breaks SE-4).
const MutantCancelCancelsTransfer = world.MutantCancelCancelsTransfer

// Mutants maps each mutant to the rule it breaks.
var Mutants = world.Mutants

// ParseMutant returns the mutant named s ("" or "none" is MutantNone).
// Error: an unknown name, listing the known ones.
func ParseMutant(s string) (Mutant, error) { return world.ParseMutant(s) }

// TopologyEPD: client -> E, then client -> PD.
const TopologyEPD = world.TopologyEPD

// TopologyEPPD: client -> E, then client -> P (PrefillReady with a KV
// session and a decode preparation), then client -> D.
const TopologyEPPD = world.TopologyEPPD

// SitePartition cuts a consumer off from E for a drawn window: every
// message between them, in either direction, is lost while it lasts (a
// request before it took effect, a reply after: ).
const SitePartition = world.SitePartition

// SiteSlowFsync makes the producer's shared-directory write of an entry
// (temp file, fsync, rename, directory fsync) take up to
// NodeSettings.FsyncMsMax, so cancellation (C-7), drain (S-2) and
// expiry race it; the entry is committed only after the rename.
const SiteSlowFsync = world.SiteSlowFsync

// SiteProducerCrash crashes E's process at a random time, or in the
// middle of a slow shared-directory write before its fsync (the temp
// file is lost or left as an orphan); it restarts with a new instance
// id after NodeSettings.ProducerDownMsMax at most (sim/nodes/producer_crash.go).
const SiteProducerCrash = world.SiteProducerCrash

// SiteDecodeNoPrep: a client sends its decode request to D without the
// decode preparation (L-2: INVALID_ARGUMENT before execution).
const SiteDecodeNoPrep = world.SiteDecodeNoPrep

// SiteDecodeBadHash: a client's decode preparation carries a malformed
// content hash (H-3: INVALID_ARGUMENT before execution).
const SiteDecodeBadHash = world.SiteDecodeBadHash

// SiteDecodeReplay: a client sends a KV session it already decoded to a
// D again (at most one attach: the replay is refused).
const SiteDecodeReplay = world.SiteDecodeReplay

// NodeSettings are the drawn settings of the partition, the slow fsync and
// the E+P+D topology (embedded in Settings; zero values turn them off, so
// Driver, Scenario and older traces run E+PD without them). Times are
// virtual ms.
type NodeSettings = world.NodeSettings

// Scenario is a hand-driven world for scripted lifecycle scenarios
// (sim/world/testdata/scenarios/*.txt, run by cockroachdb/datadriven in
// sim/world/scenario_test.go; ARCHITECTURE.md "Scenario tests read like scripts").
// Nothing happens by itself: no clients are drawn, no fault fires; the
// script publishes, claims, cancels, delivers or drops the next event of a
// kind, crashes consumers and prints the state. Every checker runs after
// every step, as in a seeded run, and the first failure is printed.
//
// Commands (Do), each on one line with key=value arguments:
//
//	new [backend=transfer|shareddir] [consumers=N] [buffers=N] [seed=N]
//	    [payload=BYTES] [consumer-quota=BYTES] [ttl=MS] [consumer-timeout=MS]
//	    [producer-timeout=MS] [client-timeout=MS] [collect=MS] [mutant=NAME]
//	    [topology=e+pd|e+p+d] [decoders=N] [kv-ttl=MS] [decode-timeout=MS]
//	publish h=N [ttl=MS]        client h publishes one entry
//	claim h=N [pd=N]            client h consumes its entry on PD pd (default 0)
//	release h=N                 client h releases its entry (Abort)
//	cancel h=N                  client h cancels its current call
//	crash pd=N / restart pd=N   a consumer process dies / comes back
//	partition pd=N ms=MS        cut PD pd's link to E for MS ms (every message between them is lost)
//	decode h=N [d=N] [prep=ok|missing|bad-hash]  E+P+D: client h decodes its KV session on D d
//	deliver [until=KIND] [n=N]  step the next event (n of them, or until one of KIND ran)
//	drop-reply kind=KIND        drop the earliest pending KIND event: a reply lost after its request took effect
//	align kind=KIND with=KIND2  move the earliest KIND event to the tick of the earliest KIND2 one (the same step)
//	advance ms=N                step every event due in the next N ms, then move the clock there
//	stabilize [max=N]           step until only the periodic collector is left (at most max steps)
//	delay kind=KIND ms=MS       the earliest pending KIND event happens MS ms later (a slow removal or WRITE)
//	shutdown                    Shutdown(own id) on E now: its drain starts (S-1, S-2)
//	crash-producer              E's process dies now; it restarts under a new instance id (sim/nodes/producer_crash.go)
//	finish [max=N]              end the run as a seeded one ends: heal, shut every node down once every
//	                            client is done, step until converged, run the end-of-run checks
//	expect                      print the producer, consumers, clients and entries
//
// Each step prints "t=TICK EVENT: note". Errors are printed, not returned
// as failures, so a script can show a rejected command.
type Scenario = world.Scenario

// NewScenario returns a scenario with no world yet (the script's `new`
// makes one).
func NewScenario() *Scenario { return world.NewScenario() }

// BackendSharedDir: the consumer claims an entry by atomic rename in a
// shared directory; the producer learns of it when it next looks.
const BackendSharedDir = world.BackendSharedDir

// BackendTransfer: the consumer asks the producer to WRITE into its
// registered buffers (TransferEncoderCache); replies can be lost.
const BackendTransfer = world.BackendTransfer

// Settings are everything a seed draws for a run; a trace's first line holds
// them, and Replay runs with them. Times are virtual ms.
type Settings = world.Settings

// EnableProbability is the probability that a fault site is enabled in a run (BUGGIFY).
const EnableProbability = world.EnableProbability

// DrawSettings returns the settings seed decides, from the settings stream only.
func DrawSettings(seed uint64) Settings { return world.DrawSettings(seed) }

// ErrBadShard marks a shard spec (`--shard i/n`, JOB_COMPLETION_INDEX,
// BATON_SHARDS) a sweep cannot use.
var ErrBadShard = world.ErrBadShard

// MaxShards bounds a sweep's shard count (a Kubernetes Indexed Job allows
// at most 100,000 completions).
const MaxShards = world.MaxShards

const EnvJobCompletionIndex = world.EnvJobCompletionIndex

const EnvShards = world.EnvShards

// Shard is one part of a sweep split n ways: Index in [0, Count). The
// zero value and 0/1 are the whole range.
//
// A range A..B (N = B-A+1 seeds) is split into contiguous blocks: shard i
// takes seeds A+floor(i*N/n) .. A+floor((i+1)*N/n)-1, so the blocks are
// disjoint, in index order, their union is exactly A..B, and their sizes
// differ by at most one (a shard of a range shorter than n may be empty).
// Blocks, not strides: a shard's part is itself a range (`--seeds` re-runs
// it alone, its result names it), and since every seed's cost is a hash of
// the seed, blocks balance as well as strides do.
type Shard = world.Shard

// ParseShard reads "i/n" (0 <= i < n <= MaxShards, decimal, no sign or
// spaces). Errors wrap ErrBadShard.
func ParseShard(text string) (Shard, error) { return world.ParseShard(text) }

// ShardFrom decides a sweep's shard from the flags and the environment
// (lookup is os.LookupEnv in the CLI):
//
//   - spec, `--shard i/n`, when given, wins;
//   - else, with JOB_COMPLETION_INDEX set (a pod of a Kubernetes Indexed
//     Job), the index comes from there and the count from count
//     (`--shards N`, 0 when not given) or else BATON_SHARDS;
//   - else BATON_SHARDS alone is an error (which shard is this?), and with
//     neither the sweep is whole (0/1).
//
// spec together with count is an error too. Errors wrap ErrBadShard and
// name the flag or variable.
func ShardFrom(spec string, count int, lookup func(string) (string, bool)) (Shard, error) {
	return world.ShardFrom(spec, count, lookup)
}

// StoreFormat is the format name every store record carries.
const StoreFormat = world.StoreFormat

// DefaultStoreKeep is the records a store keeps per commit by default.
const DefaultStoreKeep = world.DefaultStoreKeep

// ErrBadStore marks a store directory or record that cannot be used.
var ErrBadStore = world.ErrBadStore

// StoreRecord is one stored run (seed-<N>[+<mutant>].json).
type StoreRecord = world.StoreRecord

// StoreLess is the store's merge rule: failing before passing, then fewer
// events (faster failing) before more, then the lower seed, then the mutant.
func StoreLess(a, b StoreRecord) bool { return world.StoreLess(a, b) }

// VerdictName is a verdict's name in results and store records: passed,
// correctness, liveness or crash.
func VerdictName(v Verdict) string { return world.VerdictName(v) }

// ParseVerdictName is VerdictName's inverse; ok is false for another name.
func ParseVerdictName(name string) (Verdict, bool) { return world.ParseVerdictName(name) }

// ParseStoreRecord decodes one record strictly: one JSON object, no
// unknown field, no trailing data, the store format, a known verdict and
// mutant, valid settings, a trace name of its own seed. Errors wrap ErrBadStore.
func ParseStoreRecord(raw []byte) (StoreRecord, error) { return world.ParseStoreRecord(raw) }

// CommitDirName is the directory name of commit in a store.
func CommitDirName(commit string) string { return world.CommitDirName(commit) }

// Store records runs into a store directory for one commit. Its methods
// are safe for concurrent use (one flock per write guards against other
// processes sharing the directory).
type Store = world.Store

// OpenStore opens (creating it if needed) the store at dir for commit,
// keeping keep records per commit (0: DefaultStoreKeep). Errors: the
// directory cannot be created, or a record in it is malformed (named).
func OpenStore(dir, commit string, keep int) (*Store, error) {
	return world.OpenStore(dir, commit, keep)
}

// ReadStore reads every record of the store at dir, commit directory by
// commit directory (in name order), each in merge order. A missing dir is
// an empty store. Errors wrap ErrBadStore and name the file.
func ReadStore(dir string) ([]StoreRecord, error) { return world.ReadStore(dir) }

// ReplaySet is the runs a regression gate re-runs from recs: the records
// of mutant m, one per (seed, settings) (a seed stored by several commits
// runs once per distinct settings), failing ones' settings first, in seed order.
func ReplaySet(recs []StoreRecord, m Mutant) []StoreRecord { return world.ReplaySet(recs, m) }

// StoreOwner is the shard of n that replays stored seed seed: a hash of
// the seed, so every shard of a sweep agrees and each stored seed is
// replayed once across them.
func StoreOwner(seed uint64, n int) int { return world.StoreOwner(seed, n) }

// TraceHeader is the first line of a JSONL trace: everything Replay needs.
type TraceHeader = world.TraceHeader

// ReadTraceHeader reads the first line of a trace. Errors wrap ErrBadSettings:
// an empty file, a first line that is not a header, invalid settings.
func ReadTraceHeader(r io.Reader) (TraceHeader, error) { return world.ReadTraceHeader(r) }

// ReadTraceFile reads the header of the trace at path (ReadTraceHeader).
func ReadTraceFile(path string) (TraceHeader, error) { return world.ReadTraceFile(path) }

// Replay re-runs the trace at path with the seed, mutant and settings of its
// header; opts.Mutant is ignored. Errors: those of ReadTraceFile.
func Replay(path string, opts Options) (Result, error) { return world.Replay(path, opts) }

// ErrBadSettings marks settings, a trace or a mutant name a run cannot use.
var ErrBadSettings = world.ErrBadSettings

// Verdict is how a run ended; its number is `baton sim`'s exit code.
type Verdict = world.Verdict

// Passed: no checker failed and every handoff ended and every node drained in the budget.
const Passed = world.Passed

// Correctness: a safety checker failed (SU-1..SU-6, Q-1..Q-5, C-2..C-4, C-6, X-1, X-2, S-1, S-2, S-4, L-1, L-4, N-1, core invariants).
const Correctness = world.Correctness

// Liveness: after faults healed, a handoff did not end or a node did not drain within the budget.
const Liveness = world.Liveness

// Crash: the world panicked (a bug in the core or the simulator).
const Crash = world.Crash

// Options are a run's outputs and its mutant; none changes what happens.
type Options = world.Options

// Result is the outcome of one run.
type Result = world.Result

// World is one simulated deployment: the producer E, the PD consumers, the
// clients, the shared directory, registered memory and the network, all
// stepped by one event queue.
type World = world.World

// Run runs the world for seed with settings s and returns its result. It
// never panics: a panic inside the world is the Crash verdict.
func Run(seed uint64, s Settings, opts Options) (res Result) { return world.Run(seed, s, opts) }

// RunSeed runs seed with the settings it draws.
func RunSeed(seed uint64, opts Options) Result { return world.RunSeed(seed, opts) }
