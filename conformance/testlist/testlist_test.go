package testlist_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/baton-dev/baton/conformance"
	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/testlist"
)

// EnvContract names the contract to verify the committed list against
// (default ../shared/spec/CONTRACT.md beside the repository).
const EnvContract = "BATON_CONTRACT"

// contractPath finds CONTRACT.md; with none, the test skips, or fails when
// CI=true (CI checks out ../shared beside the repository).
func contractPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv(EnvContract)
	if p == "" {
		p = filepath.Join("..", "..", "..", "shared", "spec", "CONTRACT.md")
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the contract is missing (%v); CI must have ../shared beside the repository or set %s", err, EnvContract)
		}
		t.Skipf("no contract to verify against (%v); set %s", err, EnvContract)
	}
	return p
}

// TestCommittedListIsCurrent regenerates the test list from CONTRACT.md and
// the case registry and compares it with conformance/conformance.yaml
// (`make verify`).
func TestCommittedListIsCurrent(t *testing.T) {
	md, err := os.ReadFile(contractPath(t))
	if err != nil {
		t.Fatal(err)
	}
	l, err := testlist.Build(md)
	if err != nil {
		t.Fatalf("%v\n(fix the registry or the contract, then run: go run ./conformance/testlist/gen)", err)
	}
	want, err := testlist.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "conformance.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("conformance/conformance.yaml is stale (line %d):\n committed: %s\n generated: %s\nregenerate with: go run ./conformance/testlist/gen", i+1, g, w)
			}
		}
	}
	if string(conformance.TestListYAML) != string(got) {
		t.Error("the embedded test list differs from the file (rebuild)")
	}
}

// TestCommittedListMatchesRegistry needs no contract: every registered case
// is in the compiled-in list with the labels the suite gives it, and every
// rule of the level table is listed at its level.
func TestCommittedListMatchesRegistry(t *testing.T) {
	l, err := testlist.Committed()
	if err != nil {
		t.Fatal(err)
	}
	type entry struct{ rule, level, labels string }
	listed := map[string]entry{}
	for _, r := range l.Rules {
		if r.Since != testlist.SinceVersion || r.Section == "" || !strings.HasSuffix(r.Requirement, ".") {
			t.Errorf("rule %s: since %q section %q requirement %q", r.Rule, r.Since, r.Section, r.Requirement)
		}
		for _, c := range r.Cases {
			listed[c.Name] = entry{r.Rule, r.Level, strings.Join(c.Labels, ",")}
		}
	}
	cases := suite.Cases()
	if len(listed) != len(cases) {
		t.Errorf("the list has %d cases; the registry %d (go run ./conformance/testlist/gen)", len(listed), len(cases))
	}
	for _, c := range cases {
		e, ok := listed[c.Name]
		if !ok {
			t.Errorf("case %q is not in conformance.yaml (go run ./conformance/testlist/gen)", c.Name)
			continue
		}
		// A case that needs the fault proxy (an under-faults copy, the C-5
		// stuck-transfer case) is listed under its rule, at the rule's
		// level; its own level is in its labels (level:faults).
		proxied := slices.Contains(c.Labels, suite.LabelNeedsFaultProxy)
		if e.rule != c.Rule || (e.level != string(c.Level) && !proxied) || e.labels != strings.Join(testlist.CaseLabels(c), ",") {
			t.Errorf("case %q listed as %+v; registry says rule %s level %s labels %v", c.Name, e, c.Rule, c.Level, testlist.CaseLabels(c))
		}
	}
	for lvl, rules := range suite.RulesByLevel() {
		for _, id := range rules {
			if r, ok := l.Rule(id); !ok || r.Level != string(lvl) {
				t.Errorf("rule %s (%s) listed as %+v, %v", id, lvl, r, ok)
			}
		}
	}
	for _, f := range suite.FeatureRules() {
		if r, ok := l.Rule(f.Rule); !ok || r.Feature != f.Feature || r.Level != string(suite.LevelCore) {
			t.Errorf("feature rule %s (%s) listed as %+v, %v", f.Rule, f.Feature, r, ok)
		}
	}
}

func TestFirstSentence(t *testing.T) {
	tests := []struct{ in, want string }{
		{"One. Two.", "One."},
		{"Only one sentence", "Only one sentence"},
		{"Ends here.", "Ends here."},
		{"Calls `a.B()` then stops. Then.", "Calls `a.B()` then stops."},
		{"Keeps (this. Inside) parentheses. Next.", "Keeps (this. Inside) parentheses."},
		{"Abbreviations, e.g. Foo, stay. Next.", "Abbreviations, e.g. Foo, stay."},
		{"Version 1.2 stays. Next.", "Version 1.2 stays."},
		{"Lower case after. the period continues. Next.", "Lower case after. the period continues."},
		{"Folds   white\n space. Next.", "Folds white space."},
		{"Before code. `Shutdown` next.", "Before code."},
	}
	for _, tt := range tests {
		if got := testlist.FirstSentence(tt.in); got != tt.want {
			t.Errorf("FirstSentence(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		" Single use (SU)":             "single-use-su",
		"3. Rules":                     "3-rules",
		"How requests look, and which": "how-requests-look-and-which",
		"Limits and validation (L)":    "limits-and-validation-l",
		"Outcomes of a check":          "outcomes-of-a-check",
	} {
		if got := testlist.Slug(in); got != want {
			t.Errorf("Slug(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestParseContract(t *testing.T) {
	md := "# Title\n\n### Single use (SU)\n- **SU-1** First. Second.\n- **SU-2** Other rule\n\n### Limits (L)\n- **L-1** Bounded. More.\n- not a rule\n"
	reqs, err := testlist.ParseContract([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	want := []testlist.Requirement{
		{Rule: "SU-1", Sentence: "First.", Text: "First. Second.", Section: "single-use-su"},
		{Rule: "SU-2", Sentence: "Other rule", Text: "Other rule", Section: "single-use-su"},
		{Rule: "L-1", Sentence: "Bounded.", Text: "Bounded. More.", Section: "limits-l"},
	}
	if !slices.Equal(reqs, want) {
		t.Errorf("ParseContract =\n%+v\nwant\n%+v", reqs, want)
	}
	for name, bad := range map[string]string{
		"no rules":   "# Title\ntext\n",
		"duplicate":  "- **SU-1** A.\n- **SU-1** B.\n",
		"empty file": "",
	} {
		if _, err := testlist.ParseContract([]byte(bad)); err == nil {
			t.Errorf("%s: ParseContract = nil error", name)
		}
	}
}

func TestBuildFromDisagreements(t *testing.T) {
	reqs := []testlist.Requirement{{Rule: "SU-1", Sentence: "A.", Section: "s"}, {Rule: "SU-2", Sentence: "B.", Section: "s"}}
	tests := []struct {
		name   string
		levels map[suite.Level][]string
		cases  []suite.Case
		want   string
	}{
		{"level rule missing from the contract", map[suite.Level][]string{suite.LevelCore: {"SU-1", "SU-2", "SU-9"}}, nil, "rule SU-9 of level core is not in CONTRACT.md"},
		{"contract rule in no level", map[suite.Level][]string{suite.LevelCore: {"SU-1"}}, nil, "rule SU-2 of CONTRACT.md is in no level"},
		{"case of an unlisted rule", map[suite.Level][]string{suite.LevelCore: {"SU-1", "SU-2"}}, []suite.Case{{Rule: "X-9", Name: "X-9 x"}}, `checks rule "X-9", which is in no level`},
		{"unknown level", map[suite.Level][]string{suite.LevelCore: {"SU-1", "SU-2"}, "extra": {"SU-1"}}, nil, `unknown level "extra"`},
	}
	for _, tt := range tests {
		if _, err := testlist.BuildFrom(reqs, tt.levels, nil, tt.cases); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: BuildFrom = %v; want an error containing %q", tt.name, err, tt.want)
		}
	}
	if _, err := testlist.BuildFrom(reqs, map[suite.Level][]string{suite.LevelCore: {"SU-1", "SU-2"}}, []suite.FeatureRule{{Rule: "SU-2", Feature: "tls"}}, nil); err == nil || !strings.Contains(err.Error(), "feature rule SU-2 is also in the level table") {
		t.Errorf("a feature rule also in the level table: BuildFrom = %v", err)
	}
	if _, err := testlist.BuildFrom(reqs, map[suite.Level][]string{suite.LevelCore: {"SU-1", "SU-2"}}, []suite.FeatureRule{{Rule: "SE-9", Feature: "tls"}}, nil); err == nil || !strings.Contains(err.Error(), "feature rule SE-9 is not in CONTRACT.md") {
		t.Errorf("a feature rule missing from the contract: BuildFrom = %v", err)
	}
	fl, err := testlist.BuildFrom(reqs, map[suite.Level][]string{suite.LevelCore: {"SU-1"}}, []suite.FeatureRule{{Rule: "SU-2", Feature: "tls"}}, nil)
	if err != nil || len(fl.Rules) != 2 || fl.Rules[1].Feature != "tls" || fl.Rules[1].Level != "core" {
		t.Errorf("a feature rule: BuildFrom = %+v, %v; want it listed last at level core with its feature", fl, err)
	}
	l, err := testlist.BuildFrom(reqs, map[suite.Level][]string{suite.LevelCore: {"SU-1", "SU-2"}}, nil, []suite.Case{{Rule: "SU-1", Name: "SU-1 x", Level: suite.LevelCore, Labels: []string{"topology:E+PD"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Rules) != 2 || len(l.Rules[0].Cases) != 1 || len(l.Rules[1].Cases) != 0 || l.Rules[0].ContractRef() != "CONTRACT.md#s" {
		t.Errorf("BuildFrom = %+v", l)
	}
	if got := l.Rules[0].Cases[0].Labels; !slices.Equal(got, []string{"SU-1", "level:core", "topology:E+PD"}) {
		t.Errorf("labels = %v", got)
	}
}

func TestFilter(t *testing.T) {
	l, err := testlist.Committed()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		filter    string
		rules     []string
		minCases  int
		wantError bool
	}{
		{filter: "SU-2", rules: []string{"SU-2"}, minCases: 3},
		{filter: "SU-2 || L-6", rules: []string{"SU-2", "L-6"}, minCases: 4},
		{filter: "C-1", rules: []string{"C-1"}}, // a rule without cases still shows
		{filter: "level:faults && !under-faults", rules: []string{"C-5", "Q-1", "Q-2", "Q-3", "Q-4", "Q-5", "Q-6", "C-4", "S-3", "SE-3", "SE-4", "SE-5"}},
		{filter: "level:core &&", wantError: true},
	}
	for _, tt := range tests {
		f, err := l.Filter(tt.filter)
		if tt.wantError {
			if err == nil {
				t.Errorf("Filter(%q) = nil error", tt.filter)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Filter(%q): %v", tt.filter, err)
		}
		var ids []string
		n := 0
		for _, r := range f.Rules {
			ids = append(ids, r.Rule)
			n += len(r.Cases)
		}
		if !slices.Equal(ids, tt.rules) || n < tt.minCases {
			t.Errorf("Filter(%q) = rules %v, %d cases; want %v, at least %d cases", tt.filter, ids, n, tt.rules, tt.minCases)
		}
	}
	all, _ := l.Filter("")
	if len(all.Rules) != len(l.Rules) {
		t.Error("the empty filter dropped rules")
	}
	d, err := l.Filter("destructive")
	if err != nil || len(d.Rules) == 0 {
		t.Fatalf("Filter(destructive) = %+v, %v; want the destructive cases", d, err)
	}
	for _, r := range d.Rules {
		for _, c := range r.Cases {
			if !slices.Contains(c.Labels, "destructive") {
				t.Errorf("Filter(destructive) kept %q (labels %v)", c.Name, c.Labels)
			}
		}
	}
	if txt := all.Text(); !strings.Contains(txt, fmt.Sprintf("%d rules, %d cases", len(l.Rules), len(suite.Cases()))) || (hasEmpty(l) && !strings.Contains(txt, "(no case yet: not verifiable)")) {
		t.Errorf("Text() tail: %s", txt[max(0, len(txt)-200):])
	}
}

func TestParseMalformed(t *testing.T) {
	for name, raw := range map[string]string{
		"empty":                      "",
		"unknown key":                "spec_revision: x\nrulez: []\n",
		"no rules":                   "spec_revision: x\nrules: []\n",
		"rule without a requirement": "rules:\n  - rule: SU-1\n    level: core\n",
		"not yaml":                   "rules: [",
	} {
		if _, err := testlist.Parse([]byte(raw)); err == nil {
			t.Errorf("%s: Parse = nil error", name)
		}
	}
}

// hasEmpty reports whether some rule of l has no case yet.
func hasEmpty(l testlist.List) bool {
	for _, r := range l.Rules {
		if len(r.Cases) == 0 {
			return true
		}
	}
	return false
}
