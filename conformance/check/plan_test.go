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

// caseWhere returns the name of the first registered case for which pick holds.
func caseWhere(t *testing.T, what string, pick func(suite.Case) bool) string {
	t.Helper()
	for _, c := range suite.Cases() {
		if pick(c) {
			return c.Name
		}
	}
	t.Fatalf("no registered case %s", what)
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
		{"no quota", func(p *target.Profile) { p.ProducerQuotaBytes = 0 }, epdRoles, suite.LabelNeedsQuota, reports.NotVerifiable, "producer_quota_bytes"},
		{"no baseline endpoint", nil, []target.Role{target.RoleProducer, target.RoleConsumer}, suite.LabelNeedsBaseline, reports.NotVerifiable, "baseline"},
		{"not destructive", func(p *target.Profile) { p.Destructive, p.Level, p.TestHooks = false, "lifecycle", true }, epdRoles, suite.LabelDestructive, reports.NotVerifiable, "destructive: false"},
		{"no fault proxy", func(p *target.Profile) { p.Level, p.Backends = "faults", []string{"tcp"} }, epdRoles, suite.LabelNeedsFaultProxy, reports.NotVerifiable, "fault_proxy: false"},
		{"fault proxy on the shared directory", func(p *target.Profile) { p.Level, p.FaultProxy = "faults", true }, epdRoles, suite.LabelNeedsFaultProxy, reports.NotApplicable, "no TransferEncoderCache call crosses"},
		{"fault proxy declared", func(p *target.Profile) {
			p.Level, p.FaultProxy, p.TestHooks, p.Backends = "faults", true, true, []string{"tcp"}
		}, epdRoles, suite.LabelNeedsFaultProxy, "", ""},
		{"no test hooks", func(p *target.Profile) { p.Level, p.FaultProxy = "faults", true }, epdRoles, suite.LabelNeedsTestHooks, reports.NotVerifiable, "test_hooks: false"},
		{"no second consumer", nil, epdRoles, suite.LabelNeedsSecondConsumer, reports.NotApplicable, "consumer2"},
		{"a second consumer", nil, append([]target.Role{target.RoleSecondConsumer}, epdRoles...), suite.LabelNeedsSecondConsumer, "", ""},
		{"volume cases off", nil, epdRoles, suite.LabelVolume, reports.NotApplicable, suite.EnvVolume},
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
			if c.Outcome != tt.want || !strings.Contains(c.Reason, tt.reason) || (!c.Selected && c.Level == "core") {
				t.Errorf("case %q planned %q (%q), selected %v; want %q (%q)", c.Name, c.Outcome, c.Reason, c.Selected, tt.want, tt.reason)
			}
		})
	}
}

// TestNewPlanReferenceFormat: without a declared reference format the H-3
// case (tied to a format by the contract) is not verifiable, the
// format-aware checks on top of a rule's format-agnostic cases are not
// applicable, and SU-5 and L-1 still run (their format-agnostic cases).
func TestNewPlanReferenceFormat(t *testing.T) {
	p := fullCore()
	p.ReferenceFormat = ""
	pl, err := NewPlan(p, epdRoles, "")
	if err != nil {
		t.Fatal(err)
	}
	h3 := planned(t, pl, caseWhere(t, "of H-3", func(c suite.Case) bool { return c.Rule == "H-3" && c.Needs.ReferenceFormat }))
	if h3.Outcome != reports.NotVerifiable || !strings.Contains(h3.Reason, "reference_format") {
		t.Errorf("H-3 planned %q (%q); want not verifiable for reference_format", h3.Outcome, h3.Reason)
	}
	aware := planned(t, pl, caseWhere(t, "with format checks", func(c suite.Case) bool { return c.Needs.FormatChecks && c.Needs.Topology == target.TopologyEPD }))
	if aware.Outcome != reports.NotApplicable {
		t.Errorf("%s planned %q (%q); want not applicable", aware.Name, aware.Outcome, aware.Reason)
	}
	for _, rule := range []string{"SU-5", "L-1"} {
		runs := 0
		for _, c := range pl.Cases {
			if c.Rule == rule && c.Outcome == "" {
				runs++
			}
			if c.Rule == rule && c.Outcome == reports.NotVerifiable {
				t.Errorf("%s planned not verifiable without a reference format: %s", c.Name, c.Reason)
			}
		}
		if runs == 0 {
			t.Errorf("no case of %s would run without a reference format", rule)
		}
	}
}

// TestNewPlanForReadsTheTargetsCapabilities: a target dialled from a
// profile file without a launch section restarts nothing and injects no
// faults, so X-1 and the fault-proxy cases are not verifiable against it,
// however the rest of its profile reads; NewPlan (a harness-started
// target) runs them.
func TestNewPlanForReadsTheTargetsCapabilities(t *testing.T) {
	p := fullCore()
	p.Level, p.TestHooks, p.FaultProxy, p.Backends = "faults", true, true, []string{"tcp"}
	byHand := p
	byHand.Restarts = false // no launch section
	static, err := target.Dial(target.Config{Profile: byHand, Endpoints: map[target.Role]string{
		target.RoleProducer: "127.0.0.1:1", target.RoleConsumer: "127.0.0.1:2", target.RoleBaseline: "127.0.0.1:3"}})
	if err != nil {
		t.Fatal(err)
	}
	defer static.Close()
	dialled, err := NewPlanFor(static, "") // Dial is lazy: nothing is contacted
	if err != nil {
		t.Fatal(err)
	}
	started, err := NewPlan(p, epdRoles, "")
	if err != nil {
		t.Fatal(err)
	}
	x1 := caseWhere(t, "of X-1", func(c suite.Case) bool { return c.Rule == "X-1" })
	q1 := caseWhere(t, "of Q-1", func(c suite.Case) bool { return c.Rule == "Q-1" })
	for _, name := range []string{x1, q1} {
		if c := planned(t, started, name); c.Outcome != "" {
			t.Errorf("NewPlan: %s planned %q (%q); want it to run", name, c.Outcome, c.Reason)
		}
		if c := planned(t, dialled, name); c.Outcome != reports.NotVerifiable {
			t.Errorf("NewPlanFor(dialled target): %s planned %q (%q); want not verifiable", name, c.Outcome, c.Reason)
		}
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
		absent  []string // substrings no problem may hold
	}{
		{name: "reference engine profile certifies core", roles: epdRoles},
		{name: "undeclared reference format", profile: func(p *target.Profile) { p.ReferenceFormat = "" }, roles: epdRoles,
			want: []string{"H-3 (core): case \"H-3", "not verifiable: needs reference_format"}, absent: []string{"SU-5 (core)", "L-1 (core)"}},
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
			for _, a := range tt.absent {
				if strings.Contains(all, a) {
					t.Errorf("problems hold %q:\n%s", a, all)
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
	for _, want := range []string{"nothing is contacted", "N/A   SU-5", "N/A   L-2", "RUN   SU-5", "cases selected:"} {
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
