package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/baton-dev/baton/reports"
	"github.com/baton-dev/baton/sim"
	"github.com/spf13/cobra"
)

// mergeFlags are the flags of `baton report merge`.
type mergeFlags struct {
	out            string
	allowUnstamped bool
}

func reportMergeCommand() *cobra.Command {
	var f mergeFlags
	cmd := &cobra.Command{
		Use:   "merge DIR|FILE...",
		Short: "Merge the shards' sweep results (baton sim --results) into one summary and verdict",
		Long: `Read the sweep results the shards of one 'baton sim' (or 'baton sim
executor') range wrote with --results: each argument is a result file or a
directory whose *.json files (not recursively) are results. Every shard
0..n-1 must be there exactly once, all run on one commit, with one world,
mutant, range and shard count, and their seed blocks must tile the range;
otherwise each missing or duplicate shard, each result from another commit
and each other mismatch is named and the exit code is 3.

A result of an unstamped build says commit 'unknown' (no commit stamped by
'make build' or the Dockerfile's COMMIT, and no git checkout for 'go
build' to read): two such builds cannot be told apart, so their shards are
refused (exit 3, each named) unless --allow-unstamped is given, for a
sweep whose shards you know ran one binary.

A handoff result must carry its coverage (one without is named, exit 3),
and the gate judges every fault site and sometimes state of this baton's
simulator: one that no shard's file names counts as never reached.

The merge adds the verdict counts, events, failing seeds (the lowest
1,000 listed, with their replay commands), the store replays, the
determinism samples and the coverage counts up, then judges the merged
sweep as one: the coverage gate applies to the merged seed count. It
prints the summary and the coverage table; --out writes the merged result.

Exit codes: the merged sweep's verdict as 'baton sim' gives it for a range
(0 passed, 1 correctness, 2 liveness, 5 crash, 6 nondeterministic, 7
coverage); 3 a result missing, unreadable, without coverage, from another
commit or (without --allow-unstamped) from an unstamped build.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReportMerge(cmd.OutOrStdout(), args, f)
		},
	}
	cmd.Flags().StringVarP(&f.out, "out", "o", "", "write the merged sweep result here (JSON)")
	cmd.Flags().BoolVar(&f.allowUnstamped, "allow-unstamped", false, "merge shards whose commit is '"+reports.UnstampedCommit+"' (an unstamped build: the merge cannot tell two such builds apart)")
	return cmd
}

// runReportMerge is `baton report merge` after flag parsing.
func runReportMerge(out io.Writer, args []string, f mergeFlags) error {
	outPath := f.out
	paths, err := sweepResultPaths(args)
	if err != nil {
		return exitError{ExitUsage, err.Error()}
	}
	var in []reports.NamedSweep
	var bad []string
	for _, p := range paths {
		if outPath != "" && sameFile(p, outPath) {
			continue // an earlier merge's output in the same directory
		}
		r, err := reports.ReadSweep(p)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		in = append(in, reports.NamedSweep{Name: p, Result: r})
	}
	if len(bad) > 0 {
		return exitError{ExitUsage, "unreadable sweep results:\n  " + strings.Join(bad, "\n  ")}
	}
	merged, err := reports.MergeSweeps(in, reports.MergeOptions{Keep: sim.DefaultKeepFailures, Targets: coverageTargets(), AllowUnstamped: f.allowUnstamped})
	var me *reports.MergeError
	if errors.As(err, &me) {
		return exitError{ExitUsage, fmt.Sprintf("cannot merge %d sweep results:\n  %s", len(in), strings.Join(me.Problems, "\n  "))}
	}
	if err != nil {
		return exitError{ExitUsage, err.Error()}
	}
	return finishSweep(out, merged, sweepFlags{results: outPath})
}

// sweepResultPaths expands directories into their *.json files (sorted).
func sweepResultPaths(args []string) ([]string, error) {
	var paths []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			paths = append(paths, a)
			continue
		}
		m, err := filepath.Glob(filepath.Join(a, "*.json"))
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("%s: no *.json sweep results in the directory", a)
		}
		sort.Strings(m)
		paths = append(paths, m...)
	}
	return paths, nil
}

// sameFile reports whether a and b name one existing file.
func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
