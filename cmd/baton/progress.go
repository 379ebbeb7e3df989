package main

import (
	"io"
	"os"

	"github.com/baton-dev/baton/internal/progress"
	"github.com/spf13/cobra"
)

// envProgress overrides the default of --progress (flag > env).
const envProgress = "BATON_PROGRESS"

// progressFlagHelp is the --progress flag's help text.
const progressFlagHelp = "progress display on stderr: auto (a bar on a terminal, plain lines every few seconds otherwise), bar, lines or off (env " + envProgress + ")"

// addProgressFlag registers --progress on cmd (for check, sim and fuzz);
// read it with newProgress.
func addProgressFlag(cmd *cobra.Command, mode *string) {
	cmd.Flags().StringVar(mode, "progress", "auto", progressFlagHelp)
}

// newProgress builds the progress reporter of a long run, counting unit
// ("cases", "seeds", "runs"), on stderr so stdout keeps only results. The
// mode is --progress when given, else BATON_PROGRESS, else auto.
// Errors: an unknown mode (exit 3).
func newProgress(cmd *cobra.Command, mode, unit string) (*progress.Reporter, error) {
	return newProgressOn(os.Stderr, cmd, mode, unit, os.LookupEnv)
}

func newProgressOn(w io.Writer, cmd *cobra.Command, mode, unit string, lookup func(string) (string, bool)) (*progress.Reporter, error) {
	if f := cmd.Flags().Lookup("progress"); f == nil || !f.Changed {
		if v, ok := lookup(envProgress); ok && v != "" {
			mode = v
		}
	}
	m, err := progress.ParseMode(mode)
	if err != nil {
		return nil, exitError{ExitUsage, err.Error()}
	}
	return progress.New(w, progress.Options{Mode: m, Unit: unit}), nil
}
