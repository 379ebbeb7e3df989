// Package e2e runs the conformance suite against real `baton serve`
// processes: the reference engine must pass every Core rule that applies to
// E+PD, and every mutant must be caught by the case named after its rule.
package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/launch"
	"github.com/baton-dev/baton/conformance/mutants"
	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/reports"
	"gopkg.in/yaml.v3"
)

var (
	batonBinary string
	benchMode   = flag.Bool("e2e.bench", false, "also run the Core suite on the base preset and report its wall time")
	longMode    = flag.Bool("e2e.long", false, "also run the long end-to-end tests (make e2e-long, in make ci-long): the demo's three certifications and the vendor's launch profile certified twice at Faults")
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "baton-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	batonBinary = filepath.Join(dir, "baton")
	args := []string{"build", "-o", batonBinary}
	if batonBuildTags != "" {
		args = append(args, "-tags", batonBuildTags)
	}
	build := exec.Command("go", append(args, "github.com/baton-dev/baton/cmd/baton")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build baton:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needLong skips a long test unless -e2e.long is given (make e2e-long,
// part of make ci-long), so make test stays under its time budget.
func needLong(t *testing.T) {
	t.Helper()
	if !*longMode {
		t.Skip("a long test: run with -e2e.long (make e2e-long, in make ci-long)")
	}
}

// certify starts E+PD+baseline (optionally a mutant), runs `baton check` as
// its own process and returns its results and exit code.
func certify(t *testing.T, preset, mutant string) (reports.Results, int, *launch.Topology) {
	t.Helper()
	return certifyAt(t, preset, mutant, "", "")
}

// certifyAt is certify claiming level ("" = core; "lifecycle" starts the
// engines with --test-hooks) and running `baton check --label-filter
// filter` ("" = every case).
func certifyAt(t *testing.T, preset, mutant, level, filter string) (reports.Results, int, *launch.Topology) {
	t.Helper()
	work := t.TempDir()
	ctx := context.Background()
	topo, err := launch.StartEPD(ctx, launch.Options{Binary: batonBinary, Preset: preset, WorkDir: work, Mutant: mutant, ProducerQuotaBytes: 32 << 20,
		Level: level, TestHooks: level != ""})
	if err != nil {
		t.Fatalf("start topology: %v", err)
	}
	cfgBytes, err := yaml.Marshal(topo.Config())
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(work, "target.yaml")
	if err := os.WriteFile(cfgPath, cfgBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	reportDir := filepath.Join(work, "report")
	var out bytes.Buffer
	args := []string{"check", "--config", cfgPath, "--report-dir", reportDir}
	if filter != "" {
		args = append(args, "--label-filter", filter)
	}
	cmd := exec.Command(batonBinary, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("baton check: %v\n%s", err, out.String())
	}
	res, rerr := reports.ReadJSON(filepath.Join(reportDir, "results.json"))
	if rerr != nil {
		t.Fatalf("baton check exited %d without results.json (%v):\n%s", code, rerr, out.String())
	}
	t.Logf("baton check (mutant %q) exited %d:\n%s", mutant, code, lastLines(out.String(), 40))
	return res, code, topo
}

// TestCoreSuiteAgainstProcesses: the reference engine passes every Core rule
// that applies to E+PD, and shuts down cleanly with an empty cache directory.
func TestCoreSuiteAgainstProcesses(t *testing.T) {
	start := time.Now()
	res, code, topo := certify(t, "tiny", "")
	if err := topo.Shutdown(context.Background(), 60*time.Second); err != nil {
		t.Errorf("S-4 shutdown: %v", err)
	}
	for _, r := range res.Rules {
		if r.Outcome != reports.Passed && r.Outcome != reports.NotApplicable {
			t.Errorf("%s %s: %s", r.Rule, r.Outcome, r.Message)
		}
	}
	if code != 0 {
		t.Errorf("baton check exited %d, want 0", code)
	}
	if len(res.Rules) < 17 {
		t.Errorf("only %d rules reported; the Core level has 19", len(res.Rules))
	}
	t.Logf("Core suite on tiny: %d rules, %d cases, %v", len(res.Rules), len(res.Cases), time.Since(start).Round(time.Millisecond))
}

// TestCoreSuiteBase measures the Core suite's wall time on the base preset
// (make bench; target < 15 s on 2 cores).
func TestCoreSuiteBase(t *testing.T) {
	if !*benchMode {
		t.Skip("run with -e2e.bench (make bench)")
	}
	start := time.Now()
	res, code, topo := certify(t, "base", "")
	_ = topo.Shutdown(context.Background(), 60*time.Second)
	t.Logf("BENCH core suite preset=base: exit %d, %d cases, suite wall time %d ms (baton check %d ms)", code, len(res.Cases), time.Since(start).Milliseconds(), res.DurationMs)
}

// TestMutantKillTable: every mutant makes the suite fail, the case named
// after the rule it breaks is among the failures, and no rule fails that
// the mutant does not declare (its Rule and AlsoBreaks): a case that fails
// for another rule's broken decision, or a cascade after the target went
// down, would be a verdict wrong about someone else's engine.
//
// A Core mutant runs the whole Core suite (`baton check`), so its row shows
// every rule that failed; a Lifecycle mutant runs the cases of its rule at
// the Lifecycle level, a Faults one (and X-1, which needs restarts) the
// cases of its rule against a live target.
func TestMutantKillTable(t *testing.T) {
	var table []string
	for _, m := range mutants.All() {
		t.Run(m.Name, func(t *testing.T) {
			start := time.Now()
			// X-1 poisons the producer until restart: its case needs a
			// target that restarts it (a live one, as for the Faults level).
			if m.Topology == mutants.TopologyTCPFaults || m.Topology == mutants.TopologyTCPSecure || (m.Level == mutants.LevelLifecycle && m.Rule == "X-1") {
				killed, failed := killFaultsMutant(t, m)
				verdict := "KILLED"
				if !killed {
					verdict = "SURVIVED"
					t.Errorf("mutant %s (%s: %s) survived the %s cases", m.Name, m.Rule, m.Breaks, m.Rule)
				}
				table = append(table, fmt.Sprintf("%-38s %-5s %-8s %6.1fs  only its rule's cases ran; failed: %s", m.Name, m.Rule, verdict, time.Since(start).Seconds(), failed))
				suiteColumn[m.Name] = killVerdict{killed: killed, cell: fmt.Sprintf("%s (%.1fs)", verdict, time.Since(start).Seconds())}
				return
			}
			// A Lifecycle mutant runs only the cases of its rule, at the
			// Lifecycle level (the engines get --test-hooks).
			level, filter := "", ""
			if m.Level == mutants.LevelLifecycle {
				level, filter = mutants.LevelLifecycle, m.Rule
			}
			res, code, topo := certifyAt(t, "tiny", m.Name, level, filter)
			_ = topo.Shutdown(context.Background(), 30*time.Second) // a mutant may not drain cleanly; that is not what is judged here
			failed, extra := failedRules(m, res)
			killed := slices.Contains(failed, m.Rule)
			verdict := "KILLED"
			if !killed || code != 1 {
				verdict = "SURVIVED"
				t.Errorf("mutant %s (%s: %s) survived: exit %d, failed rules %v", m.Name, m.Rule, m.Breaks, code, failed)
			}
			for _, r := range extra {
				t.Errorf("mutant %s (%s) also failed %s, which it does not declare (Mutant.AlsoBreaks): %s", m.Name, m.Rule, r, ruleMessage(res, r))
			}
			scope := "every Core rule ran"
			if filter != "" {
				scope = "only its rule's cases ran"
			}
			table = append(table, fmt.Sprintf("%-38s %-5s %-8s %6.1fs  %s; failed rules: %s; undeclared: %s", m.Name, m.Rule, verdict, time.Since(start).Seconds(), scope, strings.Join(failed, " "), listOrNone(extra)))
			if len(extra) > 0 {
				verdict += "+" + strings.Join(extra, "+") // failed rules it does not declare
			}
			suiteColumn[m.Name] = killVerdict{killed: killed && code == 1 && len(extra) == 0, cell: fmt.Sprintf("%s (%.1fs)", verdict, time.Since(start).Seconds())}
		})
	}
	t.Logf("kill table (mutant, rule it breaks, verdict of the case named after that rule, time, what ran, every failed rule, the failed rules it does not declare):\n%s", strings.Join(table, "\n"))
}

// failedRules returns the rules that failed in res, in report order, and
// those of them m does not declare (Mutant.Declares).
func failedRules(m mutants.Mutant, res reports.Results) (failed, undeclared []string) {
	for _, r := range res.Rules {
		if r.Outcome != reports.Failed || slices.Contains(failed, r.Rule) {
			continue
		}
		failed = append(failed, r.Rule)
		if !m.Declares(r.Rule) {
			undeclared = append(undeclared, r.Rule)
		}
	}
	return failed, undeclared
}

// ruleMessage is the first line of rule's message in res.
func ruleMessage(res reports.Results, rule string) string {
	for _, r := range res.Rules {
		if r.Rule == rule && r.Outcome == reports.Failed {
			return strings.SplitN(r.Message, "\n", 2)[0]
		}
	}
	return ""
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, " ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// killFaultsMutant starts E+PD with test hooks and the mutant (on tcp with
// the fault proxy for TopologyTCPFaults), runs the cases of the mutant's
// rule against the live target (which restarts instances), and reports
// whether one failed.
func killFaultsMutant(t *testing.T, m mutants.Mutant) (bool, string) {
	t.Helper()
	opts := launch.Options{Binary: batonBinary, Preset: "tiny", WorkDir: t.TempDir(), TestHooks: true, Mutant: m.Name, ProducerQuotaBytes: 32 << 20}
	switch m.Topology {
	case mutants.TopologyTCPFaults:
		opts.Backend, opts.FaultProxy = "tcp", true
	case mutants.TopologyTCPSecure:
		opts.Backend, opts.Security = "tcp", true
	default:
		opts.Level = m.Level
	}
	topo, err := launch.StartEPD(context.Background(), opts)
	if err != nil {
		t.Fatalf("start topology: %v", err)
	}
	defer topo.Shutdown(context.Background(), 30*time.Second)
	live := topo.Target()
	var failed []string
	for _, c := range suite.CasesForRule(m.Rule) {
		rec := runRecorded(c, live, 90*time.Second)
		if rec.Failed() {
			failed = append(failed, c.Name)
			t.Logf("%s failed as it should: %s", c.Name, rec)
		} else if rec.skipped {
			t.Logf("%s skipped: %s", c.Name, rec)
		}
	}
	return len(failed) > 0, strings.Join(failed, " | ")
}

// TestVolumeCases: with BATON_VOLUME=1 (make volume, in make ci-long) the
// volume cases (B-1: 100 large images, 8 in flight, each answer equal to
// the baseline) run against real engine processes and pass; without it
// they are skipped here, as `make test` leaves them out.
func TestVolumeCases(t *testing.T) {
	if !suite.VolumeRequested() {
		t.Skipf("set %s=1 (make volume, in make ci-long)", suite.EnvVolume)
	}
	start := time.Now()
	res, code, topo := certifyAt(t, "tiny", "", "", suite.LabelVolume)
	if err := topo.Shutdown(context.Background(), 60*time.Second); err != nil {
		t.Errorf("S-4 shutdown: %v", err)
	}
	ran := 0
	for _, c := range res.Cases {
		if c.Outcome == reports.Passed {
			ran++
		}
		if c.Outcome != reports.Passed && c.Outcome != reports.NotApplicable {
			t.Errorf("%s: %s: %s", c.Name, c.Outcome, c.Message)
		}
	}
	if code != 0 || ran == 0 {
		t.Errorf("baton check --label-filter %s exited %d with %d passed cases; want 0 and at least one", suite.LabelVolume, code, ran)
	}
	t.Logf("volume cases: %d passed in %v", ran, time.Since(start).Round(time.Millisecond))
}
