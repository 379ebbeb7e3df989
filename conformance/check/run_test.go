package check

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/reports"
	"github.com/onsi/ginkgo/v2"
)

// selfTestLabel selects only the specs below, never the conformance
// suite's own: this test checks Run's plumbing (RunSpecs, Ginkgo's JSON
// report read back, conversion, files, output), not a target.
const selfTestLabel = "check-selftest"

var _ = ginkgo.Describe("check self-test", ginkgo.Label(selfTestLabel), func() {
	ginkgo.It("N-1 passes", ginkgo.Label("N-1", "level:core"), func() {})
	ginkgo.It("N-2 fails like a target would", ginkgo.Label("N-2", "level:core"), func() {
		ginkgo.Fail("Generate(text-only) = code OK, encoder.exports.entries 1; want 0")
	})
	ginkgo.It("N-2 passes otherwise", ginkgo.Label("N-2", "level:core"), func() {})
	ginkgo.It("S-1 cannot run", ginkgo.Label("S-1", "level:core"), func() {
		ginkgo.Fail("harness error: dial producer: connection refused")
	})
	ginkgo.It("B-1 needs a baseline", ginkgo.Label("B-1", "level:core"), func() {
		ginkgo.Skip("not applicable: target serves no baseline")
	})
	ginkgo.It("X-1 needs hooks", ginkgo.Label("X-1", "level:lifecycle"), func() {
		ginkgo.Skip("not verifiable: profile declares no test hooks")
	})
})

// TestRun runs the self-test specs through Run once (Ginkgo allows one run
// per process), then checks that a second Run is refused.
func TestRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	var out bytes.Buffer
	tg := target.NewStatic(target.Profile{Name: "self-test", Level: "lifecycle"}, nil) // X-1 is a lifecycle rule
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, tg, Options{LabelFilter: selfTestLabel, ReportDir: dir, Out: &out, CaseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())

	want := map[string]reports.Outcome{
		"N-1": reports.Passed,
		"N-2": reports.Failed,
		"S-1": reports.Error,
		"B-1": reports.NotApplicable,
		"X-1": reports.NotVerifiable,
	}
	got := map[string]reports.Outcome{}
	for _, r := range res.Rules {
		got[r.Rule] = r.Outcome
	}
	if len(got) != len(want) {
		t.Errorf("rules %v; want exactly %v (a filtered run reports only the rules it selects)", got, want)
	}
	for r, w := range want {
		if got[r] != w {
			t.Errorf("rule %s = %q; want %q", r, got[r], w)
		}
	}
	if res.Verdict != reports.Failed || reports.ExitCode(res) != reports.ExitFailed {
		t.Errorf("verdict %q exit %d; want failed, %d", res.Verdict, reports.ExitCode(res), reports.ExitFailed)
	}
	if res.Tool != Tool || res.SpecRevision != SpecRevision || res.Target != "self-test" || res.LabelFilter != selfTestLabel || res.StartedAt.IsZero() {
		t.Errorf("results metadata = %+v", res)
	}
	if len(res.Cases) != 6 {
		t.Errorf("got %d cases; want 6", len(res.Cases))
	}

	for _, f := range []string{GinkgoJSONFile, GinkgoJUnitFile, ResultsFile, JUnitFile, ResultsYAMLFile, ReportHTMLFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("report file %s: %v", f, err)
		}
	}
	back, err := reports.ReadJSON(filepath.Join(dir, ResultsFile))
	if err != nil || back.Verdict != res.Verdict || len(back.Rules) != len(res.Rules) {
		t.Errorf("results.json read back = %+v, %v; want the returned results", back, err)
	}
	backYAML, err := reports.ReadYAML(filepath.Join(dir, ResultsYAMLFile))
	if err != nil || backYAML.Verdict != res.Verdict || len(backYAML.Rules) != len(res.Rules) || backYAML.BatonCommit == "" {
		t.Errorf("results.yaml read back = %+v, %v; want the returned results", backYAML, err)
	}
	for _, r := range res.Rules {
		if r.Requirement == "" || !strings.HasPrefix(r.Contract, "CONTRACT.md#") {
			t.Errorf("rule %s has requirement %q, contract %q; want both from the test list", r.Rule, r.Requirement, r.Contract)
		}
	}
	if res.Certificate != nil {
		t.Errorf("an ordinary run carries a certificate: %+v", res.Certificate)
	}
	if len(res.Levels) != 0 || res.NoLevelVerdict != reports.NoLevelVerdictFiltered {
		t.Errorf("a filtered run has level verdicts %v (no_level_verdict %q); want none: it claims no level", res.Levels, res.NoLevelVerdict)
	}
	if res.ClaimedLevel != "lifecycle" || res.GPU == nil {
		t.Errorf("claimed level %q, gpu %v; want lifecycle and an empty inventory", res.ClaimedLevel, res.GPU)
	}
	html, err := os.ReadFile(filepath.Join(dir, ReportHTMLFile))
	if err != nil || !strings.Contains(string(html), `id="rule-core-N-2" class="outcome-failed"`) {
		t.Errorf("report.html lacks the failed rule N-2 (%v)", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, JUnitFile))
	if err != nil {
		t.Fatal(err)
	}
	var junit struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	if err := xml.Unmarshal(raw, &junit); err != nil || junit.Tests != 6 || junit.Failures != 1 {
		t.Errorf("junit.xml tests=%d failures=%d (%v); want 6, 1", junit.Tests, junit.Failures, err)
	}

	text := out.String()
	for _, line := range []string{
		"PASS  N-1   (1 case)",
		"FAIL  N-2   Generate(text-only) = code OK, encoder.exports.entries 1; want 0",
		"ERROR S-1   harness error: dial producer: connection refused",
		"N/A   B-1   not applicable: target serves no baseline",
		"N/V   X-1   not verifiable: profile declares no test hooks",
		"verdict: failed (no level verdict: filtered)",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("output lacks %q", line)
		}
	}
	if strings.Contains(text, "\x1b[") {
		t.Errorf("output to a buffer carries colour codes")
	}

	if _, err := Run(ctx, tg, Options{LabelFilter: selfTestLabel}); !errors.Is(err, ErrAlreadyRan) {
		t.Errorf("second Run = %v; want ErrAlreadyRan", err)
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	tg := target.NewStatic(target.Profile{}, nil)
	tests := []struct {
		name string
		ctx  context.Context
		tg   target.Target
		opts Options
	}{
		{"invalid label filter", context.Background(), tg, Options{LabelFilter: "level:core &&"}},
		{"negative case timeout", context.Background(), tg, Options{CaseTimeout: -time.Second}},
		{"nil target", context.Background(), nil, Options{}},
		{"cancelled context", func() context.Context { c, cancel := context.WithCancel(context.Background()); cancel(); return c }(), tg, Options{}},
	}
	for _, tt := range tests {
		if _, err := Run(tt.ctx, tt.tg, tt.opts); err == nil || errors.Is(err, ErrAlreadyRan) {
			t.Errorf("%s: Run = %v; want a configuration error before any run", tt.name, err)
		}
	}
}
