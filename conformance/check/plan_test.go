package check

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/reports"
)

// fullCore is a profile that can verify every Core rule of E+PD.
func fullCore() target.Profile {
	return target.Profile{
		Name: "full", Level: "core", Topologies: []string{"E+PD"}, Backends: []string{"shared_dir"},
		Observables: true, Destructive: true, ProducerQuotaBytes: 32 << 20, ReferenceFormat: suite.FormatBatonJSONv1,
		Restarts: true, // a launch section: S-1's accepted Shutdown needs a restart
	}
}

var epdRoles = []target.Role{target.RoleProducer, target.RoleConsumer, target.RoleBaseline}

func planned(t *testing.T, pl Plan, name string) PlannedCase {
	t.Helper()
	for _, c := range pl.Cases {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no planned case %q", name)
	return PlannedCase{}
}

func caseWith(t *testing.T, label string) string {
	t.Helper()
	for _, c := range suite.Cases() {
		if slices.Contains(c.Labels, label) {
			return c.Name
		}
	}
	t.Fatalf("no registered case has label %q", label)
	return ""
}

func TestNewPlanDecidesFromLabels(t *testing.T) {
	tests := []struct {
		name    string
		profile func(*target.Profile)
		roles   []target.Role
		label   string // a case carrying this label is decided
		want    reports.Outcome
		reason  string
	}{
		{"everything declared: runs", nil, epdRoles, suite.LabelNeedsFormat, "", ""},
		{"no reference format", func(p *target.Profile) { p.ReferenceFormat = "" }, epdRoles, suite.LabelNeedsFormat, reports.NotVerifiable, "reference_format"},
		{"no quota", func(p *target.Profile) { p.ProducerQuotaBytes = 0 }, epdRoles, suite.LabelNeedsQuota, reports.NotVerifiable, "producer_quota_bytes"},
		{"no baseline endpoint", nil, []target.Role{target.RoleProducer, target.RoleConsumer}, suite.LabelNeedsBaseline, reports.NotVerifiable, "baseline"},
		{"not destructive", func(p *target.Profile) { p.Destructive, p.Level, p.TestHooks = false, "lifecycle", true }, epdRoles, suite.LabelDestructive, reports.NotVerifiable, "destructive: false"},
		{"no restart", func(p *target.Profile) { p.Restarts, p.Level, p.TestHooks = false, "lifecycle", true }, epdRoles, suite.LabelNeedsRestart, reports.NotVerifiable, "no launch section"},
		{"no fault proxy", func(p *target.Profile) { p.Level = "faults" }, epdRoles, suite.LabelNeedsFaultProxy, reports.NotVerifiable, "fault_proxy: false"},
		{"fault proxy declared", func(p *target.Profile) { p.Level, p.FaultProxy, p.TestHooks = "faults", true, true }, epdRoles, suite.LabelNeedsFaultProxy, "", ""},
		{"no test hooks", func(p *target.Profile) { p.Level, p.FaultProxy = "faults", true }, epdRoles, suite.LabelNeedsTestHooks, reports.NotVerifiable, "test_hooks: false"},
		{"E+P+D case on an E+PD target", nil, epdRoles, suite.LabelEPPD, reports.NotApplicable, "does not serve topology E+P+D"},
		{"E+PD case on an E+P+D target", func(p *target.Profile) { p.Topologies = []string{"E+P+D"} },
			[]target.Role{target.RoleProducer, target.RolePrefill, target.RoleDecode}, suite.LabelEPD, reports.NotApplicable, "does not serve topology E+PD"},
		{"declared topology without its endpoints", func(p *target.Profile) { p.Topologies = []string{"E+PD", "E+P+D"} }, epdRoles, suite.LabelEPPD, reports.Error, "names no endpoint for prefill, decode"},
		{"no topology declared, roles present", func(p *target.Profile) { p.Topologies = nil }, epdRoles, suite.LabelEPD, "", ""},
		{"no topology declared, roles missing", func(p *target.Profile) { p.Topologies = nil }, epdRoles, suite.LabelEPPD, reports.NotApplicable, "E+P+D"},
		{"topology decides before capabilities", func(p *target.Profile) { p.Topologies = []string{"E+P+D"}; p.ReferenceFormat = "" },
			[]target.Role{target.RoleProducer, target.RolePrefill, target.RoleDecode}, suite.LabelNeedsFormat, reports.NotApplicable, "topology E+PD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fullCore()
			if tt.profile != nil {
				tt.profile(&p)
			}
			pl, err := NewPlan(p, tt.roles, "")
			if err != nil {
				t.Fatal(err)
			}
			c := planned(t, pl, caseWith(t, tt.label))
			if c.Outcome != tt.want || !strings.Contains(c.Reason, tt.reason) || !c.Selected {
				t.Errorf("case %q planned %q (%q), selected %v; want %q (%q)", c.Name, c.Outcome, c.Reason, c.Selected, tt.want, tt.reason)
			}
		})
	}
}

func TestNewPlanSelectsOnlyClaimedLevels(t *testing.T) {
	pl, err := NewPlan(fullCore(), epdRoles, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range pl.Cases {
		if c.Selected != (c.Level == "core" && suite.FeaturesDeclared(pl.Profile, c.Labels)) {
			t.Errorf("case %q (level %s) selected %v under a core claim", c.Name, c.Level, c.Selected)
		}
	}
	if got := ClaimedFilter([]string{"core", "lifecycle"}, "SU-2 || C-1"); got != "(level:core || level:lifecycle) && (SU-2 || C-1)" {
		t.Errorf("ClaimedFilter = %q", got)
	}
	if got := ClaimedFilter([]string{"core"}, " "); got != "level:core" {
		t.Errorf("ClaimedFilter = %q", got)
	}
}

func TestNewPlanLevelNeeds(t *testing.T) {
	p := fullCore()
	if got := levelNeeds(p, "core"); len(got) != 0 {
		t.Errorf("core needs %v", got)
	}
	if got := levelNeeds(p, "lifecycle"); !slices.Equal(got, []string{"test_hooks: true"}) {
		t.Errorf("lifecycle needs %v; want test_hooks", got)
	}
	p.Observables = false
	if got := levelNeeds(p, "faults"); !slices.Equal(got, []string{"observables: true", "test_hooks: true", "fault_proxy: true"}) {
		t.Errorf("faults needs %v", got)
	}
}

func TestCertifyProblems(t *testing.T) {
	tests := []struct {
		name    string
		profile func(*target.Profile)
		roles   []target.Role
		filter  string
		want    []string // substrings; none = no problem
	}{
		{name: "reference engine profile certifies core", roles: epdRoles},
		{name: "undeclared reference format", profile: func(p *target.Profile) { p.ReferenceFormat = "" }, roles: epdRoles,
			want: []string{"H-3 (core): case \"H-3", "not verifiable: needs reference_format", "SU-5 (core)"}},
		{name: "no baseline", roles: []target.Role{target.RoleProducer, target.RoleConsumer}, want: []string{"B-1 (core)", "B-2 (core)", "H-5 (core)"}},
		{name: "filtered", roles: epdRoles, filter: "SU-2", want: []string{"drop the label filter \"SU-2\""}},
		{name: "engines started by hand, no launch section", profile: func(p *target.Profile) { p.Restarts = false }, roles: epdRoles,
			want: []string{"S-1 (core): case \"S-1 Shutdown naming the instance is ACCEPTED", "no launch section"}},
		{name: "lifecycle claim without hooks", profile: func(p *target.Profile) { p.Level = "lifecycle" }, roles: epdRoles,
			want: []string{"level lifecycle needs test_hooks: true", "C-2 (lifecycle): case \"C-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fullCore()
			if tt.profile != nil {
				tt.profile(&p)
			}
			pl, err := NewPlan(p, tt.roles, tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			problems := pl.CertifyProblems()
			all := strings.Join(problems, "\n")
			if tt.want == nil && len(problems) > 0 {
				t.Errorf("problems:\n%s\nwant none", all)
			}
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems lack %q:\n%s", w, all)
				}
			}
			if len(problems) > 0 {
				err := CertifyError(pl, problems)
				if !errors.Is(err, ErrCannotCertify) || !strings.Contains(err.Error(), problems[0]) {
					t.Errorf("CertifyError = %v", err)
				}
			}
		})
	}
}

func TestNewPlanFilterAndText(t *testing.T) {
	p := fullCore()
	p.ReferenceFormat = ""
	pl, err := NewPlan(p, epdRoles, "SU-5 || L-2")
	if err != nil {
		t.Fatal(err)
	}
	var selected []string
	for _, c := range pl.Cases {
		if c.Selected {
			selected = append(selected, c.Rule)
		}
	}
	if len(selected) == 0 || slices.ContainsFunc(selected, func(r string) bool { return r != "SU-5" && r != "L-2" }) {
		t.Errorf("selected rules %v; want only SU-5 and L-2", selected)
	}
	txt := pl.Text()
	for _, want := range []string{"nothing is contacted", "N/V   SU-5", "N/A   L-2", "RUN   SU-5", "cases selected:"} {
		if !strings.Contains(txt, want) {
			t.Errorf("Text() lacks %q:\n%s", want, txt)
		}
	}
	if _, err := NewPlan(p, epdRoles, "SU-5 &&"); err == nil {
		t.Error("NewPlan accepted an invalid filter")
	}
	p.Level = "platinum"
	if _, err := NewPlan(p, epdRoles, ""); err == nil {
		t.Error("NewPlan accepted an unknown level")
	}
}

func TestRunRefusesCertifyBeforeRunning(t *testing.T) {
	p := fullCore()
	p.ReferenceFormat = ""
	tg := target.NewStatic(p, nil)
	_, err := Run(t.Context(), tg, Options{Certify: true})
	if !errors.Is(err, ErrCannotCertify) {
		t.Fatalf("Run(certify) = %v; want ErrCannotCertify", err)
	}
	if !strings.Contains(err.Error(), "H-3 (core)") {
		t.Errorf("error %v does not name H-3", err)
	}
}
