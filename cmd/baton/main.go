// Command baton is the conformance and simulation harness for the
// encoder -> consumer handoff of multimodal LLM serving, and its reference
// engine: `baton serve` runs an engine role, `baton check` certifies a target
// against the contract's rules, `baton demo` does both end to end on the
// embedded fixtures.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "baton",
		Short:         "Conformance harness and reference engine for the multimodal encoder handoff (baton.encoder.v1)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCommand(), checkCommand(), demoCommand(), reportCommand(), simCommand(), fuzzCommand(), versionCommand())
	if err := root.Execute(); err != nil {
		var ex exitError
		if asExit(err, &ex) {
			if ex.msg != "" {
				fmt.Fprintln(os.Stderr, "baton:", ex.msg)
			}
			os.Exit(ex.code)
		}
		fmt.Fprintln(os.Stderr, "baton:", err)
		os.Exit(ExitUsage)
	}
}

// Exit codes of every baton command.
const (
	// ExitPassed: every rule passed or was not applicable.
	ExitPassed = 0
	// ExitFailed: some rule failed.
	ExitFailed = 1
	// ExitIncomplete: no failure, but some case ended in error or not verifiable.
	ExitIncomplete = 2
	// ExitUsage: bad flags or configuration, or the target could not be probed.
	ExitUsage = 3
	// ExitEngine: `baton serve` could not start or did not drain cleanly (S-4).
	ExitEngine = 4
)

type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

func asExit(err error, out *exitError) bool {
	e, ok := err.(exitError)
	if ok {
		*out = e
	}
	return ok
}
