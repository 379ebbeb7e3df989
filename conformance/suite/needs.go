package suite

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/baton-dev/baton/conformance/target"
)

// Needs is what a case needs of a target to check its rule, declared as
// data in the registry (Case.Needs). It is the one source of a case's
// preconditions: Case.Execute decides from it before the case runs
// (Case.Decide), `baton check --dry-run` (conformance/check.NewPlan)
// predicts from the same call, and the case's own code checks none of it
// again, so the plan and the run cannot disagree. The Ginkgo labels
// "topology:...", "needs:..." are derived from it (Case.Labels).
//
// Decide applies the needs in this order; the first unmet one decides:
//
//  1. Topology not served: not applicable; declared without its
//     endpoints: error (the profile contradicts itself).
//  2. Not applicable when the rule is about something the target does not
//     serve: FaultProxy on a target whose backends are all shared_dir (no
//     transfer crosses); Backend not declared; SecondConsumer without a
//     consumer2 endpoint; an optional media format not declared; a Volume
//     case the run did not ask for; FormatChecks without the declared
//     reference format; Baseline with a Topology (the case compares the
//     topology's answers with the baseline's) when the producer and the
//     consumer are implementations on different models (Env.ModelsDiffer:
//     the cross-implementation matrix's mixed pairs).
//  3. Not verifiable when the rule applies but the target lacks what the
//     check needs: Baseline, ReferenceFormat, ProducerQuota, DecodeBudget, Observables,
//     TestHooks, FaultProxy (profile fault_proxy and a target that
//     injects faults), Restart (a target that restarts instances), and
//     the profile's permission for a Destructive case.
type Needs struct {
	// Topology is the topology the case checks: target.TopologyEPD,
	// target.TopologyEPPD, or "" when the case picks its engines itself
	// (S-1 visits every engine; the executor cases need only the baseline).
	Topology string
	// Baseline: the aggregated engine to compare with.
	Baseline bool
	// ReferenceFormat: the case corrupts fields of the baton-json-v1
	// reference format and has no format-agnostic form (H-3: CONTRACT ties
	// it to a declared format). Not verifiable without it.
	ReferenceFormat bool
	// FormatChecks: the case adds format-aware checks on top of its rule's
	// format-agnostic cases (SU-5 ids, a forged id, L-1 padding). Not
	// applicable without the declared format, so the rule is still
	// verified by the format-agnostic cases.
	FormatChecks bool
	// ProducerQuota: Profile.ProducerQuotaBytes (L-5).
	ProducerQuota bool
	// DecodeBudget: Profile.DecodeBudgetBytes, the producer's bound on
	// decoded bytes across requests (SE-4), so the case knows how many of
	// its images fit at once. Not verifiable without it.
	DecodeBudget bool
	// Observables: the CONTRACT section 4 counters (never at Core).
	Observables bool
	// TestHooks: the baton.* test hooks of CONTRACT section 4.
	TestHooks bool
	// FaultProxy: the harness's fault proxy between consumer and producer
	// (Profile.FaultProxy and a target.FaultInjector), and a target that
	// restarts the instances a quarantine poisons (target.Restarter).
	FaultProxy bool
	// Restart: a target that restarts instances (target.Restarter), for a
	// case that poisons one (X-1 is sticky until restart).
	Restart bool
	// SecondConsumer: a second consumer process (endpoints key consumer2,
	// target.RoleSecondConsumer).
	SecondConsumer bool
	// Backend is the one backend the rule is about ("cuda_ipc" for S-3,
	// "tcp" for a producer that dials a consumer agent); "" for any.
	Backend string
	// Transfer: the case is about a transfer backend (tcp, cuda_ipc: a
	// consumer dials the producer's control address); not applicable on a
	// target whose backends are all shared_dir.
	Transfer bool
	// UntrustedHost: Profile.UntrustedHost, a host where the harness may
	// listen on ports the target trusts none of (SE-3). Not verifiable
	// without it.
	UntrustedHost bool
	// AgentFormat: Profile.AgentFormat, so the harness can name a consumer
	// agent of its own (SE-3's untrusted agent). Not verifiable without it.
	AgentFormat bool
	// Feature is the profile feature a feature rule's case is about
	// (FeatureTLS, FeatureAuthorization; CONTRACT section 5); not
	// applicable when the profile does not declare it, and its rule is then
	// left out of the report (RulesForProfile).
	Feature string
	// MediaFormats are the optional image formats (target.MediaGIF,
	// target.MediaWebP) the case cannot run without. Cases draw the
	// optional formats they can do without from the declared ones
	// (target.Profile.DeclaredMediaFormats) instead.
	MediaFormats []string
	// Volume: the case sends a large volume of work; it runs only when the
	// run asks for volume cases (Env.Volume, EnvVolume) and is not
	// applicable otherwise: `make test` leaves it out.
	Volume bool
	// Discovers says what the case can find out only from the target's
	// own answers, and then ends not verifiable (or not applicable) after
	// all: an engine without an in-engine executor omits the executor.*
	// counters (CONTRACT section 4), a hook the target ignores. "" means
	// the case, once Decide lets it run, passes or fails. The plan shows it
	// next to "would run".
	Discovers string
}

// discoversModels is what a case that compares a topology's answers with
// the baseline's finds out only from the endpoints' identities.
const discoversModels = "whether producer and consumer run one model and preset (two implementations on models of their own: not applicable)"

// Discoveries returns what a case that Decide lets run may still find out
// only from the target's answers and end not verifiable or not applicable
// with: n.Discovers, and for a case that compares a topology's answers
// with the baseline's, whether producer and consumer run one model
// (Env.ModelsDiffer, known only once the harness asked them). "" when the
// case, once it runs, passes or fails.
func (n Needs) Discoveries() string {
	var notes []string
	if n.Discovers != "" {
		notes = append(notes, n.Discovers)
	}
	if n.Baseline && n.Topology != "" {
		notes = append(notes, discoversModels)
	}
	return strings.Join(notes, "; ")
}

// Env is what Case.Decide decides from: the target's profile, the roles it
// has an endpoint for, and what it can do beyond its profile.
type Env struct {
	// Profile is the target's declared profile.
	Profile target.Profile
	// Roles are the roles with an endpoint.
	Roles []target.Role
	// CanRestart: the target replaces instances (target.Restarter).
	CanRestart bool
	// CanInjectFaults: the target runs the harness's fault proxy
	// (target.FaultInjector).
	CanInjectFaults bool
	// Volume: the run asked for the volume cases (VolumeRequested).
	Volume bool
	// ModelsDiffer is "" unless the harness found the producer and the
	// consumer running different models or presets (two implementations
	// meeting in one topology; target.ModelComparer), with the reason.
	// The dry run cannot know it (Needs.Discovers says so).
	ModelsDiffer string
}

// EnvVolume is the environment variable that turns the volume cases on
// (Needs.Volume): "1" or "true". They send many large images (minutes of
// CPU on a small machine), so `make test` leaves them off and `make
// ci-long` sets it.
const EnvVolume = "BATON_VOLUME"

// VolumeRequested reports whether the process environment turns the
// volume cases on (EnvVolume is "1" or "true").
func VolumeRequested() bool {
	v := strings.TrimSpace(os.Getenv(EnvVolume))
	return v == "1" || strings.EqualFold(v, "true")
}

// EnvOf returns the Env of tg: its profile, the roles it serves and the
// capabilities it implements.
func EnvOf(tg target.Target) Env {
	env := Env{Profile: tg.Profile()}
	for _, r := range EveryRole() {
		if e, ok := tg.Engine(r); ok && e != nil {
			env.Roles = append(env.Roles, r)
		}
	}
	_, env.CanRestart = target.Capability[target.Restarter](tg)
	env.CanRestart = env.CanRestart || env.Profile.Restarts // a launch section restarts
	_, env.CanInjectFaults = target.Capability[target.FaultInjector](tg)
	env.Volume = VolumeRequested()
	if mc, ok := target.Capability[target.ModelComparer](tg); ok {
		env.ModelsDiffer = mc.ModelsDiffer()
	}
	return env
}

// EveryRole lists every role a target may have an endpoint for, in the
// order reports name them.
func EveryRole() []target.Role {
	return []target.Role{target.RoleProducer, target.RoleConsumer, target.RolePrefill, target.RoleDecode, target.RoleBaseline, target.RoleSecondConsumer}
}

// TopologyRoles returns the roles topology needs (CONTRACT section 1):
// E+PD producer and consumer, E+P+D producer, prefill and decode; none for
// another name.
func TopologyRoles(topology string) []target.Role {
	switch topology {
	case target.TopologyEPD:
		return []target.Role{target.RoleProducer, target.RoleConsumer}
	case target.TopologyEPPD:
		return []target.Role{target.RoleProducer, target.RolePrefill, target.RoleDecode}
	}
	return nil
}

// Decide returns what the case ends with before it runs against env: ""
// (it runs), OutcomeNotApplicable, OutcomeNotVerifiable or OutcomeError,
// with the reason in the suite's words. It reads only c.Needs and
// c.Destructive (see Needs for the order of the checks).
func (c Case) Decide(env Env) (Outcome, string) {
	n, p := c.Needs, env.Profile
	has := func(r target.Role) bool { return slices.Contains(env.Roles, r) }
	if n.Topology != "" {
		var missing []string
		for _, r := range TopologyRoles(n.Topology) {
			if !has(r) {
				missing = append(missing, string(r))
			}
		}
		declared := p.HasTopology(n.Topology)
		if declared && len(missing) > 0 {
			return OutcomeError, fmt.Sprintf("profile declares topology %s but names no endpoint for %s", n.Topology, strings.Join(missing, ", "))
		}
		if !declared && (len(p.Topologies) > 0 || len(missing) > 0) {
			return OutcomeNotApplicable, fmt.Sprintf("target does not serve topology %s (profile topologies %v)", n.Topology, p.Topologies)
		}
	}
	if n.Feature != "" && !Declared(p, n.Feature) {
		return OutcomeNotApplicable, fmt.Sprintf("the profile declares no %s block (%s applies when it does)", n.Feature, c.Rule)
	}
	if n.Transfer && len(p.Backends) > 0 && !slices.ContainsFunc(p.Backends, func(b string) bool { return b != sharedDirBackend }) {
		return OutcomeNotApplicable, fmt.Sprintf("the target declares backends %v: the shared directory is claimed by rename, so no consumer dials a producer and nothing here is about a transfer backend", p.Backends)
	}
	if n.FaultProxy && len(p.Backends) > 0 && !slices.ContainsFunc(p.Backends, func(b string) bool { return b != sharedDirBackend }) {
		return OutcomeNotApplicable, fmt.Sprintf("the target declares backends %v: no TransferEncoderCache call crosses between consumer and producer (the shared directory is claimed by rename), so there is no transfer to fault", p.Backends)
	}
	if n.Backend != "" && !slices.Contains(p.Backends, n.Backend) {
		return OutcomeNotApplicable, fmt.Sprintf("the rule applies to the %s backend only; the profile declares backends %v", n.Backend, p.Backends)
	}
	if n.SecondConsumer && !has(target.RoleSecondConsumer) {
		return OutcomeNotApplicable, fmt.Sprintf("the target names no second consumer process (endpoints key %s) to race against the consumer", target.RoleSecondConsumer)
	}
	for _, f := range n.MediaFormats {
		if !p.DeclaresMediaFormat(f) {
			return OutcomeNotApplicable, fmt.Sprintf("the case is about %s images, an optional format the profile does not declare (media_formats %v)", f, p.DeclaredMediaFormats())
		}
	}
	if n.Baseline && n.Topology != "" && env.ModelsDiffer != "" {
		return OutcomeNotApplicable, fmt.Sprintf("a mixed pair: %s; a case that compares answers with the baseline applies where producer and consumer run one model and preset", env.ModelsDiffer)
	}
	if n.Volume && !env.Volume {
		return OutcomeNotApplicable, fmt.Sprintf("a volume case runs only when the run asks for volume cases (%s=1, as `make ci-long` does)", EnvVolume)
	}
	if n.FormatChecks && p.ReferenceFormat != FormatBatonJSONv1 {
		return OutcomeNotApplicable, fmt.Sprintf("these checks are about fields of the %s reference format, which the profile does not declare (reference_format %q); the rule's format-agnostic cases check it", FormatBatonJSONv1, p.ReferenceFormat)
	}
	switch {
	case n.Baseline && !has(target.RoleBaseline):
		return OutcomeNotVerifiable, "the target has no baseline (aggregated) endpoint to compare with"
	case n.ReferenceFormat && p.ReferenceFormat != FormatBatonJSONv1:
		return OutcomeNotVerifiable, fmt.Sprintf("needs reference_format %q in the profile (declared %q)", FormatBatonJSONv1, p.ReferenceFormat)
	case n.UntrustedHost && p.UntrustedHost == "":
		return OutcomeNotVerifiable, "needs untrusted_host in the profile: a host where the harness may listen on ports the target does not trust"
	case n.AgentFormat && p.AgentFormat != target.AgentFormatBatonXferV1:
		return OutcomeNotVerifiable, fmt.Sprintf("needs agent_format %s in the profile to name an untrusted consumer agent", target.AgentFormatBatonXferV1)
	case n.ProducerQuota && p.ProducerQuotaBytes <= 0:
		return OutcomeNotVerifiable, "the profile declares no producer_quota_bytes"
	case n.DecodeBudget && p.DecodeBudgetBytes <= 0:
		return OutcomeNotVerifiable, "the profile declares no decode_budget_bytes (the producer's SE-4 bound on the decoded bytes of all requests at once)"
	case n.Observables && !p.Observables:
		return OutcomeNotVerifiable, "needs the CONTRACT section 4 observables (profile observables: false)"
	case n.TestHooks && !p.TestHooks:
		return OutcomeNotVerifiable, "needs the CONTRACT section 4 test hooks (profile test_hooks: false)"
	case n.FaultProxy && !p.FaultProxy:
		return OutcomeNotVerifiable, "the profile declares no fault proxy (fault_proxy: false)"
	case n.FaultProxy && !env.CanInjectFaults:
		return OutcomeNotVerifiable, "needs the harness's fault proxy between consumer and producer: this target cannot inject faults (a target dialled from a profile file; the harness that starts the instances can)"
	case (n.FaultProxy || n.Restart) && !env.CanRestart:
		return OutcomeNotVerifiable, "needs a target that can restart the instances the case poisons (a quarantine and X-1 are sticky until restart): the profile has no launch section (CONTRACT section 4 \"A restart\")"
	case c.Destructive && !p.Destructive:
		return OutcomeNotVerifiable, "the profile does not allow destructive cases (destructive: false)"
	case c.Destructive && !env.CanRestart:
		return OutcomeNotVerifiable, "needs a restart of the instance its accepted Shutdown takes down, so the run can go on and end with every role up: the profile has no launch section (CONTRACT section 4 \"A restart\", section 5)"
	}
	return "", ""
}

// Labels used for needs, beyond LabelEPD, LabelEPPD, LabelNeedsFormat,
// LabelNeedsQuota, LabelNeedsBaseline, LabelNeedsObservables,
// LabelNeedsTestHooks, LabelNeedsFaultProxy and LabelDestructive.
const (
	// LabelNeedsRestart marks a case that takes an instance down or poisons it
	// and so needs a target that restarts it (target.Restarter: a profile's
	// launch section, or instances the harness started; CONTRACT section 4
	// "A restart"). Without one the case is not verifiable.
	LabelNeedsRestart = "needs:restart"
	// LabelNeedsUntrustedHost marks a case that needs Profile.UntrustedHost.
	LabelNeedsUntrustedHost = "needs:untrusted-host"
	// LabelNeedsAgentFormat marks a case that needs Profile.AgentFormat.
	LabelNeedsAgentFormat = "needs:agent-format"
	// LabelNeedsDecodeBudget marks a case that needs
	// Profile.DecodeBudgetBytes (SE-4's global decode bound).
	LabelNeedsDecodeBudget = "needs:decode-budget"
	// LabelNeedsSecondConsumer marks a case that needs a consumer2 endpoint.
	LabelNeedsSecondConsumer = "needs:consumer2"
	// LabelNeedsMediaPrefix starts the label of a case that needs an
	// optional image format ("needs:media-gif").
	LabelNeedsMediaPrefix = "needs:media-"
	// LabelNeedsBackendPrefix starts the label of a case about one backend
	// ("needs:backend-cuda_ipc").
	LabelNeedsBackendPrefix = "needs:backend-"
)

// labels returns the Ginkgo labels of n, in a fixed order: the topology,
// then one needs:... label per need.
func (n Needs) labels(destructive bool) []string {
	var out []string
	switch n.Topology {
	case target.TopologyEPD:
		out = append(out, LabelEPD)
	case target.TopologyEPPD:
		out = append(out, LabelEPPD)
	}
	add := func(cond bool, l string) {
		if cond {
			out = append(out, l)
		}
	}
	add(n.Baseline, LabelNeedsBaseline)
	add(n.ReferenceFormat || n.FormatChecks, LabelNeedsFormat)
	add(n.ProducerQuota, LabelNeedsQuota)
	add(n.DecodeBudget, LabelNeedsDecodeBudget)
	add(n.Observables, LabelNeedsObservables)
	add(n.TestHooks, LabelNeedsTestHooks)
	add(n.FaultProxy, LabelNeedsFaultProxy)
	add(n.Restart || n.FaultProxy || destructive, LabelNeedsRestart)
	add(n.Transfer, LabelNeedsTransfer)
	add(n.UntrustedHost, LabelNeedsUntrustedHost)
	add(n.AgentFormat, LabelNeedsAgentFormat)
	add(n.Feature != "", "needs:"+n.Feature)
	add(n.SecondConsumer, LabelNeedsSecondConsumer)
	add(n.Backend != "", LabelNeedsBackendPrefix+n.Backend)
	add(n.Volume, LabelVolume)
	for _, f := range n.MediaFormats {
		out = append(out, LabelNeedsMediaPrefix+f)
	}
	add(destructive, LabelDestructive)
	return out
}

// decideBeforeRun ends the case (NotApplicable, NotVerifiable or
// HarnessError) when Decide says it does not run against tg.
func (c Case) decideBeforeRun(t TB, tg target.Target) {
	t.Helper()
	switch outcome, why := c.Decide(EnvOf(tg)); outcome {
	case OutcomeNotApplicable:
		NotApplicable(t, why)
	case OutcomeNotVerifiable:
		NotVerifiable(t, why)
	case OutcomeError:
		HarnessError(t, "%s", why)
	}
}

// discovered ends the case `not verifiable` for a reason only the target's
// answers showed (Needs.Discovers says which the case may find).
func discovered(t TB, why string) {
	t.Helper()
	NotVerifiable(t, why)
}
