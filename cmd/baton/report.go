package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/baton-dev/baton/reports"
	"github.com/spf13/cobra"
)

// ExitRejected is `baton report verify`'s code for a bundle it rejects.
const ExitRejected = 1

func reportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Work with reports: verify a certification bundle, render report.html from results, merge sweep shards, the cross-implementation matrix",
	}
	cmd.AddCommand(reportVerifyCommand(), reportRenderCommand(), reportMergeCommand(), reportMatrixCommand())
	return cmd
}

func reportVerifyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "verify DIR",
		Short: "Re-check a certification bundle the way a submission bot does",
		Long: `Re-check the certification bundle in DIR (written by 'baton check --certify
--bundle DIR' or 'baton demo'):

  - complete: PRODUCT.yaml, README.md, results.yaml, junit.xml, report.html
    and SHA256SUMS are present;
  - unaltered: SHA256SUMS lists every other file and every hash matches;
  - supported: the bundle format and the results' spec revision are ones
    this baton reads;
  - certified: the certificate was issued, PRODUCT.yaml agrees with it, and
    every rule of the claimed level (and the levels below it) is present in
    results.yaml and passed (or is not applicable); junit.xml shows no
    failure or error.

Exit codes: 0 the bundle is accepted; 1 it is rejected (each problem is
printed, naming the file or the rule); 3 DIR cannot be read.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReportVerify(cmd.OutOrStdout(), args[0])
		},
	}
}

// runReportVerify verifies one bundle and prints the verdict.
func runReportVerify(out io.Writer, dir string) error {
	p, err := reports.VerifyBundle(dir, verifyOptions())
	var be *reports.BundleError
	switch {
	case errors.As(err, &be):
		return exitError{ExitRejected, fmt.Sprintf("bundle %s rejected:\n  %s", dir, strings.Join(be.Problems, "\n  "))}
	case err != nil:
		return exitError{ExitUsage, err.Error()}
	}
	impl := strings.TrimSpace(strings.Join([]string{p.Implementation.Vendor, p.Implementation.Product, p.Implementation.Version}, " "))
	if impl == "" {
		impl = p.Target
	}
	fmt.Fprintf(out, "bundle %s accepted: %s certified at level %s for topologies %s on backends %s (baton %s, %s, %s)\n",
		dir, impl, p.Level, strings.Join(p.Topologies, ", "), strings.Join(p.Backends, ", "), p.BatonVersion, p.SpecRevision, p.Date)
	return nil
}

func reportRenderCommand() *cobra.Command {
	var outPath string
	cmd := &cobra.Command{
		Use:   "render RESULTS",
		Short: "Render report.html from a results.json or results.yaml",
		Long: `Render the self-contained report.html (verdict banners, rule table with links
to the contract text, failures with transcripts and reproduce commands,
handoff latency plots) from a results file written by 'baton check'.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			read := reports.ReadJSON
			if ext := strings.ToLower(filepath.Ext(args[0])); ext == ".yaml" || ext == ".yml" {
				read = reports.ReadYAML
			}
			res, err := read(args[0])
			if err != nil {
				return exitError{ExitUsage, err.Error()}
			}
			if outPath == "" {
				outPath = filepath.Join(filepath.Dir(args[0]), reports.ReportHTMLFile)
			}
			if err := reports.WriteHTML(outPath, res); err != nil {
				return exitError{ExitUsage, err.Error()}
			}
			fmt.Fprintln(cmd.OutOrStdout(), outPath)
			return nil
		},
	}
	cmd.Flags().StringVarP(&outPath, "out", "o", "", "where to write the page (default: report.html beside RESULTS)")
	return cmd
}
