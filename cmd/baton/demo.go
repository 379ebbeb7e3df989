package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/baton-dev/baton/conformance/check"
	"github.com/baton-dev/baton/conformance/launch"
	"github.com/spf13/cobra"
)

func demoCommand() *cobra.Command {
	var (
		preset     string
		reportDir  string
		workDir    string
		quotaBytes int64
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start E, PD and an aggregated baseline, certify them on the fixture images, write the report, shut down",
		Long: `The main job on the embedded defaults: start the reference engine as three
processes on loopback ports (encoder E, consumer PD, aggregated baseline) with
a temporary shared cache directory, wait for Health READY, run the
conformance suite against them (real fixture images over gRPC), write
--report-dir, shut every process down through Shutdown (S-1), check that the
cache directory is empty (S-4), and exit with the verdict (codes as in
'baton check').`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			self, err := os.Executable()
			if err != nil {
				return exitError{ExitUsage, err.Error()}
			}
			if workDir == "" {
				workDir, err = os.MkdirTemp("", "baton-demo-")
				if err != nil {
					return exitError{ExitUsage, err.Error()}
				}
				defer os.RemoveAll(workDir)
			}
			fmt.Printf("baton demo: starting E, PD and aggregated (preset %s) in %s\n", preset, workDir)
			topo, err := launch.StartEPD(ctx, launch.Options{Binary: self, Preset: preset, WorkDir: workDir, ProducerQuotaBytes: quotaBytes})
			if err != nil {
				return exitError{ExitEngine, err.Error()}
			}
			cfg := topo.Config()
			fmt.Printf("baton demo: E %s, PD %s, baseline %s\n", topo.Producer.Address, topo.Consumer.Address, topo.Baseline.Address)
			code, checkErr := runCheck(ctx, cfg, check.Options{ReportDir: reportDir, Out: os.Stdout})
			shutErr := topo.Shutdown(ctx, 60*time.Second)
			abs, _ := filepath.Abs(reportDir)
			fmt.Printf("baton demo: report in %s\n", abs)
			switch {
			case checkErr != nil:
				return exitError{code, checkErr.Error()}
			case shutErr != nil:
				return exitError{ExitEngine, "S-4 shutdown: " + shutErr.Error()}
			case code != 0:
				return exitError{code, "some rules did not pass"}
			}
			fmt.Println("baton demo: all applicable rules passed; every process drained and exited 0; cache directory empty")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&preset, "preset", "base", "encoder preset for the engines")
	f.StringVar(&reportDir, "report-dir", "out/report", "where to write the report")
	f.Int64Var(&quotaBytes, "producer-quota-bytes", 32<<20, "the producer's L-5 bound (small, so the L-5 case reaches it in a few publishes)")
	f.StringVar(&workDir, "work-dir", "", "keep the cache directory and process logs here (default: a removed temp dir)")
	return cmd
}
