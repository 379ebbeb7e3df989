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
	"slices"
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
  --dry-run         show what would run against the profile: what the launch
                    section would start, which cases are not applicable or
                    not verifiable given what it declares; contacts and
                    starts nothing; exits as the run would where it knows:
                    2 when a selected case would be not verifiable or an
                    error, 3 for a profile error, else 0
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
needs:test-hooks, needs:restart, destructive, slow; e.g. 'SU-2 || level:core',
'level:core && !slow'. Only cases of the levels the profile claims run.

A profile's launch section tells baton how to start, stop and restart each
role: baton starts (or, with launch.adopt, adopts) them before the cases,
restarts what a case takes down or poisons (the cases labelled
needs:restart, which are not verifiable without it), and stops the roles it
started at the end (launch.leave_running keeps them). fault_proxy:
{listen: host:port} (or fault_proxy: true with a launch section) runs the
harness's fault proxy there for the Faults level; point the producer's
advertised control address at it. The launched processes' logs go to
<report-dir>/launch/.

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
	fl.DurationVar(&f.caseTimeout, "case-timeout", 0, "per-case timeout, 1s..1h (0 or absent: the profile's case_timeout, else 60s)")
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
	// --case-timeout has the profile's bounds (a dry run refuses it too).
	if f.caseTimeout != 0 && f.caseTimeout < target.MinCaseTimeout {
		return exitError{ExitUsage, fmt.Sprintf("--case-timeout %v is shorter than %v (no case can publish and consume in less; 0 means the profile's case_timeout)", f.caseTimeout, target.MinCaseTimeout)}
	}
	if f.caseTimeout > target.MaxCaseTimeout {
		return exitError{ExitUsage, fmt.Sprintf("--case-timeout %v is longer than %v (the bound is what turns a hung target into a verdict)", f.caseTimeout, target.MaxCaseTimeout)}
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
	if err := harnessCanRun(cfg); err != nil {
		return err
	}
	// A profile that contradicts its own endpoints is a configuration error
	// before anything runs, in a dry run as in a real one.
	profileProblems := check.ProfileProblems(cfg.Profile, check.RolesOfConfig(cfg))
	if f.dryRun {
		fmt.Fprint(out, harnessText(cfg, f.reportDir))
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
		// The run's exit code where the plan already knows it (CONTRACT
		// "Outcomes of a check"): a case not verifiable or in error.
		if code, cases := plan.PredictedExitCode(); code != 0 {
			rules := []string{}
			for _, c := range cases {
				if !slices.Contains(rules, c.Rule) {
					rules = append(rules, c.Rule)
				}
			}
			return exitError{code, fmt.Sprintf("the run would end %s: %d selected cases cannot be verified or would be errors with this profile (rules %s)", "incomplete", len(cases), strings.Join(rules, ", "))}
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
// bundleDir is set; it returns the exit code. With a launch section or a
// fault_proxy address the harness's side runs first (target.LaunchTarget:
// the roles started or adopted, the fault proxy listening) and is ended
// after the run (the roles baton started stopped, unless
// launch.leave_running); a launch that fails is exit 3.
func runCheck(ctx context.Context, cfg target.Config, opts check.Options, bundleDir string) (int, error) {
	tg, done, err := harnessTarget(ctx, cfg, opts.ReportDir, opts.Out)
	if err != nil {
		return ExitUsage, err
	}
	code, err := runCheckOn(ctx, tg, opts, bundleDir)
	if derr := done(); derr != nil {
		fmt.Fprintf(opts.Out, "launch: %v\n", derr)
		if code == 0 && err == nil {
			code = ExitIncomplete // the run passed but baton could not put the roles back as the profile asks
		}
	}
	return code, err
}

// harnessTarget builds the target of cfg: the dialled endpoints, plus what
// the profile asks the harness to run (target.LaunchTarget) when it has a
// launch section or a fault_proxy address. done ends it.
func harnessTarget(ctx context.Context, cfg target.Config, reportDir string, out io.Writer) (target.Target, func() error, error) {
	if out == nil {
		out = io.Discard
	}
	if cfg.Launch == nil && cfg.FaultProxyAt == nil {
		tg, err := target.Dial(cfg)
		if err != nil {
			return nil, nil, err
		}
		return tg, tg.Close, nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	l, err := target.LaunchTarget(ctx, cfg, target.LaunchOptions{ReportDir: reportDir, Out: out})
	if err != nil {
		return nil, nil, err
	}
	done := func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		return l.Close(cctx)
	}
	return l.Target(), done, nil
}

// harnessCanRun refuses a profile whose fault_proxy: true no harness can
// honour: without a launch section baton cannot tell the producer where its
// proxy listens (exit 3, before anything runs, instead of every Faults case
// ending not verifiable).
func harnessCanRun(cfg target.Config) error {
	if cfg.FaultProxy && !cfg.HarnessRunsFaultProxy() {
		return exitError{ExitUsage, "fault_proxy: true needs a harness that runs the proxy: write fault_proxy: {listen: host:port} " +
			"(baton check listens there; start the producer with --advertise-control host:port and let the consumer trust that address as a producer, CONTRACT SE-3), " +
			"or add a launch section (baton picks a port and passes it to the commands as ${FAULT_PROXY}); see docs/implementing.md section 5"}
	}
	return nil
}

// harnessText says, for --dry-run, what the harness would run besides the
// cases: the launch section's roles and the fault proxy.
func harnessText(cfg target.Config, reportDir string) string {
	var b strings.Builder
	if a := cfg.FaultProxyAt; a != nil {
		upstream := a.ProducerControl
		if upstream == "" {
			upstream = cfg.Endpoints[target.RoleProducer]
		}
		fmt.Fprintf(&b, "fault proxy: would listen on %s and forward to the producer's control address %s (the producer must advertise %s)\n", a.Listen, upstream, a.Listen)
	} else if cfg.FaultProxy && cfg.Launch != nil {
		b.WriteString("fault proxy: would listen on a free loopback port, passed to the launch commands as ${FAULT_PROXY}\n")
	}
	if l := cfg.Launch; l != nil {
		var roles []string
		for _, r := range []target.Role{target.RoleProducer, target.RoleConsumer, target.RolePrefill, target.RoleDecode, target.RoleBaseline} {
			if l.Roles[r] != nil {
				roles = append(roles, string(r))
			}
		}
		verb := "start"
		if l.Adopt {
			verb = "start (or adopt, when already READY)"
		}
		work := l.WorkDir
		if work == "" {
			work = filepath.Join(reportDir, "launch")
		}
		end := "stop them at the end"
		if l.LeaveRunning {
			end = "leave them running at the end"
		}
		fmt.Fprintf(&b, "launch: would %s %s, restart them after the cases that take them down (needs:restart), and %s; logs under %s\n", verb, strings.Join(roles, ", "), end, work)
	} else {
		b.WriteString("launch: none (the profile has no launch section): the cases labelled needs:restart are not verifiable\n")
	}
	return b.String()
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
