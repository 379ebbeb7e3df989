package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/baton-dev/baton/reports"
	"github.com/spf13/cobra"
)

func reportMatrixCommand() *cobra.Command {
	var jsonOut string
	cmd := &cobra.Command{
		Use:   "matrix RUN...",
		Short: "The cross-implementation matrix: producer implementation x consumer implementation -> verdict per rule",
		Long: `Read the results of several 'baton check' runs, each a report directory
(results.json, else results.yaml) or a results file, and print the
cross-implementation matrix in the manner of gRPC's interop matrix: one
column per producer x consumer pair (named by the engine names the runs
recorded for their producer and consumer endpoints, GetServerInfo), one row
per rule, then the reason of every cell that is not PASS.

In a mixed pair the baseline is the consumer implementation's aggregated
engine; the cases that compare answers with it (the B rules, H-4, H-5) are
not applicable when producer and consumer run different models or presets,
and every handoff rule (SU, L, N, S, H-3) runs on every pair.

Exit codes: the worst run's, as 'baton check' (0 every rule passed or is not
applicable; 1 a rule failed; 2 error or not verifiable); 3 a run cannot be
read, records no engine identities, or two runs are the same pair.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReportMatrix(cmd.OutOrStdout(), args, jsonOut)
		},
	}
	cmd.Flags().StringVar(&jsonOut, "json", "", "also write the matrix as JSON to this file")
	return cmd
}

// runReportMatrix prints the matrix of the runs at paths (and writes it as
// JSON to jsonOut unless ""); the error carries the worst run's exit code.
func runReportMatrix(out io.Writer, paths []string, jsonOut string) error {
	var runs []reports.Results
	for _, a := range paths {
		res, err := readRunResults(a)
		if err != nil {
			return exitError{ExitUsage, err.Error()}
		}
		runs = append(runs, res)
	}
	m, err := reports.MatrixFromResults(runs, paths)
	if err != nil {
		return exitError{ExitUsage, err.Error()}
	}
	if err := m.WriteText(out); err != nil {
		return err
	}
	if jsonOut != "" {
		b, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
			return exitError{ExitUsage, err.Error()}
		}
	}
	worst := 0
	for _, r := range runs {
		worst = max(worst, reports.ExitCode(r))
	}
	if worst != 0 {
		return exitError{worst, fmt.Sprintf("matrix verdict: %s", m.Verdict)}
	}
	return nil
}

// readRunResults reads one run's results: path is a results file
// (.json, .yaml, .yml) or a report directory holding results.json or
// results.yaml.
func readRunResults(path string) (reports.Results, error) {
	if st, err := os.Stat(path); err != nil {
		return reports.Results{}, err
	} else if st.IsDir() {
		for _, name := range []string{"results.json", reports.ResultsYAMLFile} {
			if _, err := os.Stat(filepath.Join(path, name)); err == nil {
				return readRunResults(filepath.Join(path, name))
			}
		}
		return reports.Results{}, fmt.Errorf("%s: no results.json or %s (a baton check report directory?)", path, reports.ResultsYAMLFile)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		return reports.ReadYAML(path)
	case ".json":
		return reports.ReadJSON(path)
	}
	return reports.Results{}, fmt.Errorf("%s: not a results file (.json, .yaml)", path)
}
