package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/baton-dev/baton/internal/progress"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/baton-dev/baton/conformance/check"
	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/conformance/testlist"
	"github.com/baton-dev/baton/reports"
	"github.com/spf13/cobra"
)

// checkFlags are the flags of `baton check`.
type checkFlags struct {
	progressMode string
	progress     *progress.Reporter
	configPath   string
	reportDir    string
	labelFilter  string
	caseTimeout  time.Duration
	certify      bool
	bundleDir    string
	list         bool
	dryRun       bool
}

func checkCommand() *cobra.Command {
	var f checkFlags
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Certify a target against the baton.encoder.v1 contract, rule by rule",
		Long: `Probe the target named by --config (GetServerInfo, GetModelInfo: it must speak
the baton.encoder.v1 extension), run the conformance suite against it, print
one line per rule and write results.json, results.yaml, junit.xml,
report.html and Ginkgo's reports to --report-dir.

Outcomes per rule follow CONTRACT "Outcomes of a check": passed, failed,
error, not applicable, not verifiable.

  --list            print the test list (conformance.yaml: rules, levels,
                    requirements, cases, labels), filtered by --label-filter;
                    needs no profile and contacts nothing
  --dry-run         show what would run against the profile: which cases are
                    not applicable or not verifiable given what it declares;
                    contacts nothing
  --certify         a certification run: refuse (exit 3) unless every rule of
                    the claimed level can be verified with the profile's
                    capabilities; no --label-filter; the results carry a
                    certificate naming the topologies and backends it covers
  --bundle DIR      with --certify: write the submission bundle (PRODUCT.yaml,
                    README.md, results.yaml, junit.xml, report.html,
                    SHA256SUMS); check it with 'baton report verify DIR'

--label-filter takes Ginkgo label-filter expressions over the cases' labels:
rule IDs (SU-2), levels (level:core), topology:E+PD, needs:baseline,
needs:reference-format, needs:producer-quota, needs:fault-proxy,
needs:test-hooks, destructive, slow; e.g. 'SU-2 || level:core',
'level:core && !slow'. Only cases of the levels the profile claims run.

Exit codes: 0 every rule passed or was not applicable; 1 some rule failed;
2 no failure but some case ended in error or was not verifiable (a refused
certificate without failure); 3 bad configuration, the target did not answer
as a baton.encoder.v1 engine, or --certify refused to run.

` + target.EnvHelp(),
		RunE: func(cmd *cobra.Command, args []string) error {
			warnUnknownBatonVariables()
			prog, err := newProgress(cmd, f.progressMode, "cases")
			if err != nil {
				return err
			}
			f.progress = prog
			return runCheckCommand(cmd.Context(), cmd.OutOrStdout(), f, commandLine())
		},
	}
	addProgressFlag(cmd, &f.progressMode)
	fl := cmd.Flags()
	fl.StringVar(&f.configPath, "config", "", "target profile (YAML): endpoints per role, topologies, backends, declared capabilities (env BATON_CONFIG)")
	fl.StringVar(&f.reportDir, "report-dir", "out/report", "directory for results.json, results.yaml, junit.xml, report.html and Ginkgo's reports")
	fl.StringVar(&f.labelFilter, "label-filter", "", "Ginkgo label filter, e.g. 'SU-2 || level:core'")
	fl.DurationVar(&f.caseTimeout, "case-timeout", 0, "per-case timeout (default: the profile's case_timeout, else 60s)")
	fl.BoolVar(&f.certify, "certify", false, "certification run: every rule of the claimed level must be verifiable, and the results carry the certificate")
	fl.StringVar(&f.bundleDir, "bundle", "", "with --certify: write the certification bundle to this directory")
	fl.BoolVar(&f.list, "list", false, "print the test list (filtered by --label-filter) and exit")
	fl.BoolVar(&f.dryRun, "dry-run", false, "show what would run against the profile, without contacting the target")
	return cmd
}

// runCheckCommand is `baton check` after flag parsing; argv is the command
// line recorded in the results.
func runCheckCommand(ctx context.Context, out io.Writer, f checkFlags, argv string) error {
	if f.list {
		return printTestList(out, f.labelFilter)
	}
	if f.bundleDir != "" && !f.certify {
		return exitError{ExitUsage, "--bundle needs --certify (a bundle is a certification submission)"}
	}
	cfg, err := target.LoadConfig(f.configPath)
	if err != nil {
		if f.configPath == "" {
			return exitError{ExitUsage, "check needs --config target.yaml (or BATON_CONFIG / BATON_* variables): " + err.Error()}
		}
		return exitError{ExitUsage, err.Error()}
	}
	plan, err := check.NewPlan(cfg.Profile, check.RolesOfConfig(cfg), f.labelFilter)
	if err != nil {
		return exitError{ExitUsage, err.Error()}
	}
	if !plan.AnySelected() {
		return exitError{ExitUsage, fmt.Sprintf("label filter %q selects no case of the claimed levels (%s); cases of a higher level run only when the profile claims it",
			f.labelFilter, strings.Join(plan.Levels, ", "))}
	}
	// A profile that contradicts its own endpoints is a configuration error
	// before anything runs, in a dry run as in a real one.
	profileProblems := check.ProfileProblems(cfg.Profile, check.RolesOfConfig(cfg))
	if f.dryRun {
		fmt.Fprint(out, plan.Text())
		if len(profileProblems) > 0 {
			return exitError{ExitUsage, "the profile contradicts its endpoints: " + strings.Join(profileProblems, "; ")}
		}
		if f.certify {
			if problems := plan.CertifyProblems(); len(problems) > 0 {
				return exitError{ExitUsage, "--certify would refuse: " + check.CertifyError(plan, problems).Error()}
			}
			fmt.Fprintf(out, "certify: every rule of level %s can be verified with this profile\n", plan.Levels[len(plan.Levels)-1])
		}
		return nil
	}
	if len(profileProblems) > 0 {
		return exitError{ExitUsage, "the profile contradicts its endpoints: " + strings.Join(profileProblems, "; ")}
	}
	if f.certify {
		if problems := plan.CertifyProblems(); len(problems) > 0 {
			return exitError{ExitUsage, "--certify refused: " + check.CertifyError(plan, problems).Error()}
		}
	}
	if f.caseTimeout > 0 {
		cfg.CaseTimeout = f.caseTimeout // flag > env > file: the report records what ran
	}
	redacted, err := redactedConfig(cfg)
	if err != nil {
		return exitError{ExitUsage, err.Error()}
	}
	opts := check.Options{
		LabelFilter: f.labelFilter,
		ReportDir:   f.reportDir,
		CaseTimeout: f.caseTimeout,
		Out:         out,
		Certify:     f.certify,
		ConfigPath:  f.configPath,
		Config:      redacted,
		Command:     argv,
	}
	if f.progress != nil {
		opts.Progress = f.progress
	}
	code, err := runCheck(ctx, cfg, opts, f.bundleDir)
	if err != nil {
		return exitError{code, err.Error()}
	}
	if code != 0 {
		return exitError{code, ""}
	}
	return nil
}

// runCheck probes and checks one target, then writes the bundle when
// bundleDir is set; it returns the exit code.
func runCheck(ctx context.Context, cfg target.Config, opts check.Options, bundleDir string) (int, error) {
	tg, err := target.Dial(cfg)
	if err != nil {
		return ExitUsage, err
	}
	defer tg.Close()
	return runCheckOn(ctx, tg, opts, bundleDir)
}

// runCheckOn probes and checks a target already at hand (the demo's live
// target can inject faults and restart instances).
func runCheckOn(ctx context.Context, tg target.Target, opts check.Options, bundleDir string) (int, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.GPU == nil {
		opts.GPU = gpuInventory(opts.Out)
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err := check.Probe(pctx, tg)
	cancel()
	if errors.Is(err, check.ErrProfileMismatch) {
		return ExitUsage, err // each line names the profile field and both values
	}
	if err != nil {
		return ExitUsage, fmt.Errorf("target does not answer as a baton.encoder.v1 engine: %w", err)
	}
	if opts.ReportDir != "" {
		if err := os.MkdirAll(opts.ReportDir, 0o755); err != nil {
			return ExitUsage, err
		}
	}
	res, err := check.Run(ctx, tg, opts)
	if errors.Is(err, check.ErrCannotCertify) {
		return ExitUsage, err
	}
	if err != nil {
		return ExitIncomplete, err
	}
	if bundleDir != "" {
		if err := reports.WriteBundle(bundleDir, res); err != nil {
			return ExitIncomplete, err
		}
		abs, _ := filepath.Abs(bundleDir)
		fmt.Fprintf(opts.Out, "bundle: %s (check it with: baton report verify %s)\n", abs, reports.ShellQuote(bundleDir))
	}
	return reports.ExitCode(res), nil
}

// printTestList prints the compiled-in test list, filtered.
func printTestList(out io.Writer, filter string) error {
	l, err := testlist.Committed()
	if err != nil {
		return exitError{ExitUsage, err.Error()}
	}
	l, err = l.Filter(filter)
	if err != nil {
		return exitError{ExitUsage, err.Error()}
	}
	if len(l.Rules) == 0 {
		return exitError{ExitUsage, fmt.Sprintf("label filter %q selects no case (a misspelt label?); baton check --list shows every case with its labels", filter)}
	}
	fmt.Fprint(out, l.Text())
	return nil
}

// redactedConfig is the profile as a generic object with secrets removed
// (reports.RedactConfig), case_timeout written as a duration ("60s").
func redactedConfig(cfg target.Config) (map[string]any, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode profile: %w", err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // whole numbers stay whole (reports.RedactConfig makes them int64)
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("encode profile: %w", err)
	}
	if _, ok := m["case_timeout"]; ok {
		m["case_timeout"] = cfg.CaseTimeout.String()
	}
	return reports.RedactConfig(m), nil
}

// commandLine is this process's command line, shell-quoted, with the
// program named "baton".
func commandLine() string {
	parts := []string{"baton"}
	for _, a := range os.Args[1:] {
		parts = append(parts, reports.ShellQuote(a))
	}
	return strings.Join(parts, " ")
}

// verifyOptions is what `baton report verify` checks a bundle against:
// this baton's level table (CONTRACT section 5).
func verifyOptions() reports.VerifyOptions {
	levels := map[string][]string{}
	for l, rules := range suite.RulesByLevel() {
		levels[string(l)] = rules
	}
	return reports.VerifyOptions{RulesByLevel: levels, SpecRevisions: []string{check.SpecRevision}}
}
