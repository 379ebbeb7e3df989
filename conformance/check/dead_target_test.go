package check

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/reports"
)

// Environment of the child process of TestRunRealSuiteDeadTarget.
const (
	envChildReportDir = "BATON_CHECK_CHILD_REPORT_DIR"
	envChildAddress   = "BATON_CHECK_CHILD_ADDRESS"
)

// deadTargetFilter runs the real suite's Core cases, not this package's
// self-test specs.
const deadTargetFilter = "level:core && !" + selfTestLabel

// TestRunRealSuiteDeadTarget runs the real conformance suite (Core) against
// a target whose every endpoint refuses connections, in a child process
// (Ginkgo runs once per process). Every case must end promptly, and no
// Core rule may pass: a dead target certifies nothing.
func TestRunRealSuiteDeadTarget(t *testing.T) {
	if os.Getenv(envChildReportDir) != "" {
		t.Skip("running as the child")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more: connection refused

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRunChildDeadTarget$", "-test.v")
	cmd.Env = append(os.Environ(), envChildReportDir+"="+dir, envChildAddress+"="+addr)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the suite did not finish against a dead target within 2 minutes:\n%s", out)
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	res, err := reports.ReadJSON(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatalf("%v\nchild output:\n%s", err, out)
	}
	if len(res.Rules) == 0 {
		t.Fatalf("no Core rules reported: %+v", res)
	}
	if len(res.Levels) != 0 || res.NoLevelVerdict != reports.NoLevelVerdictFiltered {
		t.Errorf("a filtered run gave level verdicts %v (no_level_verdict %q); want none, filtered", res.Levels, res.NoLevelVerdict)
	}
	for _, r := range res.Rules {
		if r.Level != "core" {
			t.Errorf("rule %s of level %q reported in a level:core run", r.Rule, r.Level)
		}
		if r.Outcome == reports.Passed {
			t.Errorf("rule %s passed against a dead target", r.Rule)
		}
		if r.Outcome == reports.Failed {
			t.Errorf("rule %s failed against a target that was down before the run; want error (the target did not answer wrongly): %s", r.Rule, r.Message)
		}
	}
	if code := reports.ExitCode(res); code == reports.ExitPassed {
		t.Errorf("ExitCode = %d against a dead target", code)
	}
}

// TestRunChildDeadTarget is the child of TestRunRealSuiteDeadTarget.
func TestRunChildDeadTarget(t *testing.T) {
	dir := os.Getenv(envChildReportDir)
	if dir == "" {
		t.Skip("only runs as the child of TestRunRealSuiteDeadTarget")
	}
	addr := os.Getenv(envChildAddress)
	tg, err := target.Dial(target.Config{
		Profile: target.Profile{Name: "dead", Topologies: []string{"E+PD"}, CaseTimeout: 10 * time.Second},
		Endpoints: map[target.Role]string{
			target.RoleProducer: addr, target.RoleConsumer: addr, target.RoleBaseline: addr,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	res, err := Run(context.Background(), tg, Options{LabelFilter: deadTargetFilter, ReportDir: dir, Out: os.Stdout})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("child verdict:", res.Verdict)
}
