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
// decided from the case's declared needs (suite.Case.Needs) and the
// profile alone, before anything runs.
type PlannedCase struct {
	// Rule, Name, Level and Labels are the case's, as in conformance.yaml.
	Rule, Name, Level string
	// Labels are the case's rule ID, its level label (LevelLabelPrefix +
	// level) and its own labels: what the label filter matches.
	Labels []string
	// Selected: the case's level is claimed and the label filter selects
	// it (a run never runs cases of levels above the claim).
	Selected bool
	// Outcome is "" when the case would run; reports.NotApplicable,
	// reports.NotVerifiable, or reports.Error (the profile contradicts its
	// endpoints) when it is decided before running.
	Outcome reports.Outcome
	// Reason says why, in the suite's words ("target does not serve
	// topology E+P+D (profile topologies [E+PD])"): the very reason the
	// case ends with when it runs (suite.Case.Decide).
	Reason string
	// Discovers, for a case that would run, is what it finds out only from
	// the target's answers and then ends not verifiable (or not
	// applicable) after all (suite.Needs.Discovers); "" when a run of it
	// can only pass or fail.
	Discovers string
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

// NewPlan decides what each registered case (suite.Cases) would do
// against a target declaring profile p with endpoints for roles, from the
// same declarations the run decides from: each case's Needs, through
// suite.Case.Decide (topology, declared format, quota, baseline,
// observables, test hooks, fault proxy, restarts, a second consumer,
// optional media formats, destructive cases, volume cases; see
// suite.Needs). A case the plan says would run ends passed or failed,
// unless its Needs.Discovers names what it may find missing in the
// target's answers (PlannedCase.Discovers).
//
// NewPlan assumes a target that restarts instances when p says so
// (Profile.Restarts: a launch section, or instances the harness started)
// and, when p declares fault_proxy, injects faults (the harness runs the
// proxy: a launch section or fault_proxy: {listen}). For a target at hand, NewPlanFor
// reads what it can do; a target dialled from a profile file (target.Dial)
// can do neither, so its Faults cases and X-1 are not verifiable.
// Errors: an invalid label filter, a profile claiming an unknown level.
func NewPlan(p target.Profile, roles []target.Role, filter string) (Plan, error) {
	return newPlan(suite.Env{Profile: p, Roles: roles, CanRestart: p.Restarts, CanInjectFaults: p.FaultProxy, Volume: suite.VolumeRequested()}, filter)
}

// NewPlanFor is NewPlan for tg itself: its profile, the roles it has an
// endpoint for, and whether it restarts instances (target.Restarter) and
// injects faults (target.FaultInjector), exactly as a run of tg sees them
// (suite.EnvOf). It contacts nothing: target.Dial connects lazily, so
// `baton check --dry-run` can plan for the target it would run.
func NewPlanFor(tg target.Target, filter string) (Plan, error) {
	return newPlan(suite.EnvOf(tg), filter)
}

// newPlan is NewPlan for env.
func newPlan(env suite.Env, filter string) (Plan, error) {
	p := env.Profile
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
	pl.Roles = append(pl.Roles, env.Roles...)
	slices.Sort(pl.Roles)
	for l, rules := range suite.RulesByLevel() {
		if slices.Contains(levels, string(l)) {
			pl.RulesByLevel[string(l)] = rules
		}
	}
	pl.RulesByLevel = suite.RulesForProfile(pl.RulesByLevel, p) // the feature rules p declares (SE-1, SE-2)
	for _, c := range suite.Cases() {
		labels := append([]string{c.Rule, LevelLabelPrefix + string(c.Level)}, c.Labels...)
		pc := PlannedCase{Rule: c.Rule, Name: c.Name, Level: string(c.Level), Labels: labels,
			Selected: match(labels) && slices.Contains(levels, string(c.Level)) && suite.FeaturesDeclared(p, labels)}
		outcome, reason := c.Decide(env)
		pc.Outcome, pc.Reason = reportOutcome(outcome), reason
		if pc.Outcome == "" {
			pc.Discovers = c.Needs.Discoveries()
		}
		pl.Cases = append(pl.Cases, pc)
	}
	return pl, nil
}

// reportOutcome maps a case's outcome to the report's ("" stays "").
func reportOutcome(o suite.Outcome) reports.Outcome {
	switch o {
	case suite.OutcomeNotApplicable:
		return reports.NotApplicable
	case suite.OutcomeNotVerifiable:
		return reports.NotVerifiable
	case suite.OutcomeError:
		return reports.Error
	case suite.OutcomePassed:
		return reports.Passed
	case suite.OutcomeFailed:
		return reports.Failed
	}
	return ""
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

// PredictedExitCode is the exit code the run is known to end with at
// least, for `baton check --dry-run`: reports.ExitIncomplete (2) when a
// selected case would be not verifiable or an error (a rule's verdict is
// the worst of its cases', CONTRACT "Outcomes of a check"), else
// reports.ExitPassed (0: whether a case fails only the run can tell), and
// the selected cases that decide it.
func (pl Plan) PredictedExitCode() (int, []PlannedCase) {
	var incomplete []PlannedCase
	for _, c := range pl.Cases {
		if c.Selected && (c.Outcome == reports.NotVerifiable || c.Outcome == reports.Error) {
			incomplete = append(incomplete, c)
		}
	}
	if len(incomplete) > 0 {
		return reports.ExitIncomplete, incomplete
	}
	return reports.ExitPassed, nil
}

// Text renders the plan for `baton check --dry-run`: a header, one line per
// selected case (RUN, N/A, N/V or ERROR, the rule, the name, the reason,
// and for a case that may still end not verifiable what it finds out), and
// a count line, e.g.
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
		if c.Discovers != "" {
			line += " (may end not verifiable or not applicable: it finds out " + c.Discovers + ")"
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

// RolesOf returns the roles tg has an endpoint for (consumer2 included), sorted.
func RolesOf(tg target.Target) []target.Role {
	var out []target.Role
	for _, r := range suite.EveryRole() {
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
