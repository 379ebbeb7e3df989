package suite_test

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/check"
	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/reports"
)

// TestDryRunPredictsTheRun plans (check.NewPlanFor, what `baton check
// --dry-run` shows) and then runs every registered case against the
// conforming fake under a set of profiles: with and without reference
// format, quota, baseline, observables, test hooks, fault proxy, a second
// consumer, declared topologies and optional media formats. A case the
// plan decides before running ends with exactly that outcome and reason;
// a case it says would run passes or fails, and ends not verifiable or not
// applicable only when the plan said what it may find out
// (PlannedCase.Discovers). Each case runs in a world of its own, all at once.
func TestDryRunPredictsTheRun(t *testing.T) {
	t.Parallel() // it mostly waits, as the fake tests of package suite do
	full := func() target.Profile {
		return target.Profile{
			Name: "fake", Level: "lifecycle", Topologies: []string{target.TopologyEPD}, Backends: []string{suite.FakeBackend},
			Observables: true, Destructive: true, ProducerQuotaBytes: 10 * suite.FakeEntryBytes,
			ReferenceFormat: suite.FormatBatonJSONv1, CaseTimeout: 30 * time.Second,
			MediaFormats: []string{target.MediaPNG, target.MediaJPEG, target.MediaGIF, target.MediaWebP},
		}
	}
	epd := []target.Role{target.RoleProducer, target.RoleConsumer, target.RoleBaseline}
	profiles := []struct {
		name     string
		edit     func(*target.Profile)
		roles    []target.Role // nil: producer, consumer, consumer2, baseline
		required bool          // the fake decodes PNG and JPEG only
	}{
		{name: "everything declared"},
		{name: "nothing optional declared", edit: func(p *target.Profile) {
			*p = target.Profile{Name: "bare", Topologies: []string{target.TopologyEPD}, CaseTimeout: 30 * time.Second}
		}},
		{name: "no reference format", edit: func(p *target.Profile) { p.ReferenceFormat = "" }},
		{name: "no quota, not destructive", edit: func(p *target.Profile) { p.ProducerQuotaBytes, p.Destructive = 0, false }},
		{name: "no baseline, no second consumer", roles: epd[:2]},
		{name: "test hooks declared", edit: func(p *target.Profile) { p.TestHooks = true }, roles: epd},
		{name: "no observables", edit: func(p *target.Profile) { p.Observables = false }},
		{name: "fault proxy on tcp, a dialled target", edit: func(p *target.Profile) {
			p.Level, p.FaultProxy, p.TestHooks, p.Backends = "faults", true, true, []string{"tcp", suite.FakeBackend}
		}},
		{name: "no topology declared", edit: func(p *target.Profile) { p.Topologies = nil }},
		{name: "E+P+D declared without its endpoints", edit: func(p *target.Profile) { p.Topologies = []string{target.TopologyEPD, target.TopologyEPPD} }},
		{name: "required media formats only", edit: func(p *target.Profile) { p.MediaFormats = nil }, required: true},
	}
	type result struct {
		profile string
		planned check.PlannedCase
		outcome suite.Outcome
		msgs    []string
	}
	var jobs []func() result
	for _, pr := range profiles {
		p := full()
		if pr.edit != nil {
			pr.edit(&p)
		}
		plan, err := check.NewPlanFor(suite.NewFakeTarget(p, pr.roles, pr.required), "")
		if err != nil {
			t.Fatalf("%s: NewPlanFor: %v", pr.name, err)
		}
		byName := map[string]check.PlannedCase{}
		for _, pc := range plan.Cases {
			byName[pc.Name] = pc
		}
		for _, c := range suite.Cases() {
			pc, ok := byName[c.Name]
			if !ok {
				t.Fatalf("%s: the plan has no case %q", pr.name, c.Name)
			}
			jobs = append(jobs, func() result {
				outcome, msgs := suite.RunRecorded(t, c, suite.NewFakeTarget(p, pr.roles, pr.required))
				return result{pr.name, pc, outcome, msgs}
			})
		}
	}
	ran := 0
	for _, r := range suite.Concurrently(jobs) {
		got, pc := r.outcome, r.planned
		msg := strings.Join(r.msgs, "; ")
		switch {
		case pc.Outcome == "":
			ran++
			if got == suite.OutcomePassed || got == suite.OutcomeFailed {
				continue
			}
			if (got == suite.OutcomeNotVerifiable || got == suite.OutcomeNotApplicable) && pc.Discovers != "" {
				continue
			}
			t.Errorf("%s: %q: the plan says it would run, the run ended %s: %s", r.profile, pc.Name, got, msg)
		case string(got) != string(pc.Outcome) && !(pc.Outcome == reports.Error && got == suite.OutcomeError):
			t.Errorf("%s: %q: planned %s (%s), ran %s: %s", r.profile, pc.Name, pc.Outcome, pc.Reason, got, msg)
		case !strings.Contains(msg, pc.Reason):
			t.Errorf("%s: %q: planned %s for %q, the run said %q", r.profile, pc.Name, pc.Outcome, pc.Reason, msg)
		}
	}
	if ran == 0 {
		t.Fatal("no case was planned to run")
	}
	t.Logf("%d profiles, %d case runs, %d planned to run", len(profiles), len(jobs), ran)
}
