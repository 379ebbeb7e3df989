package check

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/reports"
	"github.com/onsi/ginkgo/v2/types"
)

// ErrCannotCertify is wrapped by the error of a certification run (--certify)
// refused before anything ran: the profile cannot verify every rule of the
// level it claims (CONTRACT section 5: "A certification run may not leave a
// rule of the level it claims not verifiable"), or the run was filtered.
var ErrCannotCertify = errors.New("check: the profile cannot be certified at its claimed level")

// PlannedCase is what one registered case would do against a profile,
// decided from its labels and the profile alone, before anything runs.
type PlannedCase struct {
	// Rule, Name, Level and Labels are the case's, as in conformance.yaml.
	Rule, Name, Level string
	Labels            []string
	// Selected: the case's level is claimed and the label filter selects
	// it (a run never runs cases of levels above the claim).
	Selected bool
	// Outcome is "" when the case would run; reports.NotApplicable,
	// reports.NotVerifiable, or reports.Error (the profile contradicts its
	// endpoints) when it is decided before running.
	Outcome reports.Outcome
	// Reason says why, in the suite's words ("target does not serve
	// topology E+P+D (profile topologies [E+PD])").
	Reason string
}

// Plan is what a run would do against a profile: every registered case,
// and the rules of the claimed levels. It contacts nothing.
type Plan struct {
	// Profile is the target's declared profile.
	Profile target.Profile
	// Roles are the roles the target has an endpoint for, sorted.
	Roles []target.Role
	// LabelFilter is the run's Ginkgo label filter ("" = every case).
	LabelFilter string
	// Levels are the levels the profile claims, lowest first.
	Levels []string
	// Cases are every registered case in registry order.
	Cases []PlannedCase
	// RulesByLevel is the level table of the claimed levels (CONTRACT
	// section 5).
	RulesByLevel map[string][]string
}

// NewPlan decides, from labels alone, what each registered case
// (suite.Cases) would do against profile p with endpoints for roles:
//
//   - topology:E+PD / topology:E+P+D: not applicable unless the profile
//     declares the topology (or declares none and has its roles: E+PD needs
//     producer and consumer, E+P+D producer, prefill and decode); declared
//     with a role missing is an error (as the suite decides it);
//   - needs:baseline: not verifiable without a baseline endpoint;
//   - needs:reference-format: not verifiable unless reference_format is
//     "baton-json-v1";
//   - needs:producer-quota: not verifiable unless producer_quota_bytes > 0;
//   - destructive: not verifiable unless destructive: true;
//   - needs:restart: not verifiable unless the target can restart
//     instances (Profile.Restarts: a launch section);
//   - needs:fault-proxy, needs:test-hooks: not verifiable unless
//     fault_proxy: true, test_hooks: true;
//   - level lifecycle needs observables and test_hooks, level faults also
//     fault_proxy (CONTRACT section 5 "needs"): not verifiable otherwise.
//
// A case that passes these checks may still end not verifiable at run time
// (for example L-5 without observables or reference format); the
// certificate (reports.IssueCertificate) catches that after the run.
// Errors: an invalid label filter, a profile claiming an unknown level.
func NewPlan(p target.Profile, roles []target.Role, filter string) (Plan, error) {
	match := func([]string) bool { return true }
	if strings.TrimSpace(filter) != "" {
		m, err := types.ParseLabelFilter(filter)
		if err != nil {
			return Plan{}, fmt.Errorf("check: label filter %q: %w", filter, err)
		}
		match = m
	}
	levels, ok := p.ClaimedLevels()
	if !ok {
		return Plan{}, fmt.Errorf("check: profile claims unknown level %q", p.Level)
	}
	pl := Plan{Profile: p, LabelFilter: filter, Levels: append([]string(nil), levels...), RulesByLevel: map[string][]string{}}
	pl.Roles = append(pl.Roles, roles...)
	slices.Sort(pl.Roles)
	for l, rules := range suite.RulesByLevel() {
		if slices.Contains(levels, string(l)) {
			pl.RulesByLevel[string(l)] = rules
		}
	}
	pl.RulesByLevel = suite.RulesForProfile(pl.RulesByLevel, p) // the feature rules p declares (SE-1, SE-2)
	has := map[target.Role]bool{}
	for _, r := range roles {
		has[r] = true
	}
	for _, c := range suite.Cases() {
		labels := append([]string{c.Rule, LevelLabelPrefix + string(c.Level)}, c.Labels...)
		pc := PlannedCase{Rule: c.Rule, Name: c.Name, Level: string(c.Level), Labels: labels,
			Selected: match(labels) && slices.Contains(levels, string(c.Level)) && suite.FeaturesDeclared(p, labels)}
		pc.Outcome, pc.Reason = decide(p, has, string(c.Level), labels)
		pl.Cases = append(pl.Cases, pc)
	}
	return pl, nil
}

// topologyRoles are the roles each topology needs (CONTRACT section 1).
var topologyRoles = map[string][]target.Role{
	"E+PD":  {target.RoleProducer, target.RoleConsumer},
	"E+P+D": {target.RoleProducer, target.RolePrefill, target.RoleDecode},
}

// decide is NewPlan's rule for one case.
func decide(p target.Profile, has map[target.Role]bool, level string, labels []string) (reports.Outcome, string) {
	for _, l := range labels {
		topo, ok := strings.CutPrefix(l, reports.TopologyLabelPrefix)
		if !ok {
			continue
		}
		var missing []string
		for _, r := range topologyRoles[topo] {
			if !has[r] {
				missing = append(missing, string(r))
			}
		}
		declared := p.HasTopology(topo)
		if declared && len(missing) > 0 {
			return reports.Error, fmt.Sprintf("profile declares topology %s but names no endpoint for %s", topo, strings.Join(missing, ", "))
		}
		if !declared && (len(p.Topologies) > 0 || len(missing) > 0) {
			return reports.NotApplicable, fmt.Sprintf("target does not serve topology %s (profile topologies %v)", topo, p.Topologies)
		}
	}
	for _, l := range labels {
		switch l {
		case suite.LabelNeedsBaseline:
			if !has[target.RoleBaseline] {
				return reports.NotVerifiable, "the target has no baseline (aggregated) endpoint to compare with"
			}
		case suite.LabelNeedsFormat:
			if p.ReferenceFormat != suite.FormatBatonJSONv1 {
				return reports.NotVerifiable, fmt.Sprintf("needs reference_format %q in the profile (declared %q)", suite.FormatBatonJSONv1, p.ReferenceFormat)
			}
		case suite.LabelNeedsQuota:
			if p.ProducerQuotaBytes <= 0 {
				return reports.NotVerifiable, "the profile declares no producer_quota_bytes"
			}
		case suite.LabelDestructive:
			if !p.Destructive {
				return reports.NotVerifiable, "the profile does not allow destructive cases (destructive: false)"
			}
		case suite.LabelNeedsRestart:
			if !p.Restarts {
				return reports.NotVerifiable, "needs a restart of the instance it takes down or poisons: the profile has no launch section (CONTRACT section 4 \"A restart\")"
			}
		case suite.LabelNeedsFaultProxy:
			if !p.FaultProxy {
				return reports.NotVerifiable, "the profile declares no fault proxy (fault_proxy: false)"
			}
		case suite.LabelNeedsTestHooks:
			if !p.TestHooks {
				return reports.NotVerifiable, "the profile declares no test hooks (test_hooks: false)"
			}
		}
	}
	if missing := levelNeeds(p, level); len(missing) > 0 {
		return reports.NotVerifiable, fmt.Sprintf("level %s needs %s in the profile", level, strings.Join(missing, " and "))
	}
	return "", ""
}

// levelNeeds lists the profile capabilities a level needs that p does not
// declare (CONTRACT section 5: Lifecycle = Core + observables + test hooks;
// Faults = Lifecycle + fault proxy).
func levelNeeds(p target.Profile, level string) []string {
	var missing []string
	if level == string(suite.LevelLifecycle) || level == string(suite.LevelFaults) {
		if !p.Observables {
			missing = append(missing, "observables: true")
		}
		if !p.TestHooks {
			missing = append(missing, "test_hooks: true")
		}
	}
	if level == string(suite.LevelFaults) && !p.FaultProxy {
		missing = append(missing, "fault_proxy: true")
	}
	return missing
}

// CertifyProblems lists why a certification run of this plan would be
// refused before anything runs, one line per problem, sorted by level and
// rule; none means every rule of every claimed level can be verified:
//
//   - the run is filtered (a certification runs every case);
//   - a claimed level needs a capability the profile does not declare;
//   - a rule of a claimed level has no registered case;
//   - a case of such a rule would be not verifiable, or contradicts the
//     profile (error);
//   - no case of the claimed levels applies to the declared topologies.
func (pl Plan) CertifyProblems() []string {
	var out []string
	if strings.TrimSpace(pl.LabelFilter) != "" {
		out = append(out, fmt.Sprintf("a certification run runs every case; drop the label filter %q", pl.LabelFilter))
	}
	applicable := 0
	for _, l := range pl.Levels {
		if missing := levelNeeds(pl.Profile, l); len(missing) > 0 {
			out = append(out, fmt.Sprintf("level %s needs %s in the profile", l, strings.Join(missing, " and ")))
		}
		for _, rule := range pl.RulesByLevel[l] {
			n := 0
			for _, c := range pl.Cases {
				if c.Rule != rule || c.Level != l {
					continue
				}
				n++
				switch c.Outcome {
				case "":
					applicable++
				case reports.NotVerifiable, reports.Error:
					out = append(out, fmt.Sprintf("%s (%s): case %q: %s: %s", rule, l, c.Name, c.Outcome, c.Reason))
				}
			}
			if n == 0 {
				out = append(out, fmt.Sprintf("%s (%s): no case checks this rule yet, so it is not verifiable", rule, l))
			}
		}
	}
	if applicable == 0 {
		out = append(out, fmt.Sprintf("no case of the claimed levels applies to the declared topologies %v", pl.Profile.Topologies))
	}
	return out
}

// Text renders the plan for `baton check --dry-run`: a header, one line per
// selected case (RUN, N/A, N/V or ERROR, the rule, the name, the reason),
// and a count line, e.g.
//
//	RUN   SU-2  SU-2 replay of a consumed reference is rejected before any write
//	N/A   L-2   L-2 a multimodal decode ...: target does not serve topology E+P+D (profile topologies [E+PD])
//	29 cases selected: 27 would run, 2 not applicable
func (pl Plan) Text() string {
	var b strings.Builder
	roles := make([]string, len(pl.Roles))
	for i, r := range pl.Roles {
		roles[i] = string(r)
	}
	filter := pl.LabelFilter
	if filter == "" {
		filter = "(none: every case)"
	}
	fmt.Fprintf(&b, "dry run against profile %q: claims level %s (covers %s); endpoints %s; topologies %v; label filter %s; nothing is contacted\n",
		pl.Profile.Name, pl.Levels[len(pl.Levels)-1], strings.Join(pl.Levels, ", "), strings.Join(roles, ", "), pl.Profile.Topologies, filter)
	width := 4
	for _, c := range pl.Cases {
		width = max(width, len(c.Rule))
	}
	n := map[string]int{}
	selected := 0
	for _, c := range pl.Cases {
		if !c.Selected {
			continue
		}
		selected++
		tag, what := "RUN  ", "would run"
		if c.Outcome != "" {
			tag, what = c.Outcome.Tag(), string(c.Outcome)
		}
		n[what]++
		line := fmt.Sprintf("%s %-*s  %s", tag, width, c.Rule, c.Name)
		if c.Reason != "" {
			line += ": " + c.Reason
		}
		b.WriteString(line + "\n")
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] == "would run" || (keys[j] != "would run" && keys[i] < keys[j]) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", n[k], k)
	}
	fmt.Fprintf(&b, "%d cases selected", selected)
	if len(parts) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(parts, ", "))
	}
	above := 0
	for _, c := range pl.Cases {
		if !slices.Contains(pl.Levels, c.Level) {
			above++
		}
	}
	if above > 0 {
		fmt.Fprintf(&b, "; %d cases of levels above the claim are never run", above)
	}
	b.WriteString("\n")
	return b.String()
}

// AnySelected reports whether the plan runs at least one case.
func (pl Plan) AnySelected() bool {
	return slices.ContainsFunc(pl.Cases, func(c PlannedCase) bool { return c.Selected })
}

// RolesOf returns the roles tg has an endpoint for, sorted.
func RolesOf(tg target.Target) []target.Role {
	var out []target.Role
	for _, r := range probeRoles {
		if e, ok := tg.Engine(r); ok && e != nil {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// RolesOfConfig returns the roles a profile file names endpoints for, sorted.
func RolesOfConfig(c target.Config) []target.Role {
	var out []target.Role
	for r, addr := range c.Endpoints {
		if addr != "" {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}
