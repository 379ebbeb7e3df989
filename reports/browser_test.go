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
