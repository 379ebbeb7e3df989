package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestCaseTimeoutFlagBounded: --case-timeout has the profile's bounds
// (target.MinCaseTimeout..MaxCaseTimeout), in a dry run too. Before, the
// flag overrode the profile's value with no upper bound, so "--case-timeout
// 100000h" let a hung target keep a case running for ever (attack, stop
// 23). The run's context is cancelled: a correct check refuses the flag
// before it contacts anything.
func TestCaseTimeoutFlagBounded(t *testing.T) {
	t.Setenv("BATON_CONFIG", "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		timeout time.Duration
		dryRun  bool
		want    string
	}{
		{100000 * time.Hour, false, "longer than 1h0m0s"},
		{100000 * time.Hour, true, "longer than 1h0m0s"},
		{time.Millisecond, true, "shorter than 1s"},
	} {
		var out bytes.Buffer
		err := runCheckCommand(ctx, &out, checkFlags{configPath: profileFile(t, opaqueProfile), caseTimeout: tc.timeout, dryRun: tc.dryRun, reportDir: t.TempDir()}, "baton check")
		var ex exitError
		if !asExit(err, &ex) || ex.code != ExitUsage || !strings.Contains(ex.msg, tc.want) {
			t.Errorf("--case-timeout %v (dry run %v): err %v; want exit %d saying %q", tc.timeout, tc.dryRun, err, ExitUsage, tc.want)
		}
	}
}
