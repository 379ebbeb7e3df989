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
package suite

import (
	"context"
	"slices"
	"sort"

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
	// Labels are extra Ginkgo labels ("topology:E+PD", "needs:reference-format", ...);
	// the rule ID and "level:<level>" are added by the binding.
	Labels []string
	// Run executes the case against tg. It never imports an engine.
	Run func(ctx context.Context, t TB, tg target.Target)
	// Destructive cases make an instance unusable (an accepted Shutdown);
	// they run last, or against a target started for them alone.
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
	// LabelNeedsFormat marks a case that needs Profile.ReferenceFormat.
	LabelNeedsFormat = "needs:reference-format"
	// LabelNeedsQuota marks a case that needs Profile.ProducerQuotaBytes.
	LabelNeedsQuota = "needs:producer-quota"
	// LabelNeedsBaseline marks a case that needs the baseline (aggregated) engine.
	LabelNeedsBaseline = "needs:baseline"
	// LabelDestructive marks a case that shuts an instance down.
	LabelDestructive = "destructive"
	// LabelNeedsRestart marks a case that takes an instance down or
	// poisons it and so needs a target that restarts it (target.Restarter:
	// a profile's launch section, or instances the harness started):
	// CONTRACT section 4 "A restart". Without one the case is not
	// verifiable.
	LabelNeedsRestart = "needs:restart"
	// LabelSlow marks a case that waits for time to pass (a TTL) or loops.
	LabelSlow = "slow"
)

// Cases returns every registered case in a stable order: by rule family in
// the order of CONTRACT section 5, destructive cases last. It returns a
// fresh slice on every call.
func Cases() []Case {
	cs := []Case{
		// SU: single use (su.go).
		{Rule: "SU-1", Name: "SU-1 concurrent consumes of one reference: exactly one gets tokens", Run: SU1ConcurrentConsumesOneWins, Labels: []string{LabelEPD}},
		{Rule: "SU-2", Name: "SU-2 replay of a consumed reference is rejected before any write", Run: SU2ReplayRejected, Labels: []string{LabelEPD}},
		{Rule: "SU-2", Name: "SU-2 a released reference is rejected before any write", Run: SU2ReleasedRejected, Labels: []string{LabelEPD}},
		{Rule: "SU-2", Name: "SU-2 an expired reference is rejected before any write", Run: SU2ExpiredRejected, Labels: []string{LabelEPD, LabelSlow}},
		{Rule: "SU-3", Name: "SU-3 Abort of a published reference answers ABORTED once, then ALREADY_FINISHED", Run: SU3AbortReleasesOnce, Labels: []string{LabelEPD}},
		{Rule: "SU-3", Name: "SU-3 Abort of a consumed reference answers ALREADY_FINISHED", Run: SU3AbortAfterConsume, Labels: []string{LabelEPD}},
		{Rule: "SU-3", Name: "SU-3 Abort of an expired reference answers ALREADY_FINISHED", Run: SU3AbortAfterExpiry, Labels: []string{LabelEPD, LabelSlow}},
		{Rule: "SU-4", Name: "SU-4 malformed references are rejected by the consumer and consume nothing", Run: SU4MalformedConsumeRejected, Labels: []string{LabelEPD}},
		{Rule: "SU-4", Name: "SU-4 Abort with a malformed reference is rejected and releases nothing", Run: SU4MalformedAbortRejected, Labels: []string{LabelEPD}},
		{Rule: "SU-5", Name: "SU-5 reference ids are unguessable and distinct", Run: SU5ReferenceIDsUnguessable, Labels: []string{LabelEPD, LabelNeedsFormat}},
		{Rule: "SU-5", Name: "SU-5 a forged reference (one entry's state, another's id) is rejected", Run: SU5ForgedReferenceRejected, Labels: []string{LabelEPD, LabelNeedsFormat}},
		{Rule: "SU-5", Name: "SU-5 path-like references are rejected by consumer and producer", Run: SU5PathReferencesRejected, Labels: []string{LabelEPD}},
		{Rule: "SU-5", Name: "SU-5 a reference naming another producer instance is rejected", Run: SU5ForeignInstanceRejected, Labels: []string{LabelEPD}},

		// L: limits and validation (limits.go).
		{Rule: "L-1", Name: "L-1 a reference over 64 KiB is rejected before any token", Run: L1OversizeReferenceRejected, Labels: []string{LabelEPD}},
		{Rule: "L-1", Name: "L-1 a decode preparation over 2 MiB is rejected before any token", Run: L1OversizeDecodePreparationRejected, Labels: []string{LabelEPPD}},
		{Rule: "L-2", Name: "L-2 a multimodal decode without its decode preparation is rejected", Run: L2DecodeWithoutPreparationRejected, Labels: []string{LabelEPPD}},
		{Rule: "L-3", Name: "L-3 video and audio items are UNIMPLEMENTED on producer and baseline", Run: L3VideoAudioUnimplemented, Labels: []string{LabelEPD}},
		{Rule: "L-4", Name: "L-4 requests sent to the wrong role are FAILED_PRECONDITION", Run: L4WrongRoleRejected, Labels: []string{LabelEPD}},
		{Rule: "L-5", Name: "L-5 the producer's byte quota ends in RESOURCE_EXHAUSTED and recovers after release", Run: L5ProducerQuotaEnforced, Labels: []string{LabelEPD, LabelNeedsQuota, LabelSlow}},
		{Rule: "L-6", Name: "L-6 malformed, oversize and url media are rejected before anything is published", Run: L6MalformedMediaRejected, Labels: []string{LabelEPD}},

		// N: negotiation (negotiation.go).
		{Rule: "N-1", Name: "N-1 producer and consumer advertise their encoder capabilities", Run: N1CapabilitiesAdvertised, Labels: []string{LabelEPD}},
		{Rule: "N-1", Name: "N-1 a reference for a backend the consumer does not accept is FAILED_PRECONDITION", Run: N1UnacceptedBackendRejected, Labels: []string{LabelEPD}},
		{Rule: "N-2", Name: "N-2 text-only requests never touch the encoder", Run: N2TextOnlyBypassesEncoder, Labels: []string{LabelEPD}},

		// S: shutdown (shutdown.go), non-destructive part.
		{Rule: "S-1", Name: "S-1 Shutdown with an empty or foreign instance id is refused and changes nothing", Run: S1ShutdownIdentityChecked, SendsShutdown: true},

		// B: baseline equivalence (baseline.go).
		{Rule: "B-1", Name: "B-1 E+PD answers and usage equal the aggregated baseline", Run: B1DisaggregatedMatchesBaseline, Labels: []string{LabelEPD, LabelNeedsBaseline}},
		{Rule: "B-1", Name: "B-1 E+P+D answers and usage equal the aggregated baseline", Run: B1EPPDMatchesBaseline, Labels: []string{LabelEPPD, LabelNeedsBaseline}},
		{Rule: "B-2", Name: "B-2 different images with one prompt get their own answers despite a warm prefix cache", Run: B2DifferentImagesDifferentAnswers, Labels: []string{LabelEPD, LabelNeedsBaseline}},

		// H: identity and hashing (hashing.go).
		{Rule: "H-3", Name: "H-3 a reference with a malformed content hash is rejected", Run: H3MalformedHashRejected, Labels: []string{LabelEPD, LabelNeedsFormat}},
		{Rule: "H-5", Name: "H-5 two images sent with one MediaItem.uuid get their own answers", Run: H5UUIDIsNotContentHash, Labels: []string{LabelEPD, LabelNeedsBaseline}},

		// Lifecycle level: cancellation, hashing, single use, health and
		// cleanup (lifecycle.go), the in-engine executor and H-2 (executor.go).
		{Rule: "C-1", Name: "C-1 a publish cancelled while its encoder step is held publishes and keeps nothing", Run: C1CancelledHeldPublishPublishesNothing, Labels: []string{LabelEPD, LabelNeedsTestHooks, LabelNeedsObservables}},
		{Rule: "C-2", Name: "C-2 a publish cancelled while its batch is pending is not revived and never shifts its siblings' slices", Run: C2LateCompletionKeepsSiblingSlices, Labels: []string{LabelEPD, LabelNeedsTestHooks, LabelNeedsBaseline}},
		{Rule: "C-3", Name: "C-3 an unconsumed output released by Abort frees its entry and batch storage", Run: C3ReleasedOutputFreesItsStorage, Labels: []string{LabelEPD, LabelNeedsObservables}},
		{Rule: "C-3", Name: "C-3 a request cancelled before its first context step frees its batch storage", Run: C3CancelBeforeContextStepFreesStorage, Labels: []string{LabelNeedsBaseline, LabelNeedsTestHooks, LabelNeedsObservables}},
		{Rule: "C-3", Name: "C-3 a publish cancelled once its output is ready leaves no entry and frees its storage", Run: C3CancelledPublishLeavesNoEntry, Labels: []string{LabelEPD, LabelNeedsTestHooks, LabelNeedsObservables}},
		{Rule: "C-3", Name: "C-3 a batch sibling that decodes and releases every step leaves the other's slice intact", Run: C3SiblingSliceOutlivesOtherReleases, Labels: []string{LabelNeedsBaseline, LabelNeedsTestHooks, LabelNeedsObservables}},
		{Rule: "C-5", Name: "C-5 a cancelled text-only request never waits for a held encoder step", Run: C5TextOnlyCancelDuringHeldEncoder, Labels: []string{LabelNeedsBaseline, LabelNeedsTestHooks}},
		{Rule: "C-6", Name: "C-6 an encoder failure ends the request with one terminal error, releases its reservation and leaves the engine READY", Run: C6EncoderFailureEndsOneRequest, Labels: []string{LabelEPD, LabelNeedsTestHooks, LabelNeedsObservables}},
		{Rule: "C-7", Name: "C-7 a publish cancelled around its publication leaves nothing its client cannot reach", Run: C7CancelledAroundPublicationLeavesNothing, Labels: []string{LabelEPD, LabelNeedsTestHooks, LabelNeedsObservables}},
		{Rule: "R-1", Name: "R-1 each admission computes its context from the encoder output exactly once", Run: R1ContextComputedOncePerAdmission, Labels: []string{LabelEPD, LabelNeedsBaseline, LabelNeedsObservables}},
		{Rule: "R-2", Name: "R-2 a request preempted after consumption recomputes and answers token-identically", Run: R2PreemptedRequestIsTokenIdentical, Labels: []string{LabelNeedsBaseline, LabelNeedsTestHooks}},
		{Rule: "H-1", Name: "H-1 content hashes equal the contract's SHA-256 over the decoded pixels and preset", Run: H1ContentHashFromDecodedPixels, Labels: []string{LabelEPD}},
		{Rule: "H-2", Name: "H-2 a missing content hash disables prefix-cache reuse", Run: H2MissingHashDisablesReuse, Labels: []string{LabelEPD, LabelNeedsTestHooks, LabelNeedsBaseline}},
		{Rule: "H-4", Name: "H-4 pixel-equal media in different encodings hash equal and answer equal", Run: H4PixelEqualMediaHashEqual, Labels: []string{LabelEPD, LabelNeedsBaseline}},
		{Rule: "SU-6", Name: "SU-6 the same media published twice gives independent entries", Run: SU6SamePublishedTwiceIndependent, Labels: []string{LabelEPD}},
		{Rule: "X-1", Name: "X-1 a failed cleanup makes the producer NOT_READY and refuse new requests", Run: X1FailedCleanupIsNotSwallowed, Labels: []string{LabelEPD, LabelNeedsTestHooks, LabelNeedsRestart}},
		{Rule: "X-2", Name: "X-2 an entry past its TTL is collected without any Abort", Run: X2ExpiredEntryIsCollected, Labels: []string{LabelEPD, LabelNeedsObservables, LabelSlow}},

		// SE: security feature rules (tls.go), run at every level when the
		// profile declares tls or authorization (FeatureRules).
		{Rule: "SE-1", Name: "SE-1 every gRPC endpoint and declared listener serves TLS and refuses plaintext", Run: SE1ListenersServeTLS, Labels: []string{LabelNeedsTLS}},
		{Rule: "SE-1", Name: "SE-1 with client authentication a peer without a valid certificate is refused before any handler runs", Run: SE1ClientWithoutValidCertificateRefused, Labels: []string{LabelNeedsTLS}},
		{Rule: "SE-2", Name: "SE-2 a non-operator's Shutdown and Abort(all_requests) are PERMISSION_DENIED and change nothing", Run: SE2NonOperatorCallsDenied, Labels: []string{LabelNeedsAuthorization}},
		{Rule: "SE-2", Name: "SE-2 Abort(request_id) by another caller does not cancel the request", Run: SE2AbortOfAnotherCallersRequestDoesNotCancelIt, Labels: []string{LabelNeedsAuthorization, LabelNeedsTestHooks}},

		// Destructive cases: always last. S-2 and S-4 shut the producer (or,
		// once it is gone, the baseline) down; S-1 the consumer.
		{Rule: "S-2", Name: "S-2 after an accepted Shutdown the producer is DRAINING, refuses requests and releases unconsumed outputs", Run: S2ShutdownDrainsAndReleases, Destructive: true, Labels: []string{LabelEPD, LabelDestructive, LabelNeedsRestart}},
		{Rule: "S-4", Name: "S-4 after an accepted Shutdown the engine drains and exits within its drain deadline", Run: S4ShutdownEndsTheProcess, Destructive: true, Labels: []string{LabelEPD, LabelDestructive, LabelNeedsRestart}},
		// The Faults-level cases poison and restart instances (faults.go).
		{Rule: "S-1", Name: "S-1 Shutdown naming the instance is ACCEPTED, then ALREADY_SHUTTING_DOWN, and new requests get UNAVAILABLE", Run: S1ShutdownAccepted, Destructive: true, Labels: []string{LabelDestructive, LabelNeedsRestart}},
		{Rule: "S-3", Name: "S-3 a quarantined cuda_ipc consumer drains and exits after an accepted Shutdown", Run: S3CUDAIPCConsumerDrainsAfterUncertainTransfer, Destructive: true, Labels: []string{LabelEPD, LabelNeedsFaultProxy, LabelDestructive, LabelNeedsRestart}},
		// SE-2's operator Shutdown needs a restart (tls.go).
		{Rule: "SE-2", Name: "SE-2 the operator's Shutdown is ACCEPTED after a non-operator's was PERMISSION_DENIED", Run: SE2OperatorShutdownAccepted, Destructive: true, Labels: []string{LabelNeedsAuthorization, LabelDestructive, LabelNeedsRestart}},
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
		if slices.Contains(cs[i].Labels, LabelNeedsFaultProxy) {
			// The fault proxy is what the Faults level adds (CONTRACT
			// section 5): a case that needs it, whatever its rule's level
			// (C-5 under a stuck transfer), runs when Faults is claimed.
			cs[i].Level = LevelFaults
		}
	}
	cs = append(cs, underFaults(cs)...)
	cs = append(cs, eppdCopies(cs)...)
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
