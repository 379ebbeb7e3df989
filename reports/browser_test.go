package reports_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/reports"
	"github.com/baton-dev/baton/reports/headless"
)

// TestReportRendersInBrowser renders a failing certification run's
// report.html in headless Chromium: the verdict banners and the failing
// rule are in the DOM after load, the latency plot is drawn, the page
// writes nothing to the console, and a screenshot is kept in the test's
// artifact directory (go test -artifacts -outputdir DIR).
func TestReportRendersInBrowser(t *testing.T) {
	browser := headless.Browser(t)
	dir := t.ArtifactDir() // kept with go test -artifacts (make report-browser-test)
	page := filepath.Join(dir, "report.html")
	if err := reports.WriteHTML(page, certRun(reports.Failed)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, err := headless.Render(ctx, browser, page, filepath.Join(dir, "report.png"))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	t.Logf("screenshot: %s", got.Screenshot)
	for _, want := range []string{
		`id="verdict-core"`,
		`id="rule-core-SU-3" class="outcome-failed"`,
		`ABORTED; want ALREADY_FINISHED`,
		`class="plot" data-topology="E+PD"`,
		`data-phase="publish"`,
	} {
		if !strings.Contains(got.DOM, want) {
			t.Errorf("rendered DOM lacks %s", want)
		}
	}
	if len(got.Console) > 0 {
		t.Errorf("the report wrote to the browser console:\n%s", strings.Join(got.Console, "\n"))
	}
	if st, err := os.Stat(got.Screenshot); err != nil || st.Size() < 1000 {
		t.Errorf("screenshot %s: %v", got.Screenshot, err)
	}
}

// TestFaultsReportRendersInBrowser renders a Faults run's report.html in
// headless Chromium: a rule checked again under faults is a sub-row of its
// own rule, every case is a row of the case table, the rule's contract
// text is in its row, the latency plots are drawn on a log scale and over
// time, and report.html#show=failed opens with every other outcome's cases
// hidden by the page's own script; nothing on the console.
func TestFaultsReportRendersInBrowser(t *testing.T) {
	browser := headless.Browser(t)
	dir := t.ArtifactDir()
	page := filepath.Join(dir, "faults-report.html")
	res := faultsRun()
	res.HandoffLatency = []reports.LatencySeries{
		{Topology: "E+PD", Phase: reports.PhasePublish, SamplesMs: []float64{12, 15, 2400}, AtMs: []float64{10, 900, 4000}},
		{Topology: "E+PD", Phase: reports.PhaseConsume, SamplesMs: []float64{1.2, 3, 130}, AtMs: []float64{20, 950, 4100}},
	}
	if err := reports.WriteHTML(page, res); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, err := headless.Render(ctx, browser, page, filepath.Join(dir, "faults-report.png"))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	t.Logf("screenshot: %s", got.Screenshot)
	for _, want := range []string{
		`id="rule-faults-SU-2" class="outcome-failed rerun"`,
		`<span class="under">under faults</span>`,
		`<table id="case-table">`,
		`<details class="rule-text">`,
		`class="plot timeline" data-topology="E+PD"`,
		`latency (ms, log scale)`,
		`<circle class="dot" data-phase="consume"`,
		`href="CONTRACT.md#single-use-su"`,
	} {
		if !strings.Contains(got.DOM, want) {
			t.Errorf("rendered DOM lacks %s", want)
		}
	}
	if n := strings.Count(got.DOM, `<tr class="outcome-`); n < len(res.Cases) {
		t.Errorf("the case table has %d rows; want one per case (%d)", n, len(res.Cases))
	}
	if strings.Contains(got.DOM, `hidden=""`) {
		t.Errorf("rows are hidden with every outcome shown")
	}
	filtered, err := headless.RenderFragment(ctx, browser, page, "show=failed", "")
	if err != nil {
		t.Fatalf("render #show=failed: %v", err)
	}
	for _, want := range []string{
		`<tr class="outcome-passed" data-outcome="passed" data-rule="Q-1" hidden="">`,
		`<tr class="outcome-not-applicable" data-outcome="not applicable" data-rule="L-2" hidden="">`,
		`<tr class="outcome-failed" data-outcome="failed" data-rule="SU-2">`,
	} {
		if !strings.Contains(filtered.DOM, want) {
			t.Errorf("#show=failed: DOM lacks %s", want)
		}
	}
	for _, c := range append(got.Console, filtered.Console...) {
		t.Errorf("console: %s", c)
	}
}

// TestBrowserCatchesConsoleErrors is the control of the test above: a page
// that throws, logs an error and breaks the report's Content-Security-Policy
// must show up in Page.Console, so an empty Console means something.
func TestBrowserCatchesConsoleErrors(t *testing.T) {
	browser := headless.Browser(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "broken.html")
	html := `<!DOCTYPE html><html><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="` +
		reports.ReportContentSecurityPolicy + `"><title>broken</title></head><body><p id="x">x</p>` +
		`<img alt="" src="http://127.0.0.1:9/pixel.png">` +
		`<script>console.error("boom"); notDefinedAnywhere();</script></body></html>`
	write(t, page, html)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := headless.Render(ctx, browser, page, "")
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	all := strings.Join(got.Console, "\n")
	for _, want := range []string{"boom", "notDefinedAnywhere", "Content Security Policy"} {
		if !strings.Contains(all, want) {
			t.Errorf("console messages lack %q:\n%s", want, all)
		}
	}
	if !strings.Contains(got.DOM, `<p id="x">x</p>`) {
		t.Errorf("DOM not dumped: %q", got.DOM)
	}
}

func TestConsoleMessages(t *testing.T) {
	log := `[1:1:1129/150820.718678:INFO:CONSOLE:1] "hello", source: file:///r.html (1)
[1:1:1129/150820.718678:WARNING:ui/base/idle/idle_linux.cc:111] None of the known D-Bus services
[2:2:0101/000000.000:INFO:CONSOLE(12)] "Uncaught ReferenceError: x is not defined", source: file:///r.html (12)
`
	got := headless.ConsoleMessages(log)
	if len(got) != 2 || !strings.HasPrefix(got[0], `"hello"`) || !strings.Contains(got[1], "Uncaught ReferenceError") {
		t.Errorf("ConsoleMessages = %q", got)
	}
}
