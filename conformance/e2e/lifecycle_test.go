package e2e

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/launch"
	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/target"
)

// TestLifecycleLevelAgainstProcesses runs every Lifecycle case (those that
// need the fault proxy belong to TestFaultsLevelTCP) against E+PD and the
// baseline as real processes with --test-hooks, through the live target
// (which restarts the instances X-1, S-2 and S-4 poison or stop): each
// passes.
func TestLifecycleLevelAgainstProcesses(t *testing.T) {
	runLifecycleLevel(t, nil)
}

// TestLifecycleLevelEncoderDecoderTP2 runs the same cases against engines
// with the encoder-decoder language side (cross-attention KV from the
// encoder output), two simulated tensor-parallel ranks of the executor and
// encoder steps inside the scheduling step: each passes, and no rank ever
// diverged from the other.
func TestLifecycleLevelEncoderDecoderTP2(t *testing.T) {
	runLifecycleLevel(t, []string{"--model-architecture", "encoder-decoder", "--tp", "2", "--executor-mode", "sync"})
}

func runLifecycleLevel(t *testing.T, serveArgs []string) {
	topo, err := launch.StartEPD(context.Background(), launch.Options{Binary: batonBinary, Preset: "tiny", WorkDir: t.TempDir(),
		TestHooks: true, Level: "lifecycle", ProducerQuotaBytes: 32 << 20, ServeArgs: serveArgs})
	if err != nil {
		t.Fatal(err)
	}
	live := topo.Target()
	ran := runExpectingPass(t, live, func(c suite.Case) bool {
		return c.Level == suite.LevelLifecycle && !c.ViaPrefill && !slices.Contains(c.Labels, suite.LabelNeedsFaultProxy)
	})
	if ran < 18 {
		t.Errorf("ran %d Lifecycle cases; want at least 18", ran)
	}
	for _, role := range []target.Role{target.RoleProducer, target.RoleConsumer, target.RoleBaseline} {
		e, ok := live.Engine(role)
		if !ok {
			continue
		}
		info, err := e.GetLoad(context.Background())
		if err != nil {
			continue // an instance a destructive case shut down
		}
		fields := info.GetAttributes().GetFields()
		if want := tensorParallel(serveArgs); fields["executor.tensor_parallel"].GetNumberValue() != want {
			t.Errorf("GetLoad(%s) executor.tensor_parallel = %v; want %v", role, fields["executor.tensor_parallel"].AsInterface(), want)
		}
		if d := fields["executor.tensor_parallel.diverged"].GetNumberValue(); d != 0 {
			t.Errorf("GetLoad(%s) executor.tensor_parallel.diverged = %v; want 0 (the ranks took different handoff decisions)", role, d)
		}
	}
	if err := topo.Shutdown(context.Background(), 60*time.Second); err != nil {
		t.Errorf("S-4 shutdown: %v", err)
	}
}

// tensorParallel is the --tp value in args (1 without one).
func tensorParallel(args []string) float64 {
	for i, a := range args {
		if a == "--tp" && i+1 < len(args) {
			n, _ := strconv.Atoi(args[i+1])
			return float64(n)
		}
	}
	return 1
}

// runExpectingPass runs every case that pick selects against live, in
// registry order, and reports (Errorf) each whose outcome is not passed; it
// returns how many ran.
func runExpectingPass(t *testing.T, live target.Target, pick func(suite.Case) bool) int {
	t.Helper()
	ran := 0
	for _, c := range suite.Cases() {
		if !pick(c) {
			continue
		}
		ran++
		start := time.Now()
		rec := runRecorded(c, live, 90*time.Second)
		if outcome := suite.OutcomeOf(rec.failed, rec.skipped, rec.messages...); outcome != suite.OutcomePassed {
			t.Errorf("%s = %s: %s; want passed", c.Name, outcome, rec)
		} else {
			t.Logf("%-4s %-15s %6.2fs  %s", c.Rule, outcome, time.Since(start).Seconds(), c.Name)
		}
	}
	return ran
}
