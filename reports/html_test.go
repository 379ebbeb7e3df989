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
		`<a class="rule-link" href="CONTRACT.md#single-use-su" title="The SU-3 sentence &lt;b&gt;with markup&lt;/b&gt;.">SU-3</a>`,
		`href="#contract-SU-3"`,
		`id="contract-SU-3"`,
		`href="CONTRACT.md#single-use-su"`,
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
