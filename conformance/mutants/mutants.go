// Package mutants holds deliberately broken engines: the real reference
// engine with exactly one decision replaced through server.Hooks (never a
// copy of the engine). Each must be killed by the conformance case named
// after the rule it breaks (ARCHITECTURE.md, conformance/mutants).
package mutants

import (
	crand "crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"image"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/contenthash"
	"github.com/baton-dev/baton/engine/executor"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/server"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
)

// Mutant is one broken engine.
type Mutant struct {
	// Name is the --mutant flag value.
	Name string
	// Rule is the CONTRACT rule ID it breaks; the case of that rule must fail.
	Rule string
	// Breaks says in one line what the engine does wrong.
	Breaks string
	// Apply replaces one decision in the engine's configuration.
	Apply func(h *server.Hooks)
	// Topology is where the mutant shows: TopologySharedDir (default, the
	// Core suite over the shared directory) or TopologyTCPFaults (tcp
	// backend with the fault proxy, the Faults level).
	Topology string
	// Sim names the mutant the kill table's sim column runs: a sim.Mutant
	// of the handoff world ("read-without-claim") or "executor:" and a
	// mutation of the executor world ("executor:c3-view-kept-after-end").
	// SimKinship says whether it is the same broken decision (the same
	// switch of handoff, shareddir, contenthash, lm or the executor core)
	// or a counterpart in the simulator's driver; "" means the simulator
	// cannot express it (n/a (driver)).
	Sim string
	// Level is the conformance level whose cases kill it: "" or LevelCore,
	// or LevelLifecycle (the kill table then starts the engines with
	// --test-hooks and claims the Lifecycle level, whose cases need the
	// observables and test hooks).
	Level string
	// AlsoBreaks are the rules beyond Rule that the one broken decision
	// breaks as well, as a documented consequence: rule ID -> one line
	// saying why. The kill table fails a row in which any rule outside
	// Rule and AlsoBreaks failed: that is a case asserting another rule's
	// behaviour, or a cascade, and its verdict would be wrong about someone
	// else's engine.
	AlsoBreaks map[string]string
	// PropsSeed is the rapid seed of the kill table's props column (0:
	// DefaultPropsSeed of the name); pinned, with the reason, where the
	// default draw does not kill the mutant within the column's checks.
	PropsSeed uint64
	// SuiteOnly, when set, says why only the suite's column of the kill
	// table applies: the handoff property and the simulator model neither
	// peers' trust lists, nor the standard health service, nor how a
	// quarantine ends. The props and sim cells then say so.
	SuiteOnly string
	// SparesBaseline: `baton serve --mutant` leaves the aggregated role
	// unbroken, since the rule's cases compare the topology's answers with
	// the baseline's and a baseline broken the same way hides the defect
	// (the cases then find no pair of images it tells apart: not
	// verifiable). Mutants of the in-engine handoff, whose cases run on
	// the aggregated engine itself, break it too.
	SparesBaseline bool
	// PropsNA, when set, says why the props column of the kill table does
	// not apply although the suite's and the simulator's do: the handoff
	// property cannot see the decision. The props cell then says so.
	PropsNA string
	// SimNA, when set (with Sim ""), says why the sim column of the kill
	// table does not apply although the suite's and the property's do:
	// the broken decision lives in the engine's driver, where a
	// single-goroutine simulator has nothing that could make it. The sim
	// cell then says "n/a (driver): " and the reason.
	SimNA string
	// SimSelfTest names the simulator's own mutant of the same rule, when
	// it has one, for a row whose sim column does not apply (SimNA): a
	// broken decision of the simulator's driver that tests the simulator's
	// checker of the rule (sim/world/mutant_test.go), not the engine's decision.
	// The kill table does not run it.
	SimSelfTest string
}

// Declares reports whether rule is one the mutant declares it breaks
// (Rule or AlsoBreaks).
func (m Mutant) Declares(rule string) bool {
	if rule == m.Rule {
		return true
	}
	_, ok := m.AlsoBreaks[rule]
	return ok
}

// Kinds of simulator column (Mutant.SimKinship).
const (
	// SimSameCoreSwitch: the mutant sets handoff.Mutants switches and its
	// simulator mutant sets the same ones, at decision points of the
	// lifecycle core that the engine and the simulator both call.
	SimSameCoreSwitch = "same core switch"
	// SimSameSharedDirSwitch: the mutant sets shareddir.Mutants switches,
	// in the backend code the simulator runs over its simulated file
	// system, and its simulator mutant sets the same ones.
	SimSameSharedDirSwitch = "same shareddir switch"
	// SimSameContentHashSwitch: the mutant sets contenthash.Mutants
	// switches, the package the simulator's producer hashes with, and its
	// simulator mutant sets the same ones.
	SimSameContentHashSwitch = "same contenthash switch"
	// SimSameModelSwitch: the mutant sets lm.Mutants switches (an image's
	// identity, the prefix-cache key), the functions the simulator's
	// consumer keys with, and its simulator mutant sets the same ones.
	SimSameModelSwitch = "same lm switch"
	// SimSameExecutorSwitch: the mutant breaks the executor core
	// (executor.Mutation) and the executor world runs the same mutation.
	SimSameExecutorSwitch = "same executor switch"
	// SimCounterpart: the simulator's mutant is a hand-written decision of
	// the simulator's own driver that breaks the same rule, not the
	// engine's broken decision.
	SimCounterpart = "counterpart"
)

// SimKinship says what the kill table's sim column runs for m: one of
// SimSameCoreSwitch, SimSameSharedDirSwitch, SimSameContentHashSwitch,
// SimSameModelSwitch, SimSameExecutorSwitch (the
// same broken decision: TestSameCoreDecisionAsSimulator checks that the
// simulator's mutant sets the same switches) or SimCounterpart; "" when m
// has no simulator mutant (Sim "": SuiteOnly or the in-process mutants,
// "n/a (driver)").
func (m Mutant) SimKinship() string {
	if m.Sim == "" {
		return ""
	}
	var h server.Hooks
	m.Apply(&h)
	switch {
	case h.CoreDecisions() != (handoff.Mutants{}):
		return SimSameCoreSwitch
	case h.SharedDir != (shareddir.Mutants{}):
		return SimSameSharedDirSwitch
	case h.ContentHashing != (contenthash.Mutants{}):
		return SimSameContentHashSwitch
	case h.Model != (lm.Mutants{}):
		return SimSameModelSwitch
	case strings.HasPrefix(m.Sim, "executor:") && h.ExecutorMutation != (executor.Mutation{}):
		return SimSameExecutorSwitch
	}
	return SimCounterpart
}

// Seed is the props column's rapid seed: PropsSeed, else
// DefaultPropsSeed(m.Name).
func (m Mutant) Seed() uint64 {
	if m.PropsSeed != 0 {
		return m.PropsSeed
	}
	return DefaultPropsSeed(m.Name)
}

// DefaultPropsSeed is a fixed seed derived from a mutant's name (FNV-1a,
// 63 bits so it prints the same as a signed integer): the same row draws
// the same checks on every run.
func DefaultPropsSeed(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte("baton kill table/" + name))
	return h.Sum64() >> 1
}

// suiteOnlySecurity is the SuiteOnly reason of the mutants of Q-2's
// refused connection and SE-3..SE-5.
const suiteOnlySecurity = "the handoff property and the simulator model no trusted-peer lists, refused connections or grpc.health.v1"

// propsNAQuarantineEnd is the PropsNA reason of the Q-6 mutants: the
// simulator ends quarantines on their proofs and kills them; the property
// does not look for the end of a quarantine.
const propsNAQuarantineEnd = "the handoff property restarts every instance a quarantine poisons and never waits for a quarantine to end on its Q-6 proof"

// simNALockAcrossTransfer is the SimNA reason of the Q-5 mutant.
const simNALockAcrossTransfer = "Q-5 is about the engine's goroutines: a lock held while a TransferEncoderCache call blocks; the simulator runs each node as one event loop that never blocks on a call, so it holds no such lock to keep"

// suiteOnlyDecode is the SuiteOnly reason of the SE-4 decode-budget mutant.
const suiteOnlyDecode = "the handoff property and the simulator model no media decoding (the simulator's encoder is a stand-in without pixels), so neither can hold decoded images"

// suiteOnlyScans is the SuiteOnly reason of the SE-4 scan-bound mutant.
const suiteOnlyScans = "the handoff property and the simulator model no media decoding (the simulator's encoder is a stand-in without pixels), so neither decodes a JPEG's scans"

// TrustAnyProducer is the SE-3 consumer mutant's check: every producer
// endpoint is trusted and dialled.
func TrustAnyProducer(ep *pb.KvEndpoint) (string, error) {
	return net.JoinHostPort(ep.GetHost(), strconv.Itoa(int(ep.GetPort()))), nil
}

// Levels a mutant is killed at (CONTRACT section 5).
const (
	LevelCore      = ""
	LevelLifecycle = "lifecycle"
)

// Topologies the kill table starts a mutant in.
const (
	TopologySharedDir = ""
	TopologyTCPFaults = "tcp+faults"
	// TopologyTCPSecure: E+PD over tcp with TLS, client authentication on
	// every listener and an operator token (launch.Options.Security), test
	// hooks on; the SE-1 and SE-2 cases kill it.
	TopologyTCPSecure = "tcp+tls"
)

// noTransportSecurityModel is the SuiteOnly reason of the SE-1 and SE-2
// mutants.
const noTransportSecurityModel = "the handoff property and the simulator model no TLS or caller credentials"

var all = []Mutant{
	{Name: "su1-read-without-claim", Rule: "SU-1", Breaks: "the consumer reads an entry without claiming it by rename, so it can be consumed twice",
		Sim: "read-without-claim", Apply: func(h *server.Hooks) { h.SharedDir.ReadWithoutClaim = true }, // the backend's switch: the sim mutant sets the same
		AlsoBreaks: map[string]string{
			"SU-2": "the claim is what spends a shared-directory entry: an entry read in place stays, so a replay of the consumed reference gets tokens again",
			"SU-3": "the producer never sees a consumed entry claimed, so its Abort still releases it and answers ABORTED, not ALREADY_FINISHED",
		}},
	{Name: "su3-release-always-aborted", Rule: "SU-3", Sim: "release-always-aborted", Breaks: "Abort(encoder_cache) answers ABORTED every time",
		Apply: func(h *server.Hooks) { h.Decisions.ReleaseAlwaysAborted = true }}, // the core's switch: the sim mutant sets the same
	{Name: "su4-malformed-consumes", Rule: "SU-4", Sim: "rejected-reference-claims", Breaks: "a rejected reference still claims the entry it names",
		Apply: func(h *server.Hooks) { h.Decisions.RejectedReferenceClaims = true }, // the core's switch: the sim mutant sets the same
		AlsoBreaks: map[string]string{
			"SU-5": "SU-5 says an altered reference consumes nothing; the rejection of a forged one claims the entry it names, which then no longer consumes",
		},
		// The kill needs a well-formed altered copy of a live reference and
		// then a consume of the original (about one check in 30): the
		// default seed's 100 checks draw none; seed 5 draws it in its 3rd.
		PropsSeed: 5},
	{Name: "su5-unsigned-references", Rule: "SU-5", Sim: "unsigned-references", Breaks: "the consumer does not verify a reference's tag, so forged references address any entry",
		Apply: func(h *server.Hooks) { h.Decisions.UnsignedReferences = true }, // the core's switch: the sim mutant sets the same
		// The kill needs the tag-digit corruption of a live reference (one
		// malformed action in four draws it); seed 8 draws it in the first
		// check, in 5 actions, where the default seed needs 23 checks and
		// an unshrunk counterexample of 14.
		PropsSeed: 8},
	// With a tag over every byte, an oversize opaque state is also SU-4 (the
	// same code), so a consumer without the bound is only seen when it then
	// reads the reference leniently, as a JSON decoder does: this one skips
	// the whitespace around an oversize opaque state instead of refusing it
	// by its length (under the bound it reads the bytes as they are).
	{Name: "l1-no-reference-limit", Rule: "L-1", Sim: "no-reference-limit", Breaks: "opaque_state has no size limit: an oversize one is read as JSON, surrounding whitespace skipped",
		Apply: func(h *server.Hooks) { h.Decisions.NoReferenceLimit = true }}, // the core's switch (handoff.Mutants.ReadOpaqueState): the sim mutant sets the same
	{Name: "l3-video-as-image", Rule: "L-3", Sim: "video-as-image", Breaks: "video and audio items are treated as images",
		Apply: func(h *server.Hooks) { h.Decisions.VideoAsImage = true }},
	{Name: "l4-role-unchecked", Rule: "L-4", Sim: "role-unchecked", Breaks: "requests for another role are served",
		Apply: func(h *server.Hooks) { h.Decisions.RoleUnchecked = true }},
	{Name: "n1-any-backend", Rule: "N-1", Sim: "any-backend", Breaks: "the consumer accepts references for any backend",
		Apply: func(h *server.Hooks) { h.Decisions.AnyBackend = true }}, // the core's switch: the sim mutant sets the same
	{Name: "s1-shutdown-ignores-id", Rule: "S-1", Sim: "shutdown-ignores-id", Breaks: "Shutdown accepts any non-empty expected_instance_id",
		Apply: func(h *server.Hooks) { h.Decisions.ShutdownIgnoresID = true }}, // the core's switch: the sim mutant sets the same
	{Name: "q1-release-on-any-error", Rule: "Q-1", Topology: TopologyTCPFaults, Breaks: "the consumer releases its buffers on any transfer error, even an uncertain one", Sim: "consumer-frees-on-transfer-error",
		Apply: func(h *server.Hooks) { h.Decisions.ReleaseOnUncertain = true }}, // the core's switch: the sim mutant sets the same
	{Name: "q2-plain-invalid-argument-is-definite", Rule: "Q-2", Topology: TopologyTCPFaults, Sim: "plain-invalid-argument-definite", Breaks: "the consumer treats INVALID_ARGUMENT without the before-write trailer as a definite rejection",
		Apply: func(h *server.Hooks) { h.Decisions.PlainInvalidArgumentDefinite = true }}, // the core's switch: the sim mutant sets the same
	{Name: "q3-invalid-argument-after-removal", Rule: "Q-3", Topology: TopologyTCPFaults, Sim: "invalid-argument-after-removal", Breaks: "the producer answers INVALID_ARGUMENT for a WRITE that failed after the entry left its table",
		Apply: func(h *server.Hooks) { h.Decisions.InvalidArgumentAfterRemoval = true }}, // the core's switch: the sim mutant sets the same
	{Name: "q5-lock-across-transfer", Rule: "Q-5", Topology: TopologyTCPFaults, Breaks: "the consumer holds its engine lock across the TransferEncoderCache call",
		SimNA: simNALockAcrossTransfer, SimSelfTest: "lock-across-transfer",
		Apply: func(h *server.Hooks) { h.HoldLockAcrossTransfer = true }},
	{Name: "c4-free-on-cancel", Rule: "C-4", Topology: TopologyTCPFaults, Sim: "free-on-cancel", Breaks: "a consumer cancelled mid-transfer frees its buffers without waiting for the outcome",
		Apply: func(h *server.Hooks) { h.Decisions.FreeOnCancel = true }, // the core's switch: the sim mutant sets the same
		// The kill needs the cancelled-while-held fault scenario (one
		// faulted handoff in five, at most one a check): the default seed
		// draws it in the 70th check, 17 s in, and on a loaded machine
		// (load 10) an earlier check once failed instead on a timing it
		// could not replay ("flaky replay", the row failed); seed 8 draws
		// it in the 10th check, in 1 action, 4 s in.
		PropsSeed: 8},
	{Name: "b2-text-keyed-cache", Rule: "B-2", Sim: "text-keyed-cache", Breaks: "the prefix cache is keyed by token ids only, so two images with one prompt share an answer",
		Apply: func(h *server.Hooks) { h.Model.TokensOnlyKey = true }, // the lm switch: the sim mutant sets the same
		AlsoBreaks: map[string]string{
			"H-5": "every image with one prompt shares the first one's answer, so two different images sent with one uuid do too",
			"B-1": "cross-image reuse in the consumer's prefix cache also makes an E+PD answer differ from its (unbroken) baseline",
		},
		SparesBaseline: true},
	{Name: "h5-uuid-identity", Rule: "H-5", Sim: "uuid-identity", Breaks: "MediaItem.uuid stands in for the content hash",
		Apply: func(h *server.Hooks) { h.Model.UUIDIdentity = true }}, // the lm switch: the sim mutant sets the same
	{Name: "c6-encoder-failure-keeps-reservation", Rule: "C-6", Level: LevelLifecycle, Sim: "encoder-failure-keeps-reservation", Breaks: "a publish whose encoder step fails keeps its reserved bytes and table entry (no AbandonPublish)",
		Apply: func(h *server.Hooks) { h.Decisions.KeepReservationOnEncoderFailure = true }},
	{Name: "su6-entry-id-from-content", Rule: "SU-6", Level: LevelLifecycle, Sim: "entry-id-from-content", Breaks: "entry ids derive from the items' content hashes, so a second publish of the same media collides with the first entry",
		Apply: func(h *server.Hooks) { h.Decisions.EntryIDFromContent = true }},
	{Name: "x2-no-expiry-collection", Rule: "X-2", Level: LevelLifecycle, Sim: "no-expiry-collection", Breaks: "the producer's collector never expires entries past their TTL",
		Apply: func(h *server.Hooks) { h.Decisions.NoExpiryCollection = true }}, // the core's switch (ProducerTable.Collect): the sim mutant sets the same
	{Name: "h1-premultiplied-hash", Rule: "H-1", Level: LevelLifecycle, Sim: "premultiplied-hash", Breaks: "the content hash is taken over premultiplied RGBA64 pixels, so alpha changes colours and alpha-0 pixels collide",
		Apply: func(h *server.Hooks) { h.ContentHashing.Premultiplied = true }}, // the contenthash switch: the sim mutant sets the same
	{Name: "h4-wire-bytes-hash", Rule: "H-4", Level: LevelLifecycle, Sim: "wire-bytes-hash", Breaks: "the content hash is taken over the wire bytes, so pixel-equal media in different encodings hash differently",
		Apply: func(h *server.Hooks) { h.ContentHashing.WireBytes = true }}, // the contenthash switch: the sim mutant sets the same
	{Name: "c2-scatter-shifts-siblings", Rule: "C-2", Level: LevelLifecycle, Sim: "executor:c2-scatter-shifts-siblings", Breaks: "a batch's completion advances the item offset only past members still pending, so a cancelled member's slice goes to its next sibling",
		Apply: func(h *server.Hooks) { h.ExecutorMutation.ScatterLiveOnly = true },
		// The default seed's first failing check is 29 actions long and its
		// replay depends on how the batch forms; seed 5 kills in the first
		// check, in 3 actions, the same way on every run.
		PropsSeed: 5},
	{Name: "c3-view-kept-after-end", Rule: "C-3", Level: LevelLifecycle, Sim: "executor:c3-view-kept-after-end", Breaks: "a request that ends before its first context step keeps its view, so the batch's storage is never freed",
		Apply: func(h *server.Hooks) { h.ExecutorMutation.KeepViewOnEnd = true }},
	{Name: "c3-release-every-step", Rule: "C-3", Level: LevelLifecycle, Sim: "executor:c3-release-every-step", Breaks: "release is not idempotent: a decode loop releasing every step drops a view reference each time and frees the storage under its siblings",
		Apply: func(h *server.Hooks) { h.ExecutorMutation.ReleaseEveryCall = true },
		// The default seed's first failing check is 12 actions long (over
		// the kill table's 10); seed 8 kills in the first check, in 1.
		PropsSeed: 8},
	{Name: "r1-context-computed-twice", Rule: "R-1", Level: LevelLifecycle, Sim: "executor:r1-context-computed-twice", Breaks: "the first context step computes the cross-attention KV twice per admission",
		Apply: func(h *server.Hooks) { h.ExecutorMutation.ContextTwice = true }}, // the executor core's switch: the executor world sets the same
	{Name: "r2-recompute-skips-encoder", Rule: "R-2", Level: LevelLifecycle, Sim: "executor:r2-recompute-skips-encoder", Breaks: "a preempted request recomputes from the view it had, whose storage was freed, instead of running the encoder again",
		Apply: func(h *server.Hooks) { h.ExecutorMutation.RecomputeWithoutEncoder = true }}, // the executor core's switch: the executor world sets the same
	{Name: "h2-missing-hash-keyed-by-tokens", Rule: "H-2", Level: LevelLifecycle, Sim: "missing-hash-keyed-by-tokens", Breaks: "an item without content hash is keyed in the prefix cache by its placeholder tokens alone (its fresh identity is left out of the key)",
		Apply: func(h *server.Hooks) { h.Model.DropFreshIdentities = true }, // the lm switch: the sim mutant sets the same
		// The default seed's first failing check is 14 actions long (over
		// the kill table's 10); seed 5 kills in the first check, in 3.
		PropsSeed: 5},
	{Name: "q3-free-source-on-failure", Rule: "Q-3", Topology: TopologyTCPFaults, Sim: "producer-frees-source-on-failure", Breaks: "the producer frees a transfer's source after a failure past the claim instead of quarantining it, while the WRITE may still read it",
		Apply: func(h *server.Hooks) { h.Decisions.FreeSourceOnTransferFailure = true }}, // the core's switch: the sim mutant sets the same
	{Name: "x1-cleanup-failure-swallowed", Rule: "X-1", Level: LevelLifecycle, Sim: "cleanup-failure-swallowed", Breaks: "a removal that fails is logged and forgotten: Health stays READY and new handoffs are admitted",
		Apply: func(h *server.Hooks) { h.Decisions.SwallowCleanupFailure = true }}, // the core's switch: the sim mutant sets the same
	{Name: "s2-shutdown-before-cleanup", Rule: "S-2", Level: LevelLifecycle, Sim: "shutdown-before-cleanup", Breaks: "the producer's drain returns before the removals of its unconsumed entries finish, so they stay consumable",
		Apply: func(h *server.Hooks) { h.Decisions.DrainBeforeCleanup = true }},
	{Name: "c2-late-completion-revives", Rule: "C-2", Level: LevelLifecycle, Sim: "late-completion-revives", Breaks: "an encoder step that completes after its publish was cancelled publishes the entry anyway, for a client that never gets it",
		Apply: func(h *server.Hooks) { h.Decisions.ReviveLateCompletion = true }}, // the core's switch: the sim mutant sets the same
	{Name: "q2-refused-connection-uncertain", Rule: "Q-2", AlsoBreaks: map[string]string{"SE-4": "a refused connection quarantines the consumer, which is what SE-4's forged and stale references must never do"}, Topology: TopologyTCPFaults, SuiteOnly: suiteOnlySecurity,
		Breaks: "a transfer whose connection to the producer was refused (nothing sent) counts as uncertain: the consumer quarantines for good, so a stale or forged reference takes it offline",
		Apply:  func(h *server.Hooks) { h.Decisions.RefusedConnectionUncertain = true }}, // the core's switch
	{Name: "q6-quarantine-never-ends", Rule: "Q-6", Topology: TopologyTCPFaults, Sim: "quarantine-never-ends", PropsNA: propsNAQuarantineEnd,
		Breaks: "a quarantine lasts for the life of the process even once the backend proved no write can land (the engine before Q-6)",
		Apply:  func(h *server.Hooks) { h.Decisions.NeverEndQuarantine = true }}, // the core's switch: the sim mutant sets the same
	{Name: "q6-keep-carrier-open", Rule: "Q-6", Topology: TopologyTCPFaults, Sim: "keep-carrier-open", PropsNA: propsNAQuarantineEnd,
		Breaks: "the consumer keeps the producer client that carried an uncertain tcp transfer open, so its quarantine lasts for as long as the producer lives and keeps that connection healthy (the engine before the consumer retired its carriers)",
		Apply:  func(h *server.Hooks) { h.Decisions.KeepCarrierOpen = true }}, // the core's switch: the sim mutant sets the same
	{Name: "se3-trust-any-producer", Rule: "SE-3", AlsoBreaks: map[string]string{"SE-4": "dialling an untrusted endpoint a forged reference names is one of the SE-4 attacks"}, Topology: TopologyTCPFaults, SuiteOnly: suiteOnlySecurity,
		Breaks: "the consumer dials whatever producer endpoint a reference names",
		Apply:  func(h *server.Hooks) { h.TrustProducer = TrustAnyProducer }},
	{Name: "se3-trust-any-consumer-agent", Rule: "SE-3", Topology: TopologyTCPFaults, SuiteOnly: suiteOnlySecurity,
		Breaks: "the tcp producer WRITEs into whatever consumer agent a TransferEncoderCache names",
		Apply:  func(h *server.Hooks) { h.TrustConsumerAgent = func(string) error { return nil } }},
	{Name: "se4-cancel-cancels-transfer", Rule: "SE-4", AlsoBreaks: map[string]string{"C-4": "cancelling the transfer call with the client makes the consumer's cancelled receive end before its outcome is known"}, Topology: TopologyTCPFaults, Sim: "cancel-cancels-transfer",
		Breaks: "a client's cancel cancels the consumer's transfer call, whose outcome is then uncertain: an abandoned transfer quarantines the consumer",
		Apply:  func(h *server.Hooks) { h.Decisions.CancelCancelsTransfer = true }}, // the core's switch: the sim mutant sets the same
	{Name: "se4-no-decode-budget", Rule: "SE-4", Topology: TopologyTCPFaults, SuiteOnly: suiteOnlyDecode,
		Breaks: "media are decoded without the global decode budget: every request's images are decoded and held at once, however many arrive together (the engine before SE-4's bound)",
		Apply:  func(h *server.Hooks) { h.NoDecodeBudget = true }},
	{Name: "se4-no-jpeg-scan-bound", Rule: "SE-4", Topology: TopologyTCPFaults, SuiteOnly: suiteOnlyScans,
		Breaks: "a JPEG of any number of scans is decoded: a few hundred KB of empty progressive scans hold the decode (its slot and its share of the budget) for as long as the scans take, and every other publish waits (the engine before attack F1's fix)",
		Apply:  func(h *server.Hooks) { h.NoJPEGScanBound = true }},
	{Name: "se4-forward-unbounded-reference", Rule: "SE-4", Topology: TopologyTCPFaults, SuiteOnly: suiteOnlySecurity,
		Breaks: "the consumer forwards a transfer reference's producer_endpoint unbounded, so a padded one makes a TransferEncoderCache the producer's transport refuses without the before-write trailer, and the consumer quarantines (attack A1)",
		Apply:  func(h *server.Hooks) { h.UnboundedReferenceFields = true }},
	{Name: "se5-static-grpc-health", Rule: "SE-5", Topology: TopologyTCPFaults, SuiteOnly: suiteOnlySecurity,
		Breaks: "grpc.health.v1 is set only at start and at the drain, so it says SERVING while Health is NOT_READY",
		Apply:  func(h *server.Hooks) { h.StaticGRPCHealth = true }},
	{Name: "se1-client-cert-optional", Rule: "SE-1", Topology: TopologyTCPSecure, SuiteOnly: noTransportSecurityModel,
		Breaks: "the listeners ask for a client certificate but serve a peer without one (TLS client auth not required)",
		Apply: func(h *server.Hooks) {
			h.ServerTLS = func(c *tls.Config) { c.ClientAuth = tls.VerifyClientCertIfGiven }
		}},
	{Name: "se1-plaintext-metrics", Rule: "SE-1", Topology: TopologyTCPSecure, SuiteOnly: noTransportSecurityModel,
		Breaks: "/metrics is served in plaintext although every other listener serves TLS",
		Apply:  func(h *server.Hooks) { h.PlaintextMetrics = true }},
	{Name: "se2-shutdown-unauthorized", Rule: "SE-2", Topology: TopologyTCPSecure, SuiteOnly: noTransportSecurityModel,
		Breaks: "Shutdown skips the operator check: anyone who read the instance id from GetServerInfo can shut the engine down",
		Apply: func(h *server.Hooks) {
			h.AuthorizeOperator = func(call string, operator bool) bool { return operator || call == "Shutdown" }
		}},
	{Name: "se2-abort-ignores-caller", Rule: "SE-2", Topology: TopologyTCPSecure, SuiteOnly: noTransportSecurityModel,
		Breaks: "Abort(request_id) cancels a request whoever asks, not only its own caller's",
		Apply:  func(h *server.Hooks) { h.AbortOwner = func(string, string, bool) bool { return true } }},
	{Name: "c3-keep-output-after-cancel", Rule: "C-3", Level: LevelLifecycle, Sim: "keep-output-after-cancel", Breaks: "a publish cancelled once its output is ready writes the entry and keeps it although its EncoderReady never reached the client",
		Apply: func(h *server.Hooks) { h.Decisions.KeepOutputAfterCancel = true }}, // the core's switch: the sim mutant sets the same
}

// All returns every mutant, sorted by name.
func All() []Mutant {
	out := append([]Mutant(nil), all...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// inProcess are the mutants of the race, near-pair and volume cases
// (conformance/suite races.go, baseline.go): each breaks one decision the
// case named after its rule checks. (The C-7 burst of cancelled publishes
// kills c2-late-completion-revives, a consequence the suite documents: it
// cancels only before any EncoderReady could have been sent, where a
// C-7-only defect does not show.) They have no property or simulator
// counterpart yet, so All leaves them out (the e2e kill table starts
// processes for each of its rows); InProcess lists them, ByName finds them,
// and conformance/mutants' TestInProcessMutantsKilled runs their killers
// against in-process engines.
var inProcess = []Mutant{
	{Name: "su1-process-local-claim", Rule: "SU-1", Breaks: "the consumer records what it consumed in its own process and reads the entry in place, deleting it after, instead of claiming it by an atomic rename: two consumer processes can both consume one reference",
		Apply: func(h *server.Hooks) { h.Claim = processLocalClaim }},
	{Name: "su3-release-answers-from-table", Rule: "SU-3", Breaks: "Abort(encoder_cache) answers from the producer's table alone, without looking at which entries consumers claimed: ABORTED for an entry a consumer claimed first, so a consume that wins its race against the Abort gets tokens beside ABORTED",
		Apply: func(h *server.Hooks) { h.ReleaseAnswersFromTable = true }},
	{Name: "x2-collector-trusts-table", Rule: "X-2", Level: LevelLifecycle, Breaks: "the collector expires entries from its table without looking at which of them consumers claimed, and reports an entry that vanished as a failed cleanup: a consume just before the TTL makes the producer NOT_READY",
		Apply: func(h *server.Hooks) { h.CollectorTrustsTable = true }},
	{Name: "b2-published-hash-without-dimensions", Rule: "B-2", Breaks: "the producer publishes a content hash over the pixel bytes without width and height, so the same bytes as 30x150 and 150x30 share the consumer's prefix-cache entry (H-1 too)",
		Apply: func(h *server.Hooks) {
			h.PublishedContentHash = func(_ string, img image.Image) string { return sampledPixelHash(img, 1) }
		}},
	{Name: "b2-published-hash-of-sampled-pixels", Rule: "B-2", Breaks: "the producer publishes a content hash over every second pixel of each row, so images that differ in one pixel share the consumer's prefix-cache entry (H-1 too)",
		Apply: func(h *server.Hooks) {
			h.PublishedContentHash = func(_ string, img image.Image) string {
				b := img.Bounds()
				return fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprintf("%dx%d:%s", b.Dx(), b.Dy(), sampledPixelHash(img, 2)))))
			}
		}},
	{Name: "b1-shared-receive-buffer", Rule: "B-1", Breaks: "the consumer decodes a claimed entry through one buffer shared by concurrent receives: under load a request gets another's embeddings (killed by the volume case, BATON_VOLUME=1)",
		Apply: func(h *server.Hooks) { h.Claim = sharedBufferClaim }},
}

// InProcess returns the mutants the kill table does not start (see
// inProcess), sorted by name.
func InProcess() []Mutant {
	out := append([]Mutant(nil), inProcess...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ByName returns the mutant called name (of All or InProcess).
func ByName(name string) (Mutant, error) {
	for _, m := range append(append([]Mutant(nil), all...), inProcess...) {
		if m.Name == name {
			return m, nil
		}
	}
	return Mutant{}, fmt.Errorf("mutants: no mutant %q", name)
}

// localClaims is the su1-process-local-claim mutant's record of consumed
// entries, one set per engine (an engine is one process in production).
var localClaims sync.Map // *server.Engine -> *claimSet

type claimSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

// processLocalClaim claims an entry by recording it in this engine's own
// set, reads it in place, and deletes it afterwards: no atomic step
// another process could lose.
func processLocalClaim(e *server.Engine, ref handoff.Reference) ([]server.ClaimedItem, error) {
	v, _ := localClaims.LoadOrStore(e, &claimSet{ids: map[string]bool{}})
	set := v.(*claimSet)
	set.mu.Lock()
	if set.ids[ref.EntryID] {
		set.mu.Unlock()
		return nil, fmt.Errorf("%w: SU-2 entry %s was consumed here", shareddir.ErrGone, ref.EntryID)
	}
	set.ids[ref.EntryID] = true
	set.mu.Unlock()
	items, err := readWithoutClaim(e, ref)
	if err != nil {
		return nil, err
	}
	localClaimReaders.readAndWait(ref.EntryID)
	_ = os.Remove(filepath.Join(e.CacheDir(), ref.ProducerInstanceID, ref.EntryID+".safetensors"))
	return items, nil
}

// localClaimReaders holds the su1-process-local-claim mutant's window open:
// a consumer that read an entry waits up to localClaimWindow for a second
// consumer to read it too before deleting it. The bug's real window is the
// read, about a millisecond, which a loaded 2-core machine's scheduler
// closes in some runs; held open, two consumes sent at once both succeed
// in the first round on any machine, so the kill does not depend on the
// draw.
var localClaimReaders = &entryReaders{byEntry: map[string]*readers{}}

// localClaimWindow bounds how long a read waits for a second reader.
const localClaimWindow = 2 * time.Second

type entryReaders struct {
	mu      sync.Mutex
	byEntry map[string]*readers
}

type readers struct {
	n      int
	second chan struct{} // closed when a second reader has read the entry
}

// readAndWait records one more read of entry and waits, for the first
// reader, until a second has read it or localClaimWindow passed.
func (r *entryReaders) readAndWait(entry string) {
	r.mu.Lock()
	rd := r.byEntry[entry]
	if rd == nil {
		rd = &readers{second: make(chan struct{})}
		r.byEntry[entry] = rd
	}
	rd.n++
	if rd.n == 2 {
		close(rd.second)
	}
	first := rd.n == 1
	r.mu.Unlock()
	if first {
		select {
		case <-rd.second:
		case <-time.After(localClaimWindow):
		}
	}
}

// sharedBuffer is the b1-shared-receive-buffer mutant's one buffer: the
// tensors of the last entry claimed, how many claims are in flight, and
// partner, closed when a claim that was alone gets company.
var sharedBuffer struct {
	mu       sync.Mutex
	inFlight int
	partner  chan struct{}
	last     []shareddir.Tensor
}

// sharedBufferPartnerWait is how long a claim that starts alone waits for
// a second one, so that the overlap the bug needs happens on a 2-core CI
// machine too (where 8 requests in flight spend their time encoding and
// their claims, microseconds each, would rarely meet); the kill must not
// depend on the scheduler (CI's volume run once let this mutant survive).
const sharedBufferPartnerWait = 2 * time.Second

// sharedBufferClaim claims by rename as the engine does, but a claim that
// overlaps another decodes the tensors the last claim left in the shared
// buffer (same shapes under one preset), as a buffer reused across
// concurrent receives would. A claim that starts alone waits up to
// sharedBufferPartnerWait for another.
func sharedBufferClaim(e *server.Engine, ref handoff.Reference) ([]server.ClaimedItem, error) {
	sharedBuffer.mu.Lock()
	sharedBuffer.inFlight++
	overlapped := sharedBuffer.inFlight > 1
	if sharedBuffer.inFlight == 1 {
		sharedBuffer.partner = make(chan struct{})
	} else if sharedBuffer.partner != nil {
		close(sharedBuffer.partner) // the one claim that was alone has company
		sharedBuffer.partner = nil
	}
	partner := sharedBuffer.partner
	sharedBuffer.mu.Unlock()
	defer func() {
		sharedBuffer.mu.Lock()
		sharedBuffer.inFlight--
		sharedBuffer.mu.Unlock()
	}()
	if !overlapped {
		select {
		case <-partner:
			overlapped = true
		case <-time.After(sharedBufferPartnerWait):
		}
	}
	tensors, meta, err := shareddir.Claim(shareddir.OSFS{}, e.CacheDir(), ref.ProducerInstanceID, ref.EntryID, crand.Reader, ref.PayloadBytes()+1<<20)
	if err != nil {
		return nil, err
	}
	sharedBuffer.mu.Lock()
	use := tensors
	if overlapped && len(sharedBuffer.last) == len(tensors) {
		use = sharedBuffer.last
	}
	sharedBuffer.last = tensors
	sharedBuffer.mu.Unlock()
	return server.MatchEntry(ref, use, meta)
}

// sampledPixelHash is SHA-256 over the 8-bit RGBA bytes of every step-th
// pixel of each row (x = 0, step, 2*step, ...), without the dimensions.
func sampledPixelHash(img image.Image, step int) string {
	b := img.Bounds()
	h := sha256.New()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x += step {
			r, g, bl, a := img.At(x, y).RGBA()
			h.Write([]byte{byte(r >> 8), byte(g >> 8), byte(bl >> 8), byte(a >> 8)})
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// readWithoutClaim reads the entry file in place instead of renaming it
// (shareddir.Receive under its SU-1 switch).
func readWithoutClaim(e *server.Engine, ref handoff.Reference) ([]server.ClaimedItem, error) {
	tensors, meta, err := shareddir.Receive(shareddir.OSFS{}, e.CacheDir(), ref.ProducerInstanceID, ref.EntryID, crand.Reader, 1<<20, shareddir.Mutants{ReadWithoutClaim: true})
	if err != nil {
		return nil, err
	}
	return server.MatchEntry(ref, tensors, meta)
}
