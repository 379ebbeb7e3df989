package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/baton-dev/baton/conformance/check"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/spf13/cobra"
)

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print baton's version, commit and the wire profile it certifies",
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "baton %s (commit %s), profile baton.encoder.v1, spec revision %s\n", check.BatonVersion(), check.BatonCommit(), check.SpecRevision)
			return nil
		},
	}
}

// otherBatonVariables are BATON_* variables that are not profile keys.
var otherBatonVariables = map[string]bool{
	"BATON_CONFIG": true, "BATON_PROGRESS": true, "BATON_GPU_REQUIRED": true,
	"BATON_PROTO_TOOLS": true, "BATON_PROTO_COMPILER": true, "BATON_SHARDS": true,
}

// warnUnknownBatonVariables names BATON_* variables that set nothing, so a
// misspelt override does not pass silently (unknown file keys are errors).
func warnUnknownBatonVariables() {
	known := map[string]bool{}
	for _, ev := range target.EnvVars() {
		known[ev.Name] = true
	}
	var unknown []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "BATON_") && !known[name] && !otherBatonVariables[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, n := range unknown {
		fmt.Fprintf(os.Stderr, "baton: warning: %s is not a BATON_* profile variable and is ignored (see baton check --help)\n", n)
	}
}
