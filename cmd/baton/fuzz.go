package main

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/baton-dev/baton/conformance/props"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/conformance/target/simtarget"
	"github.com/baton-dev/baton/sim"
	"github.com/spf13/cobra"
)

// fuzzFlags are the flags of `baton fuzz`.
type fuzzFlags struct {
	configPath string
	checks     int
	steps      int
	seed       uint64
	failFile   string
	noFailFile bool
	shrinkTime time.Duration
	verbose    bool
	sim        bool
	mutant     string
}

// fuzzPropertyName names the property's fail files:
// testdata/rapid/<fuzzPropertyName>/ under the working directory.
const fuzzPropertyName = "baton-fuzz-handoff"

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

It prints SEED=N and the settings first. A failure is shrunk to a short
sequence, printed, and saved as a fail file under
testdata/rapid/` + fuzzPropertyName + `/ in the working directory; every fail
file kept there is replayed before new checks. The last line is PASSED (N
checks, T) or the command that reproduces the failure.

With --sim instead of --config the property runs against the simulator
behind the Target interface (conformance/target/simtarget): a fresh
fault-free world per check, shutdown drawn too, thousands of checks a
second; --mutant injects one of the simulator's driver mutants (its own
checkers then stay off, so the property alone must find it).

Exit codes: 0 passed; 1 a check failed; 3 bad flags or configuration.

` + target.EnvHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			warnUnknownBatonVariables()
			if skip, err := applyFuzzShard(cmd.OutOrStdout(), shard, &f); skip || err != nil {
				return err
			}
			return runFuzzCommand(cmd.OutOrStdout(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.configPath, "config", "", "target profile (YAML), as for 'baton check' (env BATON_CONFIG)")
	fl.IntVar(&f.checks, "checks", 30, "number of checks (rapid -rapid.checks)")
	fl.IntVar(&f.steps, "steps", 15, "average number of actions per check (rapid -rapid.steps)")
	fl.Uint64Var(&f.seed, "seed", 0, "rapid's base seed (0 draws one; printed either way)")
	fl.StringVar(&f.failFile, "failfile", "", "replay this fail file only")
	fl.BoolVar(&f.noFailFile, "no-failfile", false, "write no fail file on failure")
	fl.DurationVar(&f.shrinkTime, "shrink-time", 30*time.Second, "bound on shrinking a failure")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "print rapid's log as it runs")
	fl.BoolVar(&f.sim, "sim", false, "run against the simulator target instead of --config")
	fl.StringVar(&f.mutant, "mutant", "", "with --sim: inject a simulator driver mutant: "+mutantNames())
	addFuzzShardFlags(cmd, &shard)
	return cmd
}

// rapidSeedRE finds the seed rapid prints for reproducing one check.
var rapidSeedRE = regexp.MustCompile(`-rapid\.seed=(\d+)`)

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
	tg, err := target.Dial(cfg)
	if err != nil {
		return exitError{ExitUsage, err.Error()}
	}
	defer tg.Close()
	opts := props.RunOptions{
		Name: fuzzPropertyName, Checks: f.checks, Steps: f.steps, Seed: f.seed,
		FailFile: f.failFile, NoFailFile: f.noFailFile, ShrinkTime: f.shrinkTime,
	}
	if f.verbose {
		opts.Out = out
	}
	if opts.Seed == 0 {
		opts.Seed = drawSeed()
	}
	fmt.Fprintf(out, "SEED=%d\n", opts.Seed)
	fmt.Fprintf(out, "target=%s\nchecks=%d\nsteps=%d\nobservables=%v\nreference_format=%q\n", cfg.Name, f.checks, f.steps, cfg.Observables, cfg.ReferenceFormat)
	rep := props.Run(props.Handoff(props.Shared(tg), props.Config{CallTimeout: cfg.CaseTimeout}), opts)
	if rep.Passed {
		fmt.Fprintf(out, "PASSED (%d checks, %v)\n", f.checks, rep.Elapsed.Round(time.Millisecond))
		return nil
	}
	if !f.verbose {
		fmt.Fprint(out, rep.Output)
	}
	repro := "baton fuzz --config " + shellQuote(f.configPath)
	switch {
	case rep.FailFile != "":
		repro += " --failfile " + shellQuote(rep.FailFile)
	default:
		if m := rapidSeedRE.FindStringSubmatch(rep.Output); m != nil {
			repro += " --checks 1 --seed " + m[1]
		} else {
			repro += fmt.Sprintf(" --seed %d", rep.Seed)
		}
	}
	return exitError{ExitFailed, fmt.Sprintf("FAILED (shrunk to %d actions, %v); reproduce with: %s", rep.Actions, rep.Elapsed.Round(time.Millisecond), repro)}
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
	opts := props.RunOptions{
		Name: fuzzPropertyName + "-sim", Checks: f.checks, Steps: f.steps, Seed: f.seed,
		FailFile: f.failFile, NoFailFile: f.noFailFile, ShrinkTime: f.shrinkTime,
	}
	if f.verbose {
		opts.Out = out
	}
	if opts.Seed == 0 {
		opts.Seed = drawSeed()
	}
	fmt.Fprintf(out, "SEED=%d\ntarget=simulator\nchecks=%d\nsteps=%d\n", opts.Seed, f.checks, f.steps)
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
	repro := "baton fuzz --sim"
	if m != sim.MutantNone {
		repro += " --mutant " + string(m)
	}
	if rep.FailFile != "" {
		repro += " --failfile " + shellQuote(rep.FailFile)
	} else {
		repro += fmt.Sprintf(" --checks %d --seed %d", f.checks, rep.Seed)
	}
	return exitError{ExitFailed, fmt.Sprintf("FAILED (shrunk to %d actions, %v); reproduce with: %s", rep.Actions, rep.Elapsed.Round(time.Millisecond), repro)}
}
