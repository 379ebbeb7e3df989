package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/baton-dev/baton/conformance/check"
	"github.com/baton-dev/baton/conformance/launch"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/reports"
	"github.com/spf13/cobra"
)

func demoCommand() *cobra.Command {
	var (
		preset     string
		reportDir  string
		workDir    string
		quotaBytes int64
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start E, PD and an aggregated baseline, certify them on the fixture images, write the bundle, shut down",
		Long: `The main job on the embedded defaults: start the reference engine as three
processes on loopback ports (encoder E, consumer PD, aggregated baseline) with
a temporary shared cache directory, wait for Health READY, run the
conformance suite against them as a certification run (real fixture images
over gRPC; the same as 'baton check --certify'), write --report-dir as a
certification bundle (PRODUCT.yaml, README.md, results.yaml, junit.xml,
report.html, SHA256SUMS, plus results.json and Ginkgo's reports), shut every
process down through Shutdown (S-1), check that the cache directory is empty
(S-4), and exit with the verdict (codes as in 'baton check').

Check the bundle with 'baton report verify <report-dir>'.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDemo(preset, reportDir, workDir, quotaBytes)
		},
	}
	f := cmd.Flags()
	f.StringVar(&preset, "preset", "base", "encoder preset for the engines")
	f.StringVar(&reportDir, "report-dir", "out/report", "where to write the report and certification bundle")
	f.Int64Var(&quotaBytes, "producer-quota-bytes", 32<<20, "the producer's L-5 bound (small, so the L-5 case reaches it in a few publishes)")
	f.StringVar(&workDir, "work-dir", "", "keep the cache directory and process logs here (default: a removed temp dir)")
	return cmd
}

// demoImplementation is the vendor metadata of the reference engine in the
// demo's PRODUCT.yaml.
func demoImplementation() target.Implementation {
	return target.Implementation{Vendor: "baton-dev", Product: "baton reference engine", Version: check.BatonVersion()}
}

func runDemo(preset, reportDir, workDir string, quotaBytes int64) error {
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
	fmt.Printf("baton demo: starting E, PD and aggregated (preset %s) in %s\n", preset, workDir)
	topo, err := launch.StartEPD(ctx, launch.Options{Binary: self, Preset: preset, WorkDir: workDir, ProducerQuotaBytes: quotaBytes})
	if err != nil {
		return exitError{ExitEngine, err.Error()}
	}
	cfg := topo.Config()
	cfg.Implementation = demoImplementation()
	fmt.Printf("baton demo: E %s, PD %s, baseline %s\n", topo.Producer.Address, topo.Consumer.Address, topo.Baseline.Address)

	code, checkErr := certifyDemo(ctx, cfg, reportDir)
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
func certifyDemo(ctx context.Context, cfg target.Config, reportDir string) (int, error) {
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
	code, err := runCheck(ctx, cfg, opts, reportDir)
	if errors.Is(err, check.ErrCannotCertify) {
		return ExitUsage, err
	}
	return code, err
}
