package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/baton-dev/baton/sim"
	"github.com/spf13/cobra"
)

// simExecutorCommand is `baton sim executor`: the simulator of the
// in-engine encoder -> decoder handoff around the real executor core.
func simExecutorCommand() *cobra.Command {
	var seed uint64
	var seeds, mutation string
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

--mutation breaks one decision of the core or of the world's driver (` + strings.Join(executorMutationNames(), ", ") + `)
to show the checkers find it.

Exit codes: 0 passed; 1 a checker failed; 3 bad flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var m sim.ExecutorMutation
			if mutation != "" {
				var ok bool
				if m, ok = sim.ExecutorMutations()[mutation]; !ok {
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
			if from == to {
				r := sim.RunExecutorSeed(from, m)
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
			failures, ran := sim.ExploreExecutor(from, to, m)
			for _, f := range failures {
				fmt.Fprintf(out, "FAILED seed %d (%s): %v\n  replay: %s\n", f.Seed, f.Settings, f.Err, f.ReplayCommand(mutation))
			}
			fmt.Fprintf(out, "executor seeds %d..%d: %d run, %d failed\n", from, to, ran, len(failures))
			if len(failures) > 0 {
				return exitError{ExitFailed, ""}
			}
			return nil
		},
	}
	cmd.Flags().Uint64Var(&seed, "seed", 0, "run one seed")
	cmd.Flags().StringVar(&seeds, "seeds", "", "run a range of seeds, A..B (inclusive)")
	cmd.Flags().StringVar(&mutation, "mutation", "", "break one decision of the executor core or of the world's driver")
	return cmd
}

func executorMutationNames() []string {
	var names []string
	for n := range sim.ExecutorMutations() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
