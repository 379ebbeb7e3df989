package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/baton-dev/baton/conformance/check"
	"github.com/baton-dev/baton/conformance/props"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/conformance/target/simtarget"
	"github.com/baton-dev/baton/internal/progress"
	"github.com/baton-dev/baton/sim"
	"github.com/spf13/cobra"
)

// fuzzFlags are the flags of `baton fuzz`.
type fuzzFlags struct {
	configPath   string
	checks       int
	steps        int
	seed         uint64
	failFile     string // --replay (--failfile is its old name)
	noFailFile   bool
	shrinkTime   time.Duration
	verbose      bool
	sim          bool
	mutant       string
	stateDir     string
	progressMode string
	progress     *progress.Reporter
	reportDir    string
}

// fuzzPropertyName names the property's fail files:
// <state-dir>/testdata/rapid/<fuzzPropertyName>-<target>/.
const fuzzPropertyName = "baton-fuzz-handoff"

// fuzzStateRoot is the default root of --state-dir: one directory per
// target name under it.
const fuzzStateRoot = ".baton/fuzz"

func fuzzCommand() *cobra.Command {
	var f fuzzFlags
	var shard sweepFlags // --shard, --shards (fuzz_shard.go)
	cmd := &cobra.Command{
		Use:   "fuzz",
		Short: "Run the rapid state-machine property of the handoff against a target (conformance/props)",
		Long: `Run the handoff property of conformance/props against the target named by
--config (the same profile as 'baton check'; it needs producer and consumer
endpoints). Each check is a rapid-drawn sequence of publish, consume, replay
of a spent reference, release, release twice, malformed reference and
cancellation, checked against a model of the expected table; after every
action Health must be READY and, when the profile declares observables,
the CONTRACT section 4 counters must agree with the model. Shutdown is not
drawn here (it would take the target down for the remaining checks).

First it probes the target as 'baton check' does: an endpoint that does not
answer, or answers but does not speak baton.encoder.v1, is exit 3 with the
reason (never a property failure). A profile's launch section and
fault_proxy address run as for 'baton check' (the Faults scenarios need both).

It prints SEED=N and the settings first, and progress on stderr (--progress).
A failure is shrunk to a short sequence, printed, and saved as a fail file
under --state-dir (default ` + fuzzStateRoot + `/<target name>/, so a fail file
is only ever replayed against the target it was found on); every fail file
kept there is replayed before new checks. The last line is PASSED (N checks,
T) or the baton command that reproduces the failure (--replay FILE, or
--checks 1 --seed N).

With --sim instead of --config the property runs against the simulator
behind the Target interface (conformance/target/simtarget): a fresh
fault-free world per check, shutdown drawn too, thousands of checks a
second; --mutant injects one of the simulator's mutants, the same broken
decision as the engine's (its own checkers then stay off, so the property
alone must find it).

Exit codes: 0 passed; 1 a check failed; 3 bad flags or configuration, or the
target did not answer as a baton.encoder.v1 engine.

` + target.EnvHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			warnUnknownBatonVariables()
			if skip, err := applyFuzzShard(cmd.OutOrStdout(), shard, &f); skip || err != nil {
				return err
			}
			prog, err := newProgress(cmd, f.progressMode, "checks")
			if err != nil {
				return err
			}
			f.progress = prog
			return runFuzzCommand(cmd.OutOrStdout(), f)
		},
	}
	addProgressFlag(cmd, &f.progressMode)
	fl := cmd.Flags()
	fl.StringVar(&f.configPath, "config", "", "target profile (YAML), as for 'baton check' (env BATON_CONFIG)")
	fl.IntVar(&f.checks, "checks", 30, "number of checks (rapid -rapid.checks)")
	fl.IntVar(&f.steps, "steps", 15, "average number of actions per check (rapid -rapid.steps)")
	fl.Uint64Var(&f.seed, "seed", 0, "rapid's base seed (0 draws one; printed either way)")
	fl.StringVar(&f.failFile, "replay", "", "replay this fail file first (the reproduce command names it)")
	fl.StringVar(&f.failFile, "failfile", "", "old name of --replay")
	_ = fl.MarkHidden("failfile")
	fl.StringVar(&f.stateDir, "state-dir", "", "where fail files are kept and replayed from (default "+fuzzStateRoot+"/<target name>)")
	fl.StringVar(&f.reportDir, "report-dir", "out/fuzz", "with a launch section: where the launched processes' logs go (<dir>/launch)")
	fl.BoolVar(&f.noFailFile, "no-failfile", false, "write no fail file on failure")
	fl.DurationVar(&f.shrinkTime, "shrink-time", 30*time.Second, "bound on shrinking a failure")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "print rapid's log as it runs")
	fl.BoolVar(&f.sim, "sim", false, "run against the simulator target instead of --config")
	fl.StringVar(&f.mutant, "mutant", "", "with --sim: inject one of the simulator's mutants: "+mutantNames())
	addFuzzShardFlags(cmd, &shard)
	return cmd
}

// runFuzzCommand is `baton fuzz` after flag parsing.
func runFuzzCommand(out io.Writer, f fuzzFlags) error {
	if f.checks < 1 || f.steps < 1 {
		return exitError{ExitUsage, "--checks and --steps must be at least 1"}
	}
	if f.sim {
		return runFuzzSim(out, f)
	}
	if f.mutant != "" {
		return exitError{ExitUsage, "--mutant needs --sim"}
	}
	cfg, err := target.LoadConfig(f.configPath)
	if err != nil {
		if f.configPath == "" {
			return exitError{ExitUsage, "fuzz needs --config target.yaml (or BATON_CONFIG / BATON_* variables): " + err.Error()}
		}
		return exitError{ExitUsage, err.Error()}
	}
	if cfg.Endpoints[target.RoleProducer] == "" || cfg.Endpoints[target.RoleConsumer] == "" {
		return exitError{ExitUsage, "fuzz needs producer and consumer endpoints in the profile (the handoff property runs E+PD)"}
	}
	if err := harnessCanRun(cfg); err != nil {
		return err
	}
	ctx := context.Background()
	tg, done, err := harnessTarget(ctx, cfg, f.reportDir, out)
	if err != nil {
		return exitError{ExitUsage, err.Error()}
	}
	defer func() {
		if err := done(); err != nil {
			fmt.Fprintf(out, "launch: %v\n", err)
		}
	}()
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err = check.Probe(pctx, tg)
	cancel()
	if err != nil {
		return exitError{ExitUsage, "target does not answer as a baton.encoder.v1 engine, so no property was checked: " + err.Error()}
	}
	stateDir := f.stateDir
	if stateDir == "" {
		stateDir = filepath.Join(fuzzStateRoot, safeName(cfg.Name))
	}
	repro := func(failFile string, seed uint64) string {
		cmd := "baton fuzz --config " + shellQuote(f.configPath)
		if f.stateDir != "" {
			cmd += " --state-dir " + shellQuote(f.stateDir)
		}
		switch {
		case failFile != "":
			return cmd + " --replay " + shellQuote(failFile)
		case seed != 0:
			return cmd + fmt.Sprintf(" --checks 1 --seed %d", seed)
		}
		return cmd
	}
	opts := props.RunOptions{
		Name: fuzzPropertyName + "-" + safeName(cfg.Name), Checks: f.checks, Steps: f.steps, Seed: f.seed,
		FailFile: f.failFile, NoFailFile: f.noFailFile, ShrinkTime: f.shrinkTime, StateDir: stateDir,
		Reproduce: repro,
	}
	if f.progress != nil {
		opts.Progress = f.progress
	}
	if f.verbose {
		opts.Out = out
	}
	if opts.Seed == 0 {
		opts.Seed = drawSeed()
	}
	fmt.Fprintf(out, "SEED=%d\n", opts.Seed)
	fmt.Fprintf(out, "target=%s\nchecks=%d\nsteps=%d\nobservables=%v\nreference_format=%q\nstate_dir=%s\n", cfg.Name, f.checks, f.steps, cfg.Observables, cfg.ReferenceFormat, stateDir)
	rep := props.Run(props.Handoff(props.Shared(tg), props.Config{CallTimeout: cfg.CaseTimeout}), opts)
	if rep.Passed {
		fmt.Fprintf(out, "PASSED (%d checks, %v)\n", f.checks, rep.Elapsed.Round(time.Millisecond))
		return nil
	}
	if !f.verbose {
		fmt.Fprint(out, rep.Output)
	}
	return exitError{ExitFailed, fmt.Sprintf("FAILED (shrunk to %d actions, %v); reproduce with: %s", rep.Actions, rep.Elapsed.Round(time.Millisecond), repro(rep.FailFile, rep.FailSeed))}
}

// safeName is a target name as one path element: lower case, letters,
// digits, '.', '_' and '-' kept, anything else '-'; "target" when empty.
func safeName(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(name)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	s := strings.Trim(b.String(), ".-")
	if s == "" {
		return "target"
	}
	return s
}

// drawSeed returns a random seed that prints the same as int64 and uint64.
func drawSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return binary.LittleEndian.Uint64(b[:]) >> 1
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runFuzzSim is `baton fuzz --sim`: the property against a fresh
// simulator target per check (shared-directory backend, shutdown drawn).
func runFuzzSim(out io.Writer, f fuzzFlags) error {
	if f.configPath != "" {
		return exitError{ExitUsage, "--sim and --config exclude each other"}
	}
	m, err := sim.ParseMutant(f.mutant)
	if err != nil {
		return exitError{ExitUsage, err.Error()}
	}
	stateDir := f.stateDir
	if stateDir == "" {
		stateDir = filepath.Join(fuzzStateRoot, "simulator")
	}
	base := "baton fuzz --sim"
	if m != sim.MutantNone {
		base += " --mutant " + string(m)
	}
	if f.stateDir != "" {
		base += " --state-dir " + shellQuote(f.stateDir)
	}
	repro := func(failFile string, seed uint64) string {
		if failFile != "" {
			return base + " --replay " + shellQuote(failFile)
		}
		return base + fmt.Sprintf(" --checks %d --seed %d", f.checks, f.seed)
	}
	opts := props.RunOptions{
		Name: fuzzPropertyName + "-sim", Checks: f.checks, Steps: f.steps, Seed: f.seed,
		FailFile: f.failFile, NoFailFile: f.noFailFile, ShrinkTime: f.shrinkTime, StateDir: stateDir,
		Reproduce: repro,
	}
	if f.progress != nil {
		opts.Progress = f.progress
	}
	if f.verbose {
		opts.Out = out
	}
	if opts.Seed == 0 {
		opts.Seed = drawSeed()
	}
	f.seed = opts.Seed // the reproduce command names the base seed: each check's world is numbered from 1
	fmt.Fprintf(out, "SEED=%d\ntarget=simulator\nchecks=%d\nsteps=%d\nstate_dir=%s\n", opts.Seed, f.checks, f.steps, stateDir)
	if m != sim.MutantNone {
		fmt.Fprintf(out, "MUTANT=%s\n", m)
	}
	world := uint64(0)
	mk := func() (target.Target, func() error, error) {
		world++
		tg, err := simtarget.New(simtarget.Options{Seed: world, Driver: sim.DriverConfig{Backend: sim.BackendSharedDir, Mutant: m, Unchecked: m != sim.MutantNone}})
		if err != nil {
			return nil, nil, err
		}
		return tg, func() error {
			if msg := tg.CheckHistory(); msg != "" {
				return fmt.Errorf("history check: %s", msg)
			}
			return nil
		}, nil
	}
	rep := props.Run(props.Handoff(mk, props.Config{Shutdown: true}), opts)
	if rep.Passed {
		fmt.Fprintf(out, "PASSED (%d checks, %v)\n", f.checks, rep.Elapsed.Round(time.Millisecond))
		return nil
	}
	if !f.verbose {
		fmt.Fprint(out, rep.Output)
	}
	return exitError{ExitFailed, fmt.Sprintf("FAILED (shrunk to %d actions, %v); reproduce with: %s", rep.Actions, rep.Elapsed.Round(time.Millisecond), repro(rep.FailFile, rep.Seed))}
}
