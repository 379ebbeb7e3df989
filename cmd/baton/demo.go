package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/baton-dev/baton/conformance/check"
	"github.com/baton-dev/baton/conformance/launch"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/reports"
	"github.com/spf13/cobra"
)

// demoTopology is one topology the demo certifies.
type demoTopology struct {
	// Name is the --topology value and the bundle's folder under --report-dir.
	Name string
	// Says what it is, for the output.
	Says string
	// Options for conformance/launch.
	Backend    string
	FaultProxy bool
	// PrefillDecode starts E+P+D instead of E+PD.
	PrefillDecode bool
	// Level is the conformance level claimed (the engines get --test-hooks
	// from the Lifecycle level up).
	Level string
	// Security starts the engines with mTLS on every listener and an
	// operator token, certificates generated at run time, so SE-1 and SE-2
	// are certified too (launch.Options.Security; not behind the fault
	// proxy, which speaks plaintext).
	Security bool
}

// demoTopologies are certified in this order by a plain `baton demo`:
// each at the highest level its transport allows. The shared directory
// has no transfer to fault, so it stops at Lifecycle; both tcp topologies
// run with the fault proxy between consumer and producer and claim Faults.
var demoTopologies = []demoTopology{
	{Name: "epd-shared-dir", Says: "E+PD over the shared directory with mTLS and operator authorization, Lifecycle level", Backend: "shared_dir", Level: "lifecycle", Security: true},
	{Name: "epd-tcp", Says: "E+PD over tcp (NIXL-style WRITE) behind the fault proxy, Faults level", Backend: "tcp", FaultProxy: true, Level: "faults"},
	{Name: "eppd-tcp", Says: "E+P+D over tcp (KV moved by an xfer READ) behind the fault proxy, Faults level", Backend: "tcp", FaultProxy: true, PrefillDecode: true, Level: "faults"},
}

func demoCommand() *cobra.Command {
	var (
		preset     string
		reportDir  string
		workDir    string
		topology   string
		quotaBytes int64
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start the reference engine in each topology, certify it on the fixture images, write the bundles, shut down",
		Long: `The main job on the embedded defaults. For each topology (epd-shared-dir:
E+PD over the shared directory with mTLS on every listener and an operator
token, certificates generated at run time, certified at the Lifecycle level
with SE-1 and SE-2; epd-tcp:
E+PD over the tcp backend with a fault proxy between consumer and producer,
at the Faults level; eppd-tcp: E+P+D over tcp behind the fault proxy, the
KV session moved from P to D by an xfer READ, at the Faults level) it
starts the reference engine as processes on loopback ports, with test hooks
(encoder E, consumer PD, aggregated baseline), waits for Health READY, runs
the conformance suite against them as a certification run (real fixture
images over gRPC; the same as 'baton check --certify'), writes
--report-dir/<topology>/ as a certification bundle (PRODUCT.yaml, README.md,
CONTRACT.md, results.yaml, junit.xml, report.html, SHA256SUMS, plus results.json and
Ginkgo's reports), shuts every process down through Shutdown (S-1), checks
that the cache directory is empty (S-4), and exits with the worst verdict
(codes as in 'baton check'). Each topology runs in a child process of its
own (--topology NAME runs just one).

Check a bundle with 'baton report verify <report-dir>/<topology>'.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if topology != "" {
				for _, tp := range demoTopologies {
					if tp.Name == topology {
						return runDemo(tp, preset, reportDir, workDir, quotaBytes)
					}
				}
				return exitError{ExitUsage, fmt.Sprintf("unknown --topology %q (want one of %s)", topology, demoTopologyNames())}
			}
			return runDemoAll(preset, reportDir, workDir, quotaBytes)
		},
	}
	f := cmd.Flags()
	f.StringVar(&preset, "preset", "base", "encoder preset for the engines")
	f.StringVar(&reportDir, "report-dir", "out/report", "where to write the reports and certification bundles (one folder per topology)")
	f.StringVar(&topology, "topology", "", "certify only this topology, into --report-dir itself: "+demoTopologyNames())
	f.Int64Var(&quotaBytes, "producer-quota-bytes", 32<<20, "the producer's L-5 bound (small, so the L-5 case reaches it in a few publishes)")
	f.StringVar(&workDir, "work-dir", "", "keep the cache directory and process logs here (default: a removed temp dir)")
	return cmd
}

func demoTopologyNames() string {
	names := make([]string, len(demoTopologies))
	for i, tp := range demoTopologies {
		names[i] = tp.Name
	}
	return strings.Join(names, ", ")
}

// runDemoAll certifies every topology, each in a child process (a process
// runs the Ginkgo suite once), and exits with the worst code.
func runDemoAll(preset, reportDir, workDir string, quotaBytes int64) error {
	self, err := os.Executable()
	if err != nil {
		return exitError{ExitUsage, err.Error()}
	}
	worst := 0
	var lines []string
	for _, tp := range demoTopologies {
		dir := filepath.Join(reportDir, tp.Name)
		args := []string{"demo", "--topology", tp.Name, "--preset", preset, "--report-dir", dir, "--producer-quota-bytes", fmt.Sprint(quotaBytes)}
		if workDir != "" {
			args = append(args, "--work-dir", filepath.Join(workDir, tp.Name))
		}
		fmt.Printf("baton demo: === %s: %s\n", tp.Name, tp.Says)
		child := exec.Command(self, args...)
		child.Stdout, child.Stderr = os.Stdout, os.Stderr
		err := child.Run()
		code := child.ProcessState.ExitCode()
		if err != nil && code < 0 {
			return exitError{ExitEngine, fmt.Sprintf("demo %s: %v", tp.Name, err)}
		}
		verdict := "certified"
		if code != 0 {
			verdict = fmt.Sprintf("NOT certified (exit %d)", code)
		}
		lines = append(lines, fmt.Sprintf("  %-15s %-20s %s", tp.Name, verdict, dir))
		if code > worst {
			worst = code
		}
	}
	fmt.Println("baton demo: summary")
	for _, l := range lines {
		fmt.Println(l)
	}
	if worst != 0 {
		return exitError{worst, "some topology was not certified"}
	}
	return nil
}

// demoImplementation is the vendor metadata of the reference engine in the
// demo's PRODUCT.yaml.
func demoImplementation() target.Implementation {
	return target.Implementation{Vendor: "baton-dev", Product: "baton reference engine", Version: check.BatonVersion()}
}

func runDemo(tp demoTopology, preset, reportDir, workDir string, quotaBytes int64) error {
	ctx := context.Background()
	self, err := os.Executable()
	if err != nil {
		return exitError{ExitUsage, err.Error()}
	}
	if workDir == "" {
		workDir, err = os.MkdirTemp("", "baton-demo-")
		if err != nil {
			return exitError{ExitUsage, err.Error()}
		}
		defer os.RemoveAll(workDir)
	}
	fmt.Printf("baton demo: starting %s (preset %s) in %s\n", tp.Says, preset, workDir)
	start := launch.StartEPD
	if tp.PrefillDecode {
		start = launch.StartEPPD
	}
	topo, err := start(ctx, launch.Options{Binary: self, Preset: preset, WorkDir: workDir, ProducerQuotaBytes: quotaBytes,
		Backend: tp.Backend, FaultProxy: tp.FaultProxy, TestHooks: tp.Level != "core", Level: tp.Level, Security: tp.Security})
	if err != nil {
		return exitError{ExitEngine, err.Error()}
	}
	cfg := topo.Config()
	cfg.Implementation = demoImplementation()
	cfg.Level = tp.Level
	for _, p := range []*launch.Process{topo.Producer, topo.Consumer, topo.Prefill, topo.Decode, topo.Baseline} {
		if p != nil {
			fmt.Printf("baton demo: %s at %s\n", p.Role, p.Address)
		}
	}

	code, checkErr := certifyDemo(ctx, topo.Target().WithProfile(cfg.Profile), cfg, reportDir)
	shutErr := topo.Shutdown(ctx, 60*time.Second)
	abs, _ := filepath.Abs(reportDir)
	fmt.Printf("baton demo: report and certification bundle in %s (check it with: baton report verify %s)\n", abs, reports.ShellQuote(reportDir))
	switch {
	case checkErr != nil:
		return exitError{code, checkErr.Error()}
	case shutErr != nil:
		return exitError{ExitEngine, "S-4 shutdown: " + shutErr.Error()}
	case code != 0:
		return exitError{code, "some rules did not pass; no certificate"}
	}
	fmt.Println("baton demo: all applicable rules passed, certificate issued; every process drained and exited 0; cache directory empty")
	return nil
}

// certifyDemo runs the certification of the demo's topology with the
// report directory as the bundle.
func certifyDemo(ctx context.Context, tg target.Target, cfg target.Config, reportDir string) (int, error) {
	plan, err := check.NewPlan(cfg.Profile, check.RolesOfConfig(cfg), "")
	if err != nil {
		return ExitUsage, err
	}
	if problems := plan.CertifyProblems(); len(problems) > 0 {
		return ExitUsage, check.CertifyError(plan, problems)
	}
	redacted, err := redactedConfig(cfg)
	if err != nil {
		return ExitUsage, err
	}
	opts := check.Options{ReportDir: reportDir, Out: os.Stdout, Certify: true, Config: redacted, Command: commandLine()}
	code, err := runCheckOn(ctx, tg, opts, reportDir)
	if errors.Is(err, check.ErrCannotCertify) {
		return ExitUsage, err
	}
	return code, err
}
