package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// addFuzzShardFlags registers `baton fuzz --shard i/n` and `--shards N`
// (JOB_COMPLETION_INDEX and BATON_SHARDS as for `baton sim`).
func addFuzzShardFlags(cmd *cobra.Command, f *sweepFlags) {
	cmd.Flags().StringVar(&f.shard, "shard", "", "run shard i of n (0-based) of the --checks checks: contiguous blocks as 'baton sim' splits seeds, rapid seed --seed+i; without it, JOB_COMPLETION_INDEX gives the index and --shards or BATON_SHARDS the count")
	cmd.Flags().IntVar(&f.shards, "shards", 0, "the shard count when the index comes from JOB_COMPLETION_INDEX (default: BATON_SHARDS)")
}

// applyFuzzShard narrows f to its shard: its block of checks 1..f.checks
// and, when --seed S was given, rapid's base seed S+i (so no two shards
// run the same checks; without --seed each shard draws its own). skip is
// true when the shard's block is empty (more shards than checks): it has
// nothing to run and passes.
func applyFuzzShard(out io.Writer, sf sweepFlags, f *fuzzFlags) (skip bool, err error) {
	sh, err := sf.resolveShard()
	if err != nil || sh.Whole() || f.checks < 1 {
		return false, err
	}
	a, b, ok := sh.Part(1, uint64(f.checks))
	if !ok {
		fmt.Fprintf(out, "shard %s: no checks (%d checks for %d shards)\nPASSED (0 checks)\n", sh, f.checks, sh.Count)
		return true, nil
	}
	total := f.checks
	f.checks = int(b - a + 1)
	if f.seed != 0 {
		f.seed += uint64(sh.Index)
	}
	fmt.Fprintf(out, "shard %s: checks %d..%d of %d\n", sh, a, b, total)
	return false, nil
}
