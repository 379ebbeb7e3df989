package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/launch"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/reports"
	"github.com/baton-dev/baton/reports/headless"
	"gopkg.in/yaml.v3"
)

// runBaton runs the baton binary and returns its combined output and exit
// code (the test fails if it could not start).
func runBaton(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, batonBinary, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("baton %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), code
}

// writeProfile writes cfg as a target profile file in dir.
func writeProfile(t *testing.T, dir string, cfg target.Config) string {
	t.Helper()
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "target.yaml")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDemoBundleVerifies: `baton demo` writes the full certification bundle
// and `baton report verify` accepts it; a bundle changed after the run is
// rejected, naming the changed file.
func TestDemoBundleVerifies(t *testing.T) {
	needLong(t)
	dir := filepath.Join(t.TempDir(), "report")
	out, code := runBaton(t, "demo", "--preset", "tiny", "--report-dir", dir)
	if code != 0 {
		t.Fatalf("baton demo exited %d:\n%s", code, lastLines(out, 40))
	}
	for _, line := range []string{
		"certificate: issued for level lifecycle (topologies E+PD; backends shared_dir; security tls, authorization)",
		"certificate: issued for level faults (topologies E+PD; backends tcp)",
		"certificate: issued for level faults (topologies E+P+D; backends tcp)",
		"PASS  SE-1", "PASS  SE-2", // epd-shared-dir runs with mTLS and authorization
	} {
		if !strings.Contains(out, line) {
			t.Errorf("demo output lacks %q:\n%s", line, lastLines(out, 20))
		}
	}
	tcp := filepath.Join(dir, "epd-tcp")
	if out, code := runBaton(t, "report", "verify", tcp); code != 0 {
		t.Errorf("baton report verify exited %d on the tcp bundle:\n%s", code, out)
	}
	dir = filepath.Join(dir, "epd-shared-dir")
	for _, f := range append(reports.BundleFiles, "results.json", "ginkgo.json") {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("demo bundle lacks %s: %v", f, err)
		}
	}
	out, code = runBaton(t, "report", "verify", dir)
	if code != 0 || !strings.Contains(out, "accepted") {
		t.Fatalf("baton report verify exited %d on the demo bundle:\n%s", code, out)
	}
	t.Logf("%s", strings.TrimSpace(out))
	res, err := reports.ReadYAML(filepath.Join(dir, reports.ResultsYAMLFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.HandoffLatency) == 0 || res.Certificate == nil || !res.Certificate.Issued || res.Config == nil {
		t.Errorf("demo results lack latencies, certificate or config: %+v", res.Certificate)
	}

	// Tamper with the report after the run.
	f, err := os.OpenFile(filepath.Join(dir, reports.ReportHTMLFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("<!-- edited after the run -->")
	f.Close()
	out, code = runBaton(t, "report", "verify", dir)
	if code != 1 || !strings.Contains(out, "report.html: SHA-256") {
		t.Errorf("verify of a changed bundle exited %d; want 1 naming report.html:\n%s", code, out)
	}
}

// TestMutantBundleRejected certifies a mutant (Abort answers ABORTED every
// time: it breaks SU-3) with --certify --bundle: the run fails, the bundle
// is written anyway, `baton report verify` rejects it naming SU-3, and its
// report.html renders in headless Chromium showing the failing rule, its
// transcript and the latency plot, with nothing on the console.
func TestMutantBundleRejected(t *testing.T) {
	const mutant, rule = "su3-release-always-aborted", "SU-3"
	work := t.TempDir()
	topo, err := launch.StartEPD(context.Background(), launch.Options{Binary: batonBinary, Preset: "tiny", WorkDir: work, Mutant: mutant, ProducerQuotaBytes: 32 << 20})
	if err != nil {
		t.Fatalf("start topology: %v", err)
	}
	defer topo.Shutdown(context.Background(), 30*time.Second)
	cfg := topo.Config()
	cfg.Implementation = target.Implementation{Vendor: "baton-dev", Product: "mutant " + mutant, Version: "test"}
	profile := writeProfile(t, work, cfg)
	bundle := filepath.Join(work, "bundle")
	out, code := runBaton(t, "check", "--config", profile, "--certify", "--bundle", bundle, "--report-dir", filepath.Join(work, "report"))
	if code != 1 {
		t.Fatalf("baton check --certify on mutant %s exited %d; want 1:\n%s", mutant, code, lastLines(out, 40))
	}
	if !strings.Contains(out, "certificate: refused for level core: "+rule+" (core) failed") {
		t.Errorf("output lacks the refused certificate naming %s:\n%s", rule, lastLines(out, 10))
	}
	out, code = runBaton(t, "report", "verify", bundle)
	if code != 1 || !strings.Contains(out, "rule "+rule+" (core) failed") {
		t.Fatalf("verify of the mutant bundle exited %d; want 1 naming %s:\n%s", code, rule, out)
	}
	t.Logf("verify: %s", strings.TrimSpace(out))

	res, err := reports.ReadYAML(filepath.Join(bundle, reports.ResultsYAMLFile))
	if err != nil {
		t.Fatal(err)
	}
	var failed *reports.CaseResult
	for i, c := range res.Cases {
		if c.Rule == rule && c.Outcome == reports.Failed {
			failed = &res.Cases[i]
			break
		}
	}
	if failed == nil {
		t.Fatalf("no failed %s case in results.yaml", rule)
	}
	if len(failed.Transcript) == 0 || !slicesHasMethod(failed.Transcript, "Abort") {
		t.Errorf("failed case %q has transcript %+v; want its Abort calls", failed.Name, failed.Transcript)
	}
	for _, c := range failed.Transcript {
		if strings.Contains(c.Request, `"tag"`) || strings.Contains(c.Request, `"id"`) {
			t.Errorf("transcript leaks opaque state: %s", c.Request)
		}
	}

	browser := headless.Browser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	page, err := headless.Render(ctx, browser, filepath.Join(bundle, reports.ReportHTMLFile), filepath.Join(t.ArtifactDir(), "mutant-report.png"))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	t.Logf("screenshot: %s", page.Screenshot)
	for _, want := range []string{
		`<div class="banner outcome-failed" id="verdict-core">`,
		`id="rule-core-` + rule + `" class="outcome-failed"`,
		`--label-filter 'SU-3'`,
		`<table class="transcript">`,
		`class="plot" data-topology="E+PD"`,
		`Certificate: refused for level core`,
	} {
		if !strings.Contains(page.DOM, want) {
			t.Errorf("rendered report lacks %s", want)
		}
	}
	if len(page.Console) > 0 {
		t.Errorf("the report wrote to the browser console:\n%s", strings.Join(page.Console, "\n"))
	}
}

func slicesHasMethod(calls []reports.Call, method string) bool {
	for _, c := range calls {
		if c.Method == method {
			return true
		}
	}
	return false
}

// TestCertifyRefusesUnverifiableProfile: --certify refuses (exit 3) before
// contacting anything when the profile cannot verify every Core rule, and
// names the rules; --dry-run shows the same without running; --list prints
// the test list filtered by a label expression.
func TestCertifyRefusesUnverifiableProfile(t *testing.T) {
	cfg := target.Config{
		Profile: target.Profile{Name: "opaque engine", Level: "core", Topologies: []string{"E+PD"}, Backends: []string{"shared_dir"}, Destructive: true, ProducerQuotaBytes: 1 << 20},
		// Nothing listens here: a refusal must come before any dial.
		Endpoints: map[target.Role]string{target.RoleProducer: "127.0.0.1:1", target.RoleConsumer: "127.0.0.1:1"},
	}
	profile := writeProfile(t, t.TempDir(), cfg)
	out, code := runBaton(t, "check", "--config", profile, "--certify")
	if code != 3 {
		t.Fatalf("baton check --certify exited %d; want 3:\n%s", code, out)
	}
	for _, want := range []string{"--certify refused", "H-3 (core)", "S-1 (core)", "B-1 (core)", "needs reference_format", "no baseline"} {
		if !strings.Contains(out, want) {
			t.Errorf("refusal lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "does not answer") {
		t.Errorf("the refusal contacted the target:\n%s", out)
	}

	out, code = runBaton(t, "check", "--config", profile, "--dry-run", "--label-filter", "SU-5 || L-2")
	if code != 0 || !strings.Contains(out, "RUN   SU-5  SU-5 a reference altered in any byte") || !strings.Contains(out, "N/A   L-2") || strings.Contains(out, "SU-2") {
		t.Errorf("--dry-run exited %d:\n%s", code, out)
	}
	// A dry run exits as the run would where it knows: a case that cannot
	// be verified (H-3 without the declared reference format) ends it 2.
	out, code = runBaton(t, "check", "--config", profile, "--dry-run", "--label-filter", "H-3")
	if code != 2 || !strings.Contains(out, "N/V   H-3") || !strings.Contains(out, "the run would end incomplete") {
		t.Errorf("--dry-run of a not-verifiable case exited %d; want 2:\n%s", code, out)
	}
	out, code = runBaton(t, "check", "--list", "--label-filter", "SU-2 || (level:faults && !under-faults)")
	if code != 0 || !strings.Contains(out, "SU-2 replay of a consumed reference") || !strings.Contains(out, "Q-1") || strings.Contains(out, "SU-1 ") {
		t.Errorf("--list exited %d:\n%s", code, out)
	}
	out, code = runBaton(t, "check", "--config", profile, "--bundle", t.TempDir())
	if code != 3 || !strings.Contains(out, "--bundle needs --certify") {
		t.Errorf("--bundle without --certify exited %d:\n%s", code, out)
	}
}
