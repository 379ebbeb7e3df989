package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/baton-dev/baton/reports"
	"github.com/baton-dev/baton/sim/executorworld"
	"github.com/spf13/cobra"
)

// simExecutorCommand is `baton sim executor`: the simulator of the
// in-engine encoder -> decoder handoff around the real executor core.
func simExecutorCommand() *cobra.Command {
	var seed uint64
	var seeds, mutation, traceDir string
	var sweep sweepFlags
	cmd := &cobra.Command{
		Use:   "executor",
		Short: "Simulate the in-engine encoder -> decoder handoff (batched encoder steps, cancellation at every step, preemption) around the real executor core",
		Long: `Run the executor world: requests arrive, encoder batches form in the real
engine/executor core, completions arrive asynchronously in an order the seed
chooses (some fail, C-6), each first context step consumes its output (R-1),
decode steps release again and again, requests are preempted and recomputed
(R-2) and clients cancel at every step boundary. 1 or 2 tensor-parallel
ranks must take identical decisions. After every step the core's invariants
are checked (C-3: no view outlives its request, storages freed with their
last view); at the end nothing may be left; and every request that finished
must produce exactly the tokens it produces in the same seed's run without
cancellations (C-2).

  baton sim executor --seed N           one seed: SEED=, settings, PASSED or the failure
  baton sim executor --seeds A..B       a range; prints each failing seed's replay command

A range takes --shard i/n (or JOB_COMPLETION_INDEX with --shards or
BATON_SHARDS) and --results FILE as 'baton sim' does; one passing seed in
100 is run twice and its outcomes (steps, tokens) compared; a divergence
keeps both outcomes as files (--trace-dir, else a temporary directory:
executor-seed-N.run1.txt and .run2.txt) and fails the range.

--mutation breaks one decision of the core or of the world's driver (` + strings.Join(executorMutationNames(), ", ") + `)
to show the checkers find it.

Exit codes: 0 passed; 1 a checker failed; 3 bad flags; 6 a sampled seed's
two runs differed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var m executorworld.Mutation
			if mutation != "" {
				var ok bool
				if m, ok = executorworld.Mutations()[mutation]; !ok {
					return exitError{ExitUsage, fmt.Sprintf("--mutation %q: want one of %s", mutation, strings.Join(executorMutationNames(), ", "))}
				}
			}
			out := cmd.OutOrStdout()
			from, to := seed, seed
			if seeds != "" {
				if cmd.Flags().Changed("seed") {
					return exitError{ExitUsage, "--seed and --seeds exclude each other"}
				}
				var err error
				if from, to, err = parseSeedRange(seeds); err != nil {
					return exitError{ExitUsage, err.Error()}
				}
			} else if !cmd.Flags().Changed("seed") {
				return exitError{ExitUsage, "give --seed N or --seeds A..B"}
			}
			if seeds == "" {
				r := executorworld.RunSeed(from, m)
				fmt.Fprintf(out, "SEED=%d\n%s\n", r.Seed, r.Settings)
				if mutation != "" {
					fmt.Fprintf(out, "mutation=%s (a seed with max_batch=1 or no cancellation cannot show a batch mutation; explore a range)\n", mutation)
				}
				if r.Err != nil {
					fmt.Fprintf(out, "FAILED after %d steps: %v\nreplay: %s\n", r.Steps, r.Err, r.ReplayCommand(mutation))
					return exitError{ExitFailed, ""}
				}
				fmt.Fprintf(out, "PASSED (%d steps)\n", r.Steps)
				return nil
			}
			return executorRange(out, from, to, m, mutation, traceDir, sweep)
		},
	}
	cmd.Flags().Uint64Var(&seed, "seed", 0, "run one seed")
	cmd.Flags().StringVar(&seeds, "seeds", "", "run a range of seeds, A..B (inclusive)")
	cmd.Flags().StringVar(&mutation, "mutation", "", "break one decision of the executor core or of the world's driver")
	cmd.Flags().StringVar(&traceDir, "trace-dir", "", "keep a divergent sampled seed's two outcomes here (executor-seed-N.run1.txt, .run2.txt; default: a new temporary directory)")
	addSweepFlags(cmd, &sweep, false)
	return cmd
}

func executorMutationNames() []string {
	var names []string
	for n := range executorworld.Mutations() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// executorRange sweeps this shard's part of from..to of the executor world.
func executorRange(out io.Writer, from, to uint64, m executorworld.Mutation, mutation, traceDir string, f sweepFlags) error {
	sh, err := f.resolveShard()
	if err != nil {
		return err
	}
	res, a, b, ok := newSweepResult(reports.SweepWorldExecutor, from, to, sh, mutation)
	if !ok {
		a, b = 1, 0
	}
	sum := executorworld.Sweep(a, b, m, nil)
	res.Runs, res.Events = int64(sum.Runs), sum.Steps
	res.Verdicts[reports.SweepPassed] = int64(sum.Runs - sum.Failed)
	if sum.Failed > 0 {
		res.Verdicts[reports.SweepCorrectness] = int64(sum.Failed)
	}
	for _, r := range sum.Failures {
		res.Failures = append(res.Failures, reports.SweepFailure{Seed: r.Seed, Verdict: reports.SweepCorrectness,
			Failure: fmt.Sprintf("%v (%s)", r.Err, r.Settings), Events: int64(r.Steps), Replay: r.ReplayCommand(mutation)})
	}
	res.FailuresOmitted = int64(sum.FailuresOmitted)
	res.Determinism.Sampled, res.Determinism.Diverged = int64(sum.Sampled), int64(sum.Diverged)
	if err := keepExecutorDivergences(&res, sum.Divergences, traceDir); err != nil {
		fmt.Fprintf(out, "divergence outcomes: %v\n", err)
	}
	return finishSweep(out, res, f)
}

// keepExecutorDivergences writes each divergent executor seed's two
// outcomes to dir (a new temporary directory when dir is "") and lists
// them in res, as keepDivergences does for the handoff world. A seed whose
// files could not be written is still listed (without files), so the
// divergence fails the range either way.
func keepExecutorDivergences(res *reports.SweepResult, ds []executorworld.Divergence, dir string) error {
	if len(ds) == 0 {
		return nil
	}
	var err error
	if dir == "" {
		dir, err = os.MkdirTemp("", "baton-sim-executor-divergence-")
	}
	for _, d := range ds {
		dv := reports.SweepDivergence{Seed: d.Seed}
		if err == nil {
			var paths [2]string
			if paths, err = executorworld.WriteDivergence(dir, d); err == nil {
				dv.Traces = paths[:]
			}
		}
		res.Determinism.Divergences = append(res.Determinism.Divergences, dv)
	}
	return err
}
