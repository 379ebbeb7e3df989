package main

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"

	"github.com/baton-dev/baton/reports"
	"github.com/baton-dev/baton/sim"
	"github.com/spf13/cobra"
)

// simFlags are the flags of `baton sim`.
type simFlags struct {
	seed         uint64
	seeds        string
	jobs         int
	verbose      bool
	traceDir     string
	mutant       string
	progressMode string
	sweep        sweepFlags
}

func simCommand() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run the deterministic fault-injecting simulator of the handoff lifecycle (one seed or a range)",
		Long: `Run baton's deterministic simulator: one producer E and 1..3 consumers (PD;
for one seed in four P nodes and D nodes: E+P+D) driving the real
engine/handoff core and the real shared-directory code over an in-memory
disk (sim/simfs), or the transfer backend, with BUGGIFY-style faults (each site enabled per run with
probability 0.25, firing per hit with 0.25), a safety phase with faults and a
liveness phase with faults healed.

  baton sim --seed N            one run: prints SEED=N and every drawn setting,
                                one line per step with -v, and ends with
                                'PASSED (N ticks)' or the exact replay command
  baton sim --seeds A..B -j J   explore a range on J goroutines; prints a
                                summary and each failing seed; with
                                --trace-dir each failing seed's JSONL trace
  baton sim replay TRACE        re-run a trace (its first line holds the seed,
                                the mutant and the settings)

A range can be split over machines: --shard i/n runs shard i of n
(0-based; contiguous blocks: shard i of the N seeds A..B runs
A+floor(i*N/n) .. A+floor((i+1)*N/n)-1, so the shards' union is exactly
A..B), or, in a pod of a Kubernetes Indexed Job, the index comes from
JOB_COMPLETION_INDEX and the count from --shards or BATON_SHARDS.
--results FILE writes the shard's JSON result; 'baton report merge'
adds the shards' results up into one verdict.

Every range counts its coverage: how often each fault site fired, at which
lifecycle point (the step the world was taking), and how often each
"sometimes" state was reached (the range's output prints them all with
their rules: replies lost after a WRITE landed, WRITEs landing after the
consumer gave up or refused after its revocation, cancellations
mid-transfer, crashes with a receive in flight, Shutdown with a handoff in
flight, claims racing an expiry, cleanup failures during drain, removals,
claims and crashes inside shareddir.Claim, quarantines ended by their Q-6
proof). A range of at least 10,000
seeds fails unless every site fired and every state was reached. One
passing seed in 100 (chosen by a hash of the seed, so shards agree) is run
twice and its two traces compared byte for byte.

--store DIR records each failing seed (commit, mutant, settings, trace)
under DIR/<commit>/; --replay-store DIR re-runs every stored seed before
the range (a regression gate). The layout is in sim/world/store.go and README.

Without --seed or --seeds a random seed is drawn (and printed).
--mutant injects one broken decision, to check that the checkers catch it:
each sets the same switch the engine's conformance mutant sets (in the
lifecycle core, handoff.Mutants, the executor's core, or in shareddir,
contenthash, lm; conformance/rules.yaml, sim_kind), except
lock-across-transfer, the self-test of the simulator's Q-5 checker: ` + mutantNames() + `.

Exit codes: 0 passed; 1 correctness failure (a safety checker, its FAIL line
naming the rule: the lifecycle rules SU-1..SU-6, Q-1..Q-6, C-2..C-4, C-6,
C-7, X-1, X-2, S-1, S-2, S-4, L-1, L-2, L-4, L-5, N-1, N-2, SE-4, core
invariants, and the media model's L-3, H-1, H-3, H-4, B-2; or the end-of-run history check: the client-visible
publish/consume/release operations must be linearizable per reference,
porcupine, whose HTML visualization goes to --trace-dir as
seed-N.history.html; then the end-of-run H-2 and H-5 answer checks); 2 liveness failure (no
convergence within the tick budget after faults healed); 3 bad flags (as
every baton command); 5 crash (a panic in the world). ` + sweepExitHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := sim.ParseMutant(f.mutant)
			if err != nil {
				return exitError{ExitUsage, err.Error()}
			}
			out := cmd.OutOrStdout()
			if f.seeds != "" {
				if cmd.Flags().Changed("seed") {
					return exitError{ExitUsage, "--seed and --seeds exclude each other"}
				}
				from, to, err := parseSeedRange(f.seeds)
				if err != nil {
					return exitError{ExitUsage, err.Error()}
				}
				return simRange(cmd, out, from, to, m, f)
			}
			seed := f.seed
			if !cmd.Flags().Changed("seed") {
				var b [8]byte
				_, _ = rand.Read(b[:])
				seed = binary.LittleEndian.Uint64(b[:]) >> 1
			}
			return simOne(out, seed, sim.DrawSettings(seed), m, f)
		},
	}
	cmd.Flags().Uint64Var(&f.seed, "seed", 0, "the seed of one run")
	cmd.Flags().StringVar(&f.seeds, "seeds", "", "a seed range A..B (inclusive) to explore")
	cmd.Flags().IntVarP(&f.jobs, "jobs", "j", 2, "runs in parallel when exploring a range")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "one status line per step")
	cmd.Flags().StringVar(&f.traceDir, "trace-dir", "", "write each failing seed's JSONL trace here (seed-N.jsonl)")
	cmd.Flags().StringVar(&f.mutant, "mutant", "", "inject one broken decision (the engine's mutant's switch): "+mutantNames())
	addProgressFlag(cmd, &f.progressMode)
	addSweepFlags(cmd, &f.sweep, true)
	cmd.AddCommand(simReplayCommand())
	cmd.AddCommand(simExecutorCommand())
	return cmd
}

func simReplayCommand() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "replay TRACE",
		Short: "Re-run a simulator trace from the seed, mutant and settings on its first line",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := sim.ReadTraceFile(args[0])
			if err != nil {
				return exitError{ExitUsage, err.Error()}
			}
			return simOne(cmd.OutOrStdout(), h.Seed, h.Settings, h.Mutant, f)
		},
	}
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "one status line per step")
	cmd.Flags().StringVar(&f.traceDir, "trace-dir", "", "write the re-run's JSONL trace here if it fails")
	return cmd
}

func mutantNames() string {
	names := make([]string, 0, len(sim.Mutants))
	for m, rule := range sim.Mutants {
		names = append(names, string(m)+" ("+rule+")")
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// simOne runs one seed and prints the VOPR-shaped header, steps and verdict.
func simOne(out io.Writer, seed uint64, s sim.Settings, m sim.Mutant, f simFlags) error {
	fmt.Fprintf(out, "SEED=%d\n", seed)
	if m != sim.MutantNone {
		fmt.Fprintf(out, "MUTANT=%s\n", m)
	}
	for _, l := range s.Lines() {
		fmt.Fprintln(out, l)
	}
	opts := sim.Options{Mutant: m}
	if f.verbose {
		opts.Verbose = out
	}
	r := sim.Run(seed, s, opts)
	if r.Verdict == sim.Passed {
		fmt.Fprintf(out, "PASSED (%d ticks)\n", r.Ticks)
		return nil
	}
	fmt.Fprintf(out, "%s (%d ticks, %d events): %s\n", r.Verdict, r.Ticks, r.Events, r.Failure)
	if f.traceDir != "" {
		if path, err := sim.WriteTrace(f.traceDir, r); err != nil {
			fmt.Fprintf(out, "trace: %v\n", err)
		} else {
			fmt.Fprintf(out, "trace: %s (replay: baton sim replay %s)\n", path, path)
		}
		writeHistoryHTML(out, f.traceDir, r, "")
	}
	fmt.Fprintf(out, "replay: %s\n", r.ReplayCommand())
	return exitError{simExit(r.Verdict), ""}
}

// simRange explores this shard's part of seeds from..to (first the seed
// store's seeds, with --replay-store) and prints the summary, each failing
// seed and the coverage table.
func simRange(cmd *cobra.Command, out io.Writer, from, to uint64, m sim.Mutant, f simFlags) error {
	defer sweepGC()()
	sh, err := f.sweep.resolveShard()
	if err != nil {
		return err
	}
	store, err := openSeedStore(f.sweep)
	if err != nil {
		return err
	}
	res, a, b, ok := newSweepResult(reports.SweepWorldHandoff, from, to, sh, string(m))
	if f.sweep.replayStore != "" {
		if res.StoreReplay, err = replayStore(out, f.sweep.replayStore, sh, m, store, f.traceDir); err != nil {
			return err
		}
	}
	if !ok {
		a, b = 1, 0 // an empty block: run nothing
	}
	prog, err := newProgress(cmd, f.progressMode, "seeds")
	if err != nil {
		return err
	}
	if ok {
		prog.Start(int(b - a + 1))
	} else {
		prog.Start(0)
	}
	sum := sim.Sweep(sim.SweepConfig{From: a, To: b, Jobs: f.jobs, Mutant: m, OnFailure: store.record, Progress: func(r sim.Result) {
		outcome := "passed"
		if r.Verdict != sim.Passed {
			outcome = "failed"
		}
		prog.Done(strconv.FormatUint(r.Seed, 10), outcome)
	}})
	prog.Finish()
	res.Runs, res.Events, res.Ticks = int64(sum.Runs), sum.Events, sum.Ticks
	for v, n := range sum.ByVerdict {
		res.Verdicts[sim.VerdictName(v)] += int64(n)
	}
	for _, r := range sum.Failures {
		fail := sweepFailure(r)
		fail.Trace = store.tracePath(r.Seed)
		if f.traceDir != "" {
			if path, err := sim.WriteTrace(f.traceDir, r); err != nil {
				fmt.Fprintf(out, "trace of seed %d: %v\n", r.Seed, err)
			} else {
				fail.Trace = path
			}
			writeHistoryHTML(out, f.traceDir, r, "")
		}
		res.Failures = append(res.Failures, fail)
	}
	res.FailuresOmitted = int64(sum.FailuresOmitted)
	res.Determinism.Sampled, res.Determinism.Diverged = int64(sum.Sampled), int64(sum.Diverged)
	if err := keepDivergences(&res, sum.Divergences, f.traceDir); err != nil {
		fmt.Fprintf(out, "divergence traces: %v\n", err)
	}
	res.Coverage = coverageResult(sum.Coverage)
	if store != nil && store.err != nil {
		fmt.Fprintf(out, "store %s: %v\n", f.sweep.store, store.err)
	}
	return finishSweep(out, res, f.sweep)
}

// keepDivergences writes each divergent seed's two traces to dir (a new
// temporary directory when dir is "") and lists them in res.
func keepDivergences(res *reports.SweepResult, ds []sim.Divergence, dir string) error {
	if len(ds) == 0 {
		return nil
	}
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "baton-sim-divergence-"); err != nil {
			return err
		}
	}
	for _, d := range ds {
		paths, err := sim.WriteDivergence(dir, d)
		if err != nil {
			return err
		}
		res.Determinism.Divergences = append(res.Determinism.Divergences, reports.SweepDivergence{Seed: d.Seed, Traces: paths[:]})
	}
	return nil
}

// writeHistoryHTML writes porcupine's visualization of r's history to dir
// when the history check is what failed.
func writeHistoryHTML(out io.Writer, dir string, r sim.Result, indent string) {
	if r.Rule != "history" {
		return
	}
	if path, err := sim.WriteHistory(dir, r, sim.Options{}); err != nil {
		fmt.Fprintf(out, "%shistory: %v\n", indent, err)
	} else if path != "" {
		fmt.Fprintf(out, "%shistory: %s (porcupine's visualization)\n", indent, path)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// parseSeedRange parses "A..B" (A <= B). Errors: anything else.
func parseSeedRange(s string) (uint64, uint64, error) {
	a, b, ok := strings.Cut(s, "..")
	if !ok {
		return 0, 0, fmt.Errorf("--seeds %q: want A..B", s)
	}
	from, err1 := strconv.ParseUint(a, 10, 64)
	to, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil || to < from {
		return 0, 0, fmt.Errorf("--seeds %q: want A..B with 0 <= A <= B", s)
	}
	if to-from >= 1<<31 {
		return 0, 0, fmt.Errorf("--seeds %q: at most 2^31 seeds at once", s)
	}
	return from, to, nil
}

// ExitSimCrash is `baton sim`'s exit code for a panic in the simulated world
// (3 is every command's code for bad flags).
const ExitSimCrash = 5

// simExit maps a verdict to the exit code.
func simExit(v sim.Verdict) int {
	if v == sim.Crash {
		return ExitSimCrash
	}
	return int(v)
}

// sweepGC raises the garbage collector's target for a seed sweep unless
// GOGC is set, and returns the undo. A run's live heap is a few MB and a
// sweep allocates steadily, so at the default GOGC=100 the collector runs
// about a hundred times a second and costs about a quarter of the sweep's
// CPU (issue #16: 10,000 seeds no slower than before the shared disk);
// GOGC=400 takes most of that back for about 20 MB more memory.
func sweepGC() (undo func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(400)
	return func() { debug.SetGCPercent(old) }
}
