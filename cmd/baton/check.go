package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/baton-dev/baton/conformance/check"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/reports"
	"github.com/spf13/cobra"
)

func checkCommand() *cobra.Command {
	var (
		configPath  string
		reportDir   string
		labelFilter string
		caseTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Certify a target against the baton.encoder.v1 contract, rule by rule",
		Long: `Probe the target named by --config (GetServerInfo, GetModelInfo: it must speak
the baton.encoder.v1 extension), run the conformance suite against it, print
one line per rule and write junit.xml and results.json to --report-dir.

Exit codes: 0 every rule passed or was not applicable; 1 some rule failed;
2 no failure but some case ended in error or not verifiable; 3 bad
configuration or the probe failed.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if configPath == "" {
				return exitError{ExitUsage, "check needs --config target.yaml"}
			}
			cfg, err := target.LoadConfig(configPath)
			if err != nil {
				return exitError{ExitUsage, err.Error()}
			}
			code, err := runCheck(cmd.Context(), cfg, check.Options{LabelFilter: labelFilter, ReportDir: reportDir, CaseTimeout: caseTimeout, Out: os.Stdout})
			if err != nil {
				return exitError{code, err.Error()}
			}
			if code != 0 {
				return exitError{code, ""}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "target profile (YAML): endpoints per role, topologies, backends, declared capabilities")
	f.StringVar(&reportDir, "report-dir", "out/report", "directory for junit.xml, results.json and Ginkgo's reports")
	f.StringVar(&labelFilter, "label-filter", "", "Ginkgo label filter, e.g. 'SU-2 || level:core'")
	f.DurationVar(&caseTimeout, "case-timeout", 0, "per-case timeout (default: the profile's case_timeout, else 60s)")
	return cmd
}

// runCheck probes and checks one target; it returns the exit code.
func runCheck(ctx context.Context, cfg target.Config, opts check.Options) (int, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	tg, err := target.Dial(cfg)
	if err != nil {
		return ExitUsage, err
	}
	defer tg.Close()
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err = check.Probe(pctx, tg)
	cancel()
	if err != nil {
		return ExitUsage, fmt.Errorf("target does not answer as a baton.encoder.v1 engine: %w", err)
	}
	if err := os.MkdirAll(opts.ReportDir, 0o755); err != nil {
		return ExitUsage, err
	}
	res, err := check.Run(ctx, tg, opts)
	if err != nil {
		return ExitIncomplete, err
	}
	return reports.ExitCode(res), nil
}
