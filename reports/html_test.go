package reports_test

import (
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/baton-dev/baton/reports"
)

func TestRenderHTML(t *testing.T) {
	res := certRun(reports.Failed)
	raw, err := reports.RenderHTML(res)
	if err != nil {
		t.Fatalf("RenderHTML: %v", err)
	}
	page := string(raw)
	for _, want := range []string{
		`<div class="banner outcome-failed" id="verdict-core">`,
		`<div class="banner outcome-failed" id="verdict">`,
		`id="rule-core-SU-3" class="outcome-failed"`,
		`<a class="rule-link" href="#contract-SU-3">SU-3</a>`,
		`id="contract-SU-3"`,
		`href="CONTRACT.md#single-use-su"`,
		// The rule's own text, from the compiled-in contract, expandable in its row.
		`<details class="rule-text"><summary>`,
		`<code>Abort(encoder_cache=ref)</code> on the producer answers <code>ABORTED</code>`,
		`Abort(ref=3f2a..) second call = ABORTED; want ALREADY_FINISHED`,
		`baton check --config target.yaml --label-filter &#39;SU-3&#39;`,
		`publish media=[image/png 1234 B sha256:3f2a9c01]`,
		`ABORTED &lt;want ALREADY_FINISHED&gt;`,
		`Certificate: refused for level core`,
		`<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-topology="E+PD"`,
		`Example Corp example-serve 2.4.1`,
		`key_file: &lt;redacted&gt;`,
		`http-equiv="Content-Security-Policy"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
	if strings.Contains(page, "<b>with markup</b>") {
		t.Error("report.html does not escape the rule sentence")
	}
	if strings.Contains(page, "su.go") {
		t.Error("report.html shows a harness source location")
	}
	// Self-contained: nothing is loaded from anywhere (the SVG namespace is
	// a name, not a fetch).
	for _, re := range []string{`<link\b`, `\bsrc=`, `@import`, `url\(`} {
		if regexp.MustCompile(re).MatchString(page) {
			t.Errorf("report.html references an external resource (%s)", re)
		}
	}
	// A passed run has no failure section entries and a passed banner.
	raw, err = reports.RenderHTML(certRun(reports.Passed))
	if err != nil {
		t.Fatal(err)
	}
	if p := string(raw); !strings.Contains(p, `id="verdict-core"`) || !strings.Contains(p, "No case failed or ended in error.") || !strings.Contains(p, "Certificate: issued for level core") {
		t.Errorf("passed run's report lacks its banner, the empty failure list or the certificate")
	}
}

func TestRenderHTMLEmptyResults(t *testing.T) {
	raw, err := reports.RenderHTML(reports.Results{})
	if err != nil {
		t.Fatalf("RenderHTML(empty) = %v", err)
	}
	if !strings.Contains(string(raw), "No handoff latencies were recorded") {
		t.Error("empty report does not say no latencies were recorded")
	}
}

func TestWriteHTML(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "report.html")
	if err := reports.WriteHTML(path, certRun(reports.Failed)); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("report.html not written: %v", err)
	}
	// CONTRACT.md beside it, so the rule links resolve.
	md, err := os.ReadFile(filepath.Join(filepath.Dir(path), reports.ContractFile))
	if err != nil || !strings.Contains(string(md), "- **SU-3** ") || !strings.Contains(string(md), "### Single use (SU)") {
		t.Errorf("CONTRACT.md beside report.html: %v", err)
	}
}

// TestRenderHTMLGroupsRulesAndListsCases: a Faults run's Core rules
// checked again under faults are sub-rows of their own rule, the count is
// of distinct rules, and every case is listed with its outcome and reason,
// each outcome a filter.
func TestRenderHTMLGroupsRulesAndListsCases(t *testing.T) {
	res := faultsRun()
	raw, err := reports.RenderHTML(res)
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	for _, want := range []string{
		`id="rule-core-SU-2" class="outcome-passed"`,
		`id="rule-faults-SU-2" class="outcome-failed rerun"`,
		`SU-2 <span class="under">under faults</span>`,
		`id="rule-faults-Q-1" class="outcome-passed"`,
		`3 rules: 1 passed, 1 failed, 1 not applicable; 1 checked again at a higher level (under faults)`,
		`<input type="checkbox" class="outcome-filter" value="not applicable" checked>`,
		`<tr class="outcome-not-applicable" data-outcome="not applicable" data-rule="L-2">`,
		`not applicable: target does not serve topology E&#43;P&#43;D`,
		`Consume(ref=1) = OK; want INVALID_ARGUMENT`,
		`<span class="under">under faults</span></td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
	if n := strings.Count(page, `<a class="rule-link"`); n != 3 {
		t.Errorf("report.html has %d rule rows of their own; want 3 (SU-2, L-2, Q-1)", n)
	}
	if strings.Contains(page, "/home/ci/") || strings.Contains(page, ".go:") {
		t.Errorf("report.html shows harness source paths")
	}
}

// faultsRun is a Faults-level run: SU-2 passed at core and failed when
// checked again under faults, L-2 not applicable, Q-1 passed.
func faultsRun() reports.Results {
	cases := []reports.CaseResult{
		{Rule: "SU-2", Name: "SU-2 replay", Level: "core", Labels: []string{"SU-2", "level:core"}, Outcome: reports.Passed},
		{Rule: "SU-2", Name: "SU-2 replay [again under injected faults]", Level: "faults", Labels: []string{"SU-2", "level:faults", "under-faults"}, Outcome: reports.Failed,
			Message: "Consume(ref=1) = OK; want INVALID_ARGUMENT\n/home/ci/baton/conformance/suite/su.go:88 +0x1d\nat /home/ci/baton/conformance/suite/su.go:88"},
		{Rule: "L-2", Name: "L-2 decode without preparation", Level: "core", Labels: []string{"L-2", "level:core"}, Outcome: reports.NotApplicable, Message: "not applicable: target does not serve topology E+P+D"},
		{Rule: "Q-1", Name: "Q-1 lost reply", Level: "faults", Labels: []string{"Q-1", "level:faults"}, Outcome: reports.Passed},
	}
	res := reports.Summarize(cases, map[string][]string{"core": {"SU-2", "L-2"}, "faults": {"Q-1"}})
	res.ClaimedLevel = "faults"
	sections := map[string]string{"SU-2": "single-use-su", "L-2": "limits-and-validation-l", "Q-1": "quarantine-q"}
	for i, r := range res.Rules {
		res.Rules[i].Contract = "CONTRACT.md#" + sections[r.Rule]
	}
	return res
}

func TestPublicMessage(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"Consume = OK; want INVALID_ARGUMENT\nat suite/su.go:120", "Consume = OK; want INVALID_ARGUMENT"},
		{"panic: boom\n/home/ci/baton/conformance/suite/su.go:88 +0x1d\nmore", "panic: boom\nmore"},
		{"failed at /work/x/conformance/suite/faults.go:12: the consumer hung", "failed at : the consumer hung"},
		{"engine.go is a file name, not a location", "engine.go is a file name, not a location"},
		{"", ""},
	} {
		if got := reports.PublicMessage(tt.in); got != tt.want {
			t.Errorf("PublicMessage(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestReproduceCommand(t *testing.T) {
	tests := []struct {
		config, rule, want string
	}{
		{"target.yaml", "SU-2", `baton check --config target.yaml --label-filter 'SU-2'`},
		{"", "L-6", `baton check --config target.yaml --label-filter 'L-6'`},
		{"my dir/it's.yaml", "SU-2", `baton check --config 'my dir/it'\''s.yaml' --label-filter 'SU-2'`},
	}
	for _, tt := range tests {
		if got := reports.ReproduceCommand(reports.Results{ConfigPath: tt.config}, tt.rule); got != tt.want {
			t.Errorf("ReproduceCommand(%q, %q) = %s; want %s", tt.config, tt.rule, got, tt.want)
		}
	}
}

// svgDoc is the part of a histogram SVG the test reads.
type svgDoc struct {
	Rects []struct {
		Phase  string  `xml:"data-phase,attr"`
		Height float64 `xml:"height,attr"`
		Title  string  `xml:"title"`
	} `xml:"rect"`
}

func TestLatencyHistogramSVGs(t *testing.T) {
	series := []reports.LatencySeries{
		{Topology: "E+P+D", Phase: reports.PhaseConsume, SamplesMs: []float64{1, 2}},
		{Topology: "E+PD", Phase: reports.PhasePublish, SamplesMs: []float64{1, 1, 1, 9, math.NaN()}},
		{Topology: "E+PD", Phase: reports.PhaseConsume, SamplesMs: []float64{3}},
		{Topology: "E+PD", Phase: reports.PhaseConsume, SamplesMs: []float64{3.2, -1}},
		{Topology: "empty", Phase: reports.PhasePublish},
	}
	svgs := reports.LatencyHistogramSVGs(series)
	if len(svgs) != 2 {
		t.Fatalf("got %d plots; want 2 (E+PD, E+P+D; a topology without samples has none)", len(svgs))
	}
	if !strings.Contains(string(svgs[0]), `data-topology="E+PD"`) || !strings.Contains(string(svgs[1]), `data-topology="E+P+D"`) {
		t.Errorf("plots out of order (want E+PD first)")
	}
	var doc svgDoc
	if err := xml.Unmarshal([]byte(svgs[0]), &doc); err != nil {
		t.Fatalf("plot is not well-formed XML: %v\n%s", err, svgs[0])
	}
	counts := map[string]int{}
	for _, r := range doc.Rects {
		if r.Phase == "" {
			continue // legend swatch
		}
		var n int
		if i := strings.LastIndex(r.Title, ": "); i >= 0 {
			for _, c := range r.Title[i+2:] {
				n = n*10 + int(c-'0')
			}
		}
		counts[r.Phase] += n
		if r.Height <= 0 {
			t.Errorf("bar %q has height %v", r.Title, r.Height)
		}
	}
	// NaN and negative samples are not drawn.
	if counts[reports.PhasePublish] != 4 || counts[reports.PhaseConsume] != 2 {
		t.Errorf("bar counts %v; want publish 4, consume 2", counts)
	}
	if !strings.Contains(string(svgs[0]), "publish n=5 p50 1 ms") {
		t.Errorf("title lacks the publish count and median: %s", svgs[0][:300])
	}
	if reports.LatencyHistogramSVGs(nil) != nil {
		t.Error("no series gives plots")
	}
}

// TestLatencyHistogramIsLogScale: a 1 ms consume and a 2 s publish land in
// bins a decade scale apart, with a tick per decade (1, 10, 100, 1000,
// 10000 ms), instead of everything in the first bar of a linear axis.
func TestLatencyHistogramIsLogScale(t *testing.T) {
	svgs := reports.LatencyHistogramSVGs([]reports.LatencySeries{
		{Topology: "E+PD", Phase: reports.PhaseConsume, SamplesMs: []float64{1.2, 1.5, 3, 0}},
		{Topology: "E+PD", Phase: reports.PhasePublish, SamplesMs: []float64{2000, 2400}},
	})
	if len(svgs) != 1 {
		t.Fatalf("got %d plots", len(svgs))
	}
	var doc svgDoc
	if err := xml.Unmarshal([]byte(svgs[0]), &doc); err != nil {
		t.Fatal(err)
	}
	bins := map[string]bool{}
	for _, r := range doc.Rects {
		if r.Phase != "" {
			bins[r.Title[:strings.LastIndex(r.Title, ":")]] = true
		}
	}
	for _, want := range []string{"consume 1-1.58 ms", "consume 2.51-3.98 ms", "publish 1585-2512 ms"} {
		if !bins[want] {
			t.Errorf("no bar %q; bars %v", want, bins)
		}
	}
	for _, tick := range []string{">1<", ">10<", ">100<", ">1000<", ">10000<"} {
		if !strings.Contains(string(svgs[0]), tick) {
			t.Errorf("no decade tick %s", tick)
		}
	}
}

// TestLatencyTimelineSVGs: with start times, one dot per call that can be
// drawn; without, no timeline.
func TestLatencyTimelineSVGs(t *testing.T) {
	series := []reports.LatencySeries{
		{Topology: "E+PD", Phase: reports.PhasePublish, SamplesMs: []float64{10, 20, -1}, AtMs: []float64{0, 1500, 3000}},
		{Topology: "E+P+D", Phase: reports.PhaseConsume, SamplesMs: []float64{5}},
	}
	svgs := reports.LatencyTimelineSVGs(series)
	if len(svgs) != 1 || !strings.Contains(string(svgs[0]), `data-topology="E+PD"`) {
		t.Fatalf("timelines = %d; want one, for E+PD (E+P+D has no times)", len(svgs))
	}
	if n := strings.Count(string(svgs[0]), `<circle class="dot"`); n != 2 {
		t.Errorf("%d dots; want 2 (the negative sample is not drawn)", n)
	}
	var doc svgDoc
	if err := xml.Unmarshal([]byte(svgs[0]), &doc); err != nil {
		t.Fatalf("timeline is not well-formed XML: %v", err)
	}
}

func TestQuantile(t *testing.T) {
	s := []float64{5, 1, 4, 2, 3}
	for _, tt := range []struct{ q, want float64 }{{0, 1}, {0.5, 3}, {0.99, 5}, {1, 5}, {2, 5}} {
		if got := reports.Quantile(s, tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %v; want %v", tt.q, got, tt.want)
		}
	}
	if !math.IsNaN(reports.Quantile(nil, 0.5)) {
		t.Error("Quantile of nothing is not NaN")
	}
	if s[0] != 5 {
		t.Error("Quantile sorted its input")
	}
}
