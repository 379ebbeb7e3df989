// Package suite holds baton's conformance cases for the baton.encoder.v1
// handoff contract (/work/shared/spec/CONTRACT.md). Each case is a plain
// exported function of (ctx, t TB, target.Target) with a one-line doc, in
// the style of grpc-go's interop package, and is registered in one table,
// Cases(), which is the single source of truth: the Ginkgo binding
// (DescribeSuite), conformance.Run (plain `go test`) and the `baton check`
// CLI all iterate it.
//
// The suite sees an implementation only through target.Target; it never
// imports an engine or the simulator (ARCHITECTURE.md, "Conformance for any
// implementation").
//
// Outcomes (CONTRACT "Outcomes of a check"): a case passes, fails (Errorf or
// Fatalf), or skips with a message starting with NotApplicablePrefix or
// NotVerifiablePrefix; a failure of the harness itself is a Fatalf starting
// with HarnessErrorPrefix. OutcomeOf maps a finished case to its outcome.
//
// What a case needs of a target is data (Case.Needs): Case.Execute decides
// from it before the case runs (Case.Decide), and the dry-run plan
// (conformance/check) predicts from the same call. Each case asserts its
// own rule only; the few documented exceptions are Consequences. Core
// cases read no counter (CONTRACT section 4); Lifecycle cases read them
// through one check, CheckObservables. The volume cases run only when the
// environment sets BATON_VOLUME=1 (EnvVolume): `make test` leaves them out.
package suite

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/baton-dev/baton/conformance/target"
)

// Level is a conformance level of CONTRACT section 5.
type Level string

// The conformance levels (CONTRACT section 5).
const (
	// LevelCore needs only the wire API (plus limits declared in the profile).
	LevelCore Level = "core"
	// LevelLifecycle needs Core plus observables and test hooks.
	LevelLifecycle Level = "lifecycle"
	// LevelFaults needs Lifecycle plus the fault proxy.
	LevelFaults Level = "faults"
)

// TB is the part of *testing.T (and Ginkgo's GinkgoT()) a case uses.
//
// Fatalf and Skipf end the case (runtime.Goexit under testing, a panic under
// Ginkgo); under Ginkgo, Errorf ends the case too. Cases call TB only from
// the goroutine that runs them and release what they published in deferred
// calls, so cleanup runs however the case ends.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Failed() bool
}

// Case is one conformance case.
type Case struct {
	// Rule is the CONTRACT rule ID the case checks, e.g. "SU-2".
	Rule string
	// Name is the full case name; it starts with Rule and a space, e.g.
	// "SU-2 replay of a consumed reference is rejected before any write".
	Name string
	// Level is the conformance level of Rule.
	Level Level
	// Needs is what the case needs of a target, as data: Execute decides
	// from it before Run (Decide), and so does the dry-run plan.
	Needs Needs
	// Labels are the case's Ginkgo labels beyond the rule ID and
	// "level:<level>" (which the binding adds): those derived from Needs
	// ("topology:E+PD", "needs:baseline", ..., "destructive") followed by
	// the registry's own ("slow", "volume", "under-faults"). Cases() fills
	// them in; a registry entry lists only its own.
	Labels []string
	// Run executes the case against tg. It never imports an engine. Call
	// it through Execute, which checks Needs first.
	Run func(ctx context.Context, t TB, tg target.Target)
	// Destructive cases make an instance unusable (an accepted Shutdown);
	// they run last, or against a target started for them alone, and need
	// the profile's permission (destructive: true).
	Destructive bool
	// UnderFaults marks a Faults-level copy of a Core or Lifecycle case:
	// Execute runs Run with the fault proxy injecting faults (faults.go).
	UnderFaults bool
	// ViaPrefill marks the E+P+D copy of a consumer case: Execute runs Run
	// with P as the consumer and D decoding its KV sessions (faults.go).
	ViaPrefill bool
	// TakesDown declares that the case may leave an endpoint down, draining
	// or NOT_READY on purpose (Abort(all_requests), an instance it poisons
	// and does not restart); Destructive implies it (MayTakeDown). The
	// runner probes every endpoint after each case (conformance/check): an
	// endpoint that went away during a case that declares neither fails
	// the case's rule ("the target went down during this case"), and the
	// cases after it are errors until the endpoint is READY again. Such
	// cases run last, with the destructive ones.
	TakesDown bool
	// SendsShutdown marks a case that sends requests a conformant engine
	// refuses but that take it down when wrongly accepted (Shutdown with an
	// empty or foreign instance id, Abort(all_requests) from a client that
	// is not the operator): it runs after every other case that does not
	// take endpoints down, so a wrong answer costs only the cases after it.
	SendsShutdown bool
}

// MayTakeDown reports whether the case declares that it may leave an
// endpoint down, draining or NOT_READY (Destructive or TakesDown).
func (c Case) MayTakeDown() bool { return c.Destructive || c.TakesDown }

// Labels used on cases, beyond the rule ID and level.
const (
	// LabelEPD marks a case about the E+PD topology.
	LabelEPD = "topology:E+PD"
	// LabelEPPD marks a case about the E+P+D topology.
	LabelEPPD = "topology:E+P+D"
	// LabelNeedsFormat marks a case that needs Profile.ReferenceFormat
	// (Needs.ReferenceFormat or Needs.FormatChecks).
	LabelNeedsFormat = "needs:reference-format"
	// LabelNeedsQuota marks a case that needs Profile.ProducerQuotaBytes.
	LabelNeedsQuota = "needs:producer-quota"
	// LabelNeedsBaseline marks a case that needs the baseline (aggregated) engine.
	LabelNeedsBaseline = "needs:baseline"
	// LabelDestructive marks a case that shuts an instance down.
	LabelDestructive = "destructive"
	// LabelSlow marks a case that waits for time to pass (a TTL) or loops.
	LabelSlow = "slow"
	// LabelVolume marks a case that sends a large volume of work (many
	// large images, Needs.Volume): it runs only with BATON_VOLUME=1
	// (EnvVolume), so `make test` leaves it out, and it gets no E+P+D or
	// under-faults copy.
	LabelVolume = "volume"
)

// EPD and EPPD are the Needs of a case about one topology and nothing else.
var (
	EPD  = Needs{Topology: target.TopologyEPD}
	EPPD = Needs{Topology: target.TopologyEPPD}
)

// with returns n with the changes of f applied (a copy).
func (n Needs) with(f func(*Needs)) Needs {
	f(&n)
	n.MediaFormats = append([]string(nil), n.MediaFormats...)
	return n
}

// Discovery notes of the cases that learn only from the target's answers
// whether they can check their rule (Needs.Discovers).
const (
	discoversExecutor = "the executor.* counters and batching (an engine without an in-engine executor may omit them: CONTRACT section 4)"
	discoversHook     = "whether the target acts on the test hook (a hook it ignores leaves the rule unchecked)"
)

// discovering returns n with Discovers set to the notes joined.
func (n Needs) discovering(notes ...string) Needs {
	return n.with(func(n *Needs) { n.Discovers = strings.Join(notes, "; ") })
}

// Cases returns every registered case in a stable order: by rule family in
// the order of CONTRACT section 5, destructive cases last. It returns a
// fresh slice on every call.
func Cases() []Case {
	baseline := EPD.with(func(n *Needs) { n.Baseline = true })
	formatChecks := EPD.with(func(n *Needs) { n.FormatChecks = true })
	hooked := func(base Needs, obs bool) Needs {
		return base.with(func(n *Needs) { n.TestHooks, n.Observables = true, obs })
	}
	cs := []Case{
		// SU: single use (su.go, races.go).
		{Rule: "SU-1", Name: "SU-1 concurrent consumes of one reference: exactly one gets tokens", Run: SU1ConcurrentConsumesOneWins, Needs: EPD},
		{Rule: "SU-1", Name: "SU-1 one reference raced by two consumer processes: exactly one gets tokens", Run: SU1TwoConsumerProcessesOneWins, Needs: EPD.with(func(n *Needs) { n.SecondConsumer = true })},
		{Rule: "SU-2", Name: "SU-2 replay of a consumed reference is rejected before any write", Run: SU2ReplayRejected, Needs: EPD},
		{Rule: "SU-2", Name: "SU-2 a released reference is rejected before any write", Run: SU2ReleasedRejected, Needs: EPD},
		{Rule: "SU-2", Name: "SU-2 an expired reference is rejected before any write", Run: SU2ExpiredRejected, Needs: EPD, Labels: []string{LabelSlow}},
		{Rule: "SU-3", Name: "SU-3 Abort of a published reference answers ABORTED once, then ALREADY_FINISHED", Run: SU3AbortReleasesOnce, Needs: EPD},
		{Rule: "SU-3", Name: "SU-3 Abort of a consumed reference answers ALREADY_FINISHED", Run: SU3AbortAfterConsume, Needs: EPD},
		{Rule: "SU-3", Name: "SU-3 Abort of an expired reference answers ALREADY_FINISHED", Run: SU3AbortAfterExpiry, Needs: EPD, Labels: []string{LabelSlow}},
		{Rule: "SU-3", Name: "SU-3 Abort raced against a consume of the same reference: ABORTED and a rejection, or tokens and ALREADY_FINISHED", Run: SU3AbortRacesConsume, Needs: EPD},
		{Rule: "SU-4", Name: "SU-4 malformed references are rejected by the consumer and consume nothing", Run: SU4MalformedConsumeRejected, Needs: EPD},
		{Rule: "SU-4", Name: "SU-4 Abort with a malformed reference is rejected and releases nothing", Run: SU4MalformedAbortRejected, Needs: EPD},
		{Rule: "SU-5", Name: "SU-5 distinct publishes get distinct references", Run: SU5DistinctReferences, Needs: EPD},
		{Rule: "SU-5", Name: "SU-5 a reference altered in any byte, truncated, extended or re-addressed consumes and releases nothing", Run: SU5TamperedReferencesRejected, Needs: EPD},
		{Rule: "SU-5", Name: "SU-5 reference ids carry 128 random bits (baton-json-v1)", Run: SU5ReferenceIDsUnguessable, Needs: formatChecks},
		{Rule: "SU-5", Name: "SU-5 a forged reference (one entry's state, another's id) is rejected (baton-json-v1)", Run: SU5ForgedReferenceRejected, Needs: formatChecks},
		{Rule: "SU-5", Name: "SU-5 path-like references are rejected by consumer and producer", Run: SU5PathReferencesRejected, Needs: EPD},
		{Rule: "SU-5", Name: "SU-5 a reference naming another producer instance is rejected", Run: SU5ForeignInstanceRejected, Needs: EPD},

		// L: limits and validation (limits.go).
		{Rule: "L-1", Name: "L-1 a reference over 64 KiB is rejected before any token", Run: L1OversizeReferenceRejected, Needs: EPD},
		{Rule: "L-1", Name: "L-1 a valid reference padded past 64 KiB is INVALID_ARGUMENT even with a backend the consumer does not accept (baton-json-v1)", Run: L1PaddedReferenceAtTheBound, Needs: formatChecks},
		{Rule: "L-1", Name: "L-1 a decode preparation over 2 MiB is rejected before any token", Run: L1OversizeDecodePreparationRejected, Needs: EPPD},
		{Rule: "L-2", Name: "L-2 a multimodal decode without its decode preparation is rejected", Run: L2DecodeWithoutPreparationRejected, Needs: EPPD},
		{Rule: "L-3", Name: "L-3 video and audio items are UNIMPLEMENTED on producer and baseline", Run: L3VideoAudioUnimplemented, Needs: EPD},
		{Rule: "L-4", Name: "L-4 requests sent to the wrong role are FAILED_PRECONDITION", Run: L4WrongRoleRejected, Needs: EPD},
		{Rule: "L-5", Name: "L-5 the producer's byte quota ends in RESOURCE_EXHAUSTED and recovers after release", Run: L5ProducerQuotaEnforced, Labels: []string{LabelSlow},
			Needs: EPD.with(func(n *Needs) {
				n.ProducerQuota = true
				n.Discovers = fmt.Sprintf("how many publishes the declared quota holds (more than %d: not verifiable at Core speed)", l5MaxAttempts)
			})},
		{Rule: "L-6", Name: "L-6 malformed, oversize and url media are rejected before anything is published", Run: L6MalformedMediaRejected, Needs: EPD},

		// N: negotiation (negotiation.go).
		{Rule: "N-1", Name: "N-1 producer and consumer advertise their encoder capabilities", Run: N1CapabilitiesAdvertised, Needs: EPD},
		{Rule: "N-1", Name: "N-1 a reference for a backend the consumer does not accept is FAILED_PRECONDITION", Run: N1UnacceptedBackendRejected, Needs: EPD},
		{Rule: "N-2", Name: "N-2 text-only requests never touch the encoder", Run: N2TextOnlyBypassesEncoder, Needs: EPD},

		// S: shutdown (shutdown.go), non-destructive part.
		{Rule: "S-1", Name: "S-1 Shutdown with an empty or foreign instance id is refused and changes nothing", Run: S1ShutdownIdentityChecked, SendsShutdown: true},

		// B: baseline equivalence (baseline.go).
		{Rule: "B-1", Name: "B-1 E+PD answers and usage equal the aggregated baseline", Run: B1DisaggregatedMatchesBaseline, Needs: baseline},
		{Rule: "B-1", Name: "B-1 every required image format (PNG of each colour type and bit depth, interlaced; JPEG baseline and progressive) hands off as on the baseline", Run: B1RequiredFormatsMatchBaseline, Needs: baseline},
		{Rule: "B-1", Name: "B-1 E+P+D answers and usage equal the aggregated baseline", Run: B1EPPDMatchesBaseline, Needs: EPPD.with(func(n *Needs) { n.Baseline = true })},
		{Rule: "B-1", Name: "B-1 100 large images (1920x1080), 8 in flight, each answer equals the baseline", Run: B1LargeImagesUnderLoad, Needs: baseline.with(func(n *Needs) { n.Volume = true }), Labels: []string{LabelSlow}},
		{Rule: "B-2", Name: "B-2 different images with one prompt get their own answers despite a warm prefix cache", Run: B2DifferentImagesDifferentAnswers, Needs: baseline.discovering(discoversBaselinesAgree)},
		{Rule: "B-2", Name: "B-2 images that differ only in their dimensions, or in one pixel, get their own answers", Run: B2NearImagesDifferentAnswers, Needs: baseline.discovering(discoversBaselinesAgree)},

		// H: identity and hashing (hashing.go).
		{Rule: "H-3", Name: "H-3 a reference with a malformed content hash is rejected", Run: H3MalformedHashRejected, Needs: EPD.with(func(n *Needs) { n.ReferenceFormat = true })},
		{Rule: "H-5", Name: "H-5 two images sent with one MediaItem.uuid get their own answers", Run: H5UUIDIsNotContentHash,
			Needs: baseline.discovering(discoversBaselinesAgree, "whether the consumer tells the two images apart without uuid (B-2)")},

		// Lifecycle level: cancellation, hashing, single use, health and
		// cleanup (lifecycle.go, races.go), the in-engine executor and H-2
		// (executor.go).
		{Rule: "C-1", Name: "C-1 a publish cancelled while its encoder step is held publishes and keeps nothing", Run: C1CancelledHeldPublishPublishesNothing, Needs: hooked(EPD, true)},
		{Rule: "C-2", Name: "C-2 a publish cancelled while its batch is pending is not revived and never shifts its siblings' slices", Run: C2LateCompletionKeepsSiblingSlices,
			Needs: hooked(baseline, true).discovering(discoversExecutor, discoversBaselinesAgree)},
		{Rule: "C-3", Name: "C-3 an unconsumed output released by Abort frees its entry and batch storage", Run: C3ReleasedOutputFreesItsStorage, Needs: EPD.with(func(n *Needs) { n.Observables = true })},
		{Rule: "C-3", Name: "C-3 a request cancelled before its first context step frees its batch storage", Run: C3CancelBeforeContextStepFreesStorage,
			Needs: Needs{Baseline: true, TestHooks: true, Observables: true, Discovers: discoversHook}},
		{Rule: "C-3", Name: "C-3 a publish cancelled once its output is ready leaves no entry and frees its storage", Run: C3CancelledPublishLeavesNoEntry,
			Needs: hooked(EPD, true).with(func(n *Needs) { n.Discovers = discoversHook })},
		{Rule: "C-3", Name: "C-3 a batch sibling that decodes and releases every step leaves the other's slice intact", Run: C3SiblingSliceOutlivesOtherReleases,
			Needs: Needs{Baseline: true, TestHooks: true, Observables: true, Discovers: discoversExecutor}},
		{Rule: "C-5", Name: "C-5 a cancelled text-only request never waits for a held encoder step", Run: C5TextOnlyCancelDuringHeldEncoder, Needs: Needs{Baseline: true, TestHooks: true}},
		{Rule: "C-6", Name: "C-6 an encoder failure ends the request with one terminal error, releases its reservation and leaves the engine READY", Run: C6EncoderFailureEndsOneRequest, Needs: hooked(EPD, true)},
		{Rule: "C-7", Name: "C-7 a publish cancelled around its publication leaves nothing its client cannot reach", Run: C7CancelledAroundPublicationLeavesNothing, Needs: hooked(EPD, true)},
		{Rule: "C-7", Name: "C-7 a burst of publishes cancelled at random moments leaves nothing behind until a TTL", Run: C7CancelledBurstLeavesNothing, Needs: EPD.with(func(n *Needs) { n.Observables = true }), Labels: []string{LabelSlow}},
		{Rule: "R-1", Name: "R-1 each admission computes its context from the encoder output exactly once", Run: R1ContextComputedOncePerAdmission,
			Needs: baseline.with(func(n *Needs) { n.Observables, n.Discovers = true, discoversExecutor })},
		{Rule: "R-2", Name: "R-2 a request preempted after consumption recomputes and answers token-identically", Run: R2PreemptedRequestIsTokenIdentical,
			Needs: Needs{Baseline: true, TestHooks: true, Observables: true, Discovers: discoversExecutor}},
		{Rule: "H-1", Name: "H-1 content hashes equal the contract's SHA-256 over the decoded pixels and preset", Run: H1ContentHashFromDecodedPixels,
			Needs: EPD.with(func(n *Needs) {
				n.Discovers = "the producer's preprocessing preset (ServerInfo.extra[\"baton.preset\"], CONTRACT section 4), part of the hash's pre-image"
			})},
		{Rule: "H-2", Name: "H-2 a missing content hash disables prefix-cache reuse", Run: H2MissingHashDisablesReuse,
			Needs: hooked(baseline, false).discovering(discoversHook, discoversBaselinesAgree)},
		{Rule: "H-4", Name: "H-4 pixel-equal media in different encodings hash equal and answer equal", Run: H4PixelEqualMediaHashEqual, Needs: baseline},
		{Rule: "SU-6", Name: "SU-6 the same media published twice gives independent entries", Run: SU6SamePublishedTwiceIndependent, Needs: EPD},
		{Rule: "X-1", Name: "X-1 a failed cleanup makes the producer NOT_READY and refuse new requests", Run: X1FailedCleanupIsNotSwallowed,
			Needs: EPD.with(func(n *Needs) { n.TestHooks, n.Restart, n.Discovers = true, true, discoversHook })},
		{Rule: "X-2", Name: "X-2 an entry past its TTL is collected without any Abort", Run: X2ExpiredEntryIsCollected, Needs: EPD.with(func(n *Needs) { n.Observables = true }), Labels: []string{LabelSlow}},
		{Rule: "X-2", Name: "X-2 a consume raced against its entry's expiry: tokens or a spent-reference rejection, and the entry leaves the table once", Run: X2ConsumeRacesExpiry,
			Needs: EPD.with(func(n *Needs) { n.Observables = true }), Labels: []string{LabelSlow}},

		// SE: security feature rules (tls.go), run at every level when the
		// profile declares tls or authorization (FeatureRules).
		{Rule: "SE-1", Name: "SE-1 every gRPC endpoint and declared listener serves TLS and refuses plaintext", Run: SE1ListenersServeTLS, Needs: Needs{Feature: FeatureTLS}},
		{Rule: "SE-1", Name: "SE-1 with client authentication a peer without a valid certificate is refused before any handler runs", Run: SE1ClientWithoutValidCertificateRefused, Needs: Needs{Feature: FeatureTLS}},
		{Rule: "SE-2", Name: "SE-2 a non-operator's Shutdown and Abort(all_requests) are PERMISSION_DENIED and change nothing", Run: SE2NonOperatorCallsDenied, Needs: Needs{Feature: FeatureAuthorization}},
		{Rule: "SE-2", Name: "SE-2 Abort(request_id) by another caller does not cancel the request", Run: SE2AbortOfAnotherCallersRequestDoesNotCancelIt, Needs: Needs{Feature: FeatureAuthorization, TestHooks: true}},

		// Destructive cases: always last. S-2 and S-4 shut the producer (or,
		// once it is gone, the baseline) down; S-1 the consumer.
		{Rule: "S-2", Name: "S-2 after an accepted Shutdown the producer is DRAINING, refuses requests and releases unconsumed outputs", Run: S2ShutdownDrainsAndReleases, Destructive: true, Needs: EPD},
		{Rule: "S-4", Name: "S-4 after an accepted Shutdown the engine drains and exits within its drain deadline", Run: S4ShutdownEndsTheProcess, Destructive: true,
			Needs: EPD.with(func(n *Needs) {
				n.Discovers = "whether an engine is left to shut down (an earlier destructive case may have stopped the producer of a target without a baseline)"
			})},
		// The Faults-level cases poison and restart instances (faults.go).
		{Rule: "S-1", Name: "S-1 Shutdown naming the instance is ACCEPTED, then ALREADY_SHUTTING_DOWN, and new requests get UNAVAILABLE", Run: S1ShutdownAccepted, Destructive: true},
		{Rule: "S-3", Name: "S-3 a quarantined cuda_ipc consumer drains and exits after an accepted Shutdown", Run: S3CUDAIPCConsumerDrainsAfterUncertainTransfer, Destructive: true,
			Needs: EPD.with(func(n *Needs) {
				n.FaultProxy, n.Backend = true, BackendCUDAIPC
				n.Discovers = "whether the producer publishes cuda_ipc references (not applicable otherwise)"
			})},
		// SE-2's operator Shutdown needs a restart (tls.go).
		{Rule: "SE-2", Name: "SE-2 the operator's Shutdown is ACCEPTED after a non-operator's was PERMISSION_DENIED", Run: SE2OperatorShutdownAccepted, Destructive: true, Needs: Needs{Feature: FeatureAuthorization}},
	}
	cs = append(cs, faultCases()...)
	cs = append(cs, securityCases()...) // Q-2 refused, Q-6, SE-3..SE-5 (security.go)
	levels := map[string]Level{}
	for lvl, rules := range RulesByLevel() {
		for _, r := range rules {
			levels[r] = lvl
		}
	}
	for _, f := range FeatureRules() {
		levels[f.Rule] = LevelCore // checked at every level when declared
	}
	for i := range cs {
		cs[i].Level = levels[cs[i].Rule]
		if cs[i].Needs.FaultProxy {
			// The fault proxy is what the Faults level adds (CONTRACT
			// section 5): a case that needs it, whatever its rule's level
			// (C-5 under a stuck transfer), runs when Faults is claimed.
			cs[i].Level = LevelFaults
		}
	}
	cs = append(cs, underFaults(cs)...)
	cs = append(cs, eppdCopies(cs)...)
	for i := range cs {
		cs[i].Labels = append(cs[i].Needs.labels(cs[i].Destructive), cs[i].Labels...)
	}
	// Stable: keep the written order, move destructive cases after the others.
	// Then cases that send Shutdown, which a wrong answer obeys, then those
	// that take endpoints down on purpose.
	rank := func(c Case) int {
		switch {
		case c.MayTakeDown():
			return 2
		case c.SendsShutdown:
			return 1
		}
		return 0
	}
	sort.SliceStable(cs, func(i, j int) bool { return rank(cs[i]) < rank(cs[j]) })
	return cs
}

// RulesByLevel lists the rule IDs of each conformance level, exactly as the
// table of CONTRACT section 5, in the table's order. LevelFaults lists only
// the rules new at that level; the Faults level also re-runs every Core and
// Lifecycle rule under injected faults. It returns fresh slices on every call.
func RulesByLevel() map[Level][]string {
	return map[Level][]string{
		LevelCore: {
			"SU-1", "SU-2", "SU-3", "SU-4", "SU-5",
			"L-1", "L-2", "L-3", "L-4", "L-5", "L-6",
			"N-1", "N-2", "S-1", "B-1", "B-2", "H-3", "H-5",
		},
		LevelLifecycle: {
			"C-1", "C-2", "C-3", "C-5", "C-6", "C-7",
			"R-1", "R-2", "H-1", "H-2", "H-4", "X-1", "X-2",
			"SU-6", "S-2", "S-4",
		},
		LevelFaults: {
			"Q-1", "Q-2", "Q-3", "Q-4", "Q-5", "Q-6", "C-4", "S-3",
			"SE-3", "SE-4", "SE-5",
		},
	}
}

// FeatureRule is a rule checked at every level, but only when the profile
// declares the feature it is about (CONTRACT section 5: "SE-1 and SE-2 are
// checked at every level when the profile declares tls or authorization").
type FeatureRule struct {
	// Rule is the CONTRACT rule ID ("SE-1").
	Rule string
	// Feature is the profile feature that makes the rule apply ("tls",
	// "authorization").
	Feature string
}

// Features a profile may declare that bring feature rules in.
const (
	// FeatureTLS: every listener serves TLS (SE-1).
	FeatureTLS = "tls"
	// FeatureAuthorization: operator calls are authorized (SE-2).
	FeatureAuthorization = "authorization"
)

// FeatureRules lists the feature rules in CONTRACT order. Their cases carry
// LevelCore (so they run at every claimed level) and a needs:<feature>
// label. It returns a fresh slice on every call.
func FeatureRules() []FeatureRule {
	return []FeatureRule{{Rule: "SE-1", Feature: FeatureTLS}, {Rule: "SE-2", Feature: FeatureAuthorization}}
}

// CasesForRule returns the registered cases of rule (e.g. "SU-2"), in
// registry order; none for a rule without cases.
func CasesForRule(rule string) []Case {
	var out []Case
	for _, c := range Cases() {
		if c.Rule == rule {
			out = append(out, c)
		}
	}
	return out
}
