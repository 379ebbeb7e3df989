package check

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/conformance/target/inprocess"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"github.com/baton-dev/baton/reports"
	"github.com/onsi/ginkgo/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Environment of the children of TestCascadeIsolation.
const (
	envCascadeScenario  = "BATON_CHECK_CASCADE_SCENARIO"
	envCascadeReportDir = "BATON_CHECK_CASCADE_REPORT_DIR"
)

// cascadeFilter: a few quick Core rules of the real suite, in registry
// order SU-1, SU-2, SU-3, N-2; the trigger case is SU-2's first.
const cascadeFilter = "level:core && (SU-1 || SU-2 || SU-3 || N-2) && !slow && !" + selfTestLabel

// cascadeHangFilter: the hang scenario's cases, the trigger and one after.
const cascadeHangFilter = "level:core && (SU-2 || N-2) && !slow && !" + selfTestLabel

// cascadeTrigger is the case during which the flaky target misbehaves.
const cascadeTrigger = "SU-2 replay of a consumed reference is rejected before any write"

// TestCascadeIsolation runs the real suite (a few Core rules) against the
// in-process reference engine behind a wrapper that misbehaves during one
// case, each scenario in a child process (Ginkgo runs once per process):
//
//   - down: every engine answers UNAVAILABLE from the trigger case's first
//     publish on: that case's rule fails saying the target went down, every
//     later case is an error (never failed), the rules before pass, and the
//     exit code is 1 for that rule alone;
//   - recovers: the same, but the engines answer again once the harness's
//     probe after the case saw them down: the cases after run and pass;
//   - hang: the consumer never answers a Generate during the trigger case
//     (Health stays READY): the case times out and its rule fails; the
//     case after passes;
//   - health-hang: from the trigger case's first publish on, the
//     consumer's Health never answers, with a case timeout (2 s) shorter
//     than the harness's probe (ProbeTimeout): the trigger case's rule
//     fails (the target went down during it) and the case after is an
//     error, not failed: the probes before it do not count against its
//     timeout.
func TestCascadeIsolation(t *testing.T) {
	if os.Getenv(envCascadeScenario) != "" {
		t.Skip("running as the child")
	}
	for _, sc := range []struct {
		name     string
		want     map[string]reports.Outcome
		inFailed string // in the failed rule's message
	}{
		{"down", map[string]reports.Outcome{"SU-1": reports.Passed, "SU-2": reports.Failed, "SU-3": reports.Error, "N-2": reports.Error}, WentDownMessage},
		{"recovers", map[string]reports.Outcome{"SU-1": reports.Passed, "SU-2": reports.Failed, "SU-3": reports.Passed, "N-2": reports.Passed}, WentDownMessage},
		{"hang", map[string]reports.Outcome{"SU-2": reports.Failed, "N-2": reports.Passed}, "timeout"},
		{"health-hang", map[string]reports.Outcome{"SU-2": reports.Failed, "N-2": reports.Error}, WentDownMessage},
	} {
		t.Run(sc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRunChildCascade$", "-test.v")
			cmd.Env = append(os.Environ(), envCascadeScenario+"="+sc.name, envCascadeReportDir+"="+dir)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			res, err := reports.ReadJSON(filepath.Join(dir, ResultsFile))
			if err != nil {
				t.Fatalf("%v\nchild output:\n%s", err, out)
			}
			got := map[string]reports.Outcome{}
			var failed []string
			for _, r := range res.Rules {
				got[r.Rule] = r.Outcome
				if r.Outcome == reports.Failed {
					failed = append(failed, r.Rule)
					if !strings.Contains(r.Message, sc.inFailed) {
						t.Errorf("failed rule %s says %q; want it to mention %q", r.Rule, r.Message, sc.inFailed)
					}
				}
			}
			for rule, want := range sc.want {
				if got[rule] != want {
					t.Errorf("rule %s = %q; want %q", rule, got[rule], want)
				}
			}
			if len(failed) != 1 || reports.ExitCode(res) != reports.ExitFailed {
				t.Errorf("failed rules %v, exit %d; want [SU-2], exit %d", failed, reports.ExitCode(res), reports.ExitFailed)
			}
			for _, c := range res.Cases {
				if c.Outcome == reports.Error && !strings.HasPrefix(c.Message, UnavailablePrefix) {
					t.Errorf("error case %q says %q; want it to start %q", c.Name, c.Message, UnavailablePrefix)
				}
				if sc.name == "down" && c.Rule != "SU-1" && c.Name != cascadeTrigger && c.Outcome != reports.Error && c.Outcome != reports.NotApplicable {
					t.Errorf("case %q after the target went away = %s; want error", c.Name, c.Outcome)
				}
				if sc.name == "down" && c.Outcome == reports.Error && !strings.Contains(c.Message, fmt.Sprintf("since case %q", cascadeTrigger)) {
					t.Errorf("case %q: %q does not say since which case the target is unavailable", c.Name, c.Message)
				}
			}
			if t.Failed() {
				t.Logf("child output:\n%s", lastLinesOf(string(out), 40))
			}
		})
	}
}

func lastLinesOf(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestRunChildCascade is the child of TestCascadeIsolation.
func TestRunChildCascade(t *testing.T) {
	scenario := os.Getenv(envCascadeScenario)
	if scenario == "" {
		t.Skip("only runs as the child of TestCascadeIsolation")
	}
	tg, stop, err := inprocess.StartEPD(inprocess.Options{Preset: "tiny", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	flaky := &flakyTarget{Static: tg, scenario: scenario}
	p := tg.Profile()
	p.CaseTimeout = 20 * time.Second
	filter := cascadeFilter
	switch scenario {
	case "hang":
		// The hung case waits out the case timeout; the one case after it
		// must finish well within it (it takes milliseconds).
		p.CaseTimeout = 10 * time.Second
		filter = cascadeHangFilter
	case "health-hang":
		if ProbeTimeout <= 2*time.Second {
			t.Fatalf("ProbeTimeout %v: the scenario needs a case timeout shorter than the probe", ProbeTimeout)
		}
		p.CaseTimeout = 2 * time.Second
		filter = cascadeHangFilter
	}
	flaky.profile = p
	res, err := Run(context.Background(), flaky, Options{LabelFilter: filter, ReportDir: os.Getenv(envCascadeReportDir), Out: os.Stdout})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("child verdict:", res.Verdict)
}

// flakyTarget misbehaves from the trigger case's first publish on, as its
// scenario says (TestCascadeIsolation).
type flakyTarget struct {
	*target.Static
	profile  target.Profile
	scenario string

	mu          sync.Mutex
	down        bool // every call answers UNAVAILABLE
	downHealths int  // Health calls answered while down
	healthHangs bool // the consumer's Health never answers (health-hang)
}

func (f *flakyTarget) Profile() target.Profile { return f.profile }

func (f *flakyTarget) Engine(role target.Role) (target.Engine, bool) {
	e, ok := f.Static.Engine(role)
	if !ok {
		return e, ok
	}
	return &flakyEngine{Engine: e, role: role, f: f}, true
}

// inTrigger reports whether the trigger case is running.
func inTrigger() bool { return ginkgo.CurrentSpecReport().LeafNodeText == cascadeTrigger }

// isDown reports whether the target is down now; a Health call counts
// towards the recovery of the "recovers" scenario.
func (f *flakyTarget) isDown(health bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.down {
		return false
	}
	if health {
		f.downHealths++
		if f.scenario == "recovers" && f.downHealths > len(RolesOf(f.Static)) {
			f.down = false // every endpoint was probed down once after the case
			return false
		}
	}
	return true
}

var errGone = status.Error(codes.Unavailable, "connection refused (the test's target went away)")

type flakyEngine struct {
	target.Engine
	role target.Role
	f    *flakyTarget
}

func (e *flakyEngine) Generate(ctx context.Context, req *pb.GenerateRequest) (*target.GenerateResult, error) {
	if e.f.isDown(false) {
		return &target.GenerateResult{Status: status.Convert(errGone), Trailer: metadata.MD{}}, nil
	}
	if e.f.scenario == "hang" && inTrigger() && e.role == target.RoleConsumer {
		<-ctx.Done()
		return &target.GenerateResult{Status: status.FromContextError(ctx.Err()), Trailer: metadata.MD{}}, nil
	}
	res, err := e.Engine.Generate(ctx, req)
	if e.f.scenario == "health-hang" && inTrigger() && req.GetEncoder().GetPublish() != nil {
		e.f.mu.Lock()
		e.f.healthHangs = true
		e.f.mu.Unlock()
		return res, err
	}
	if e.f.scenario != "hang" && inTrigger() && req.GetEncoder().GetPublish() != nil {
		e.f.mu.Lock()
		e.f.down = true
		e.f.mu.Unlock()
	}
	return res, err
}

func (e *flakyEngine) Health(ctx context.Context) (*pb.HealthResponse, error) {
	e.f.mu.Lock()
	hangs := e.f.healthHangs && e.role == target.RoleConsumer
	e.f.mu.Unlock()
	if hangs {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if e.f.isDown(true) {
		return nil, errGone
	}
	return e.Engine.Health(ctx)
}

func (e *flakyEngine) GetServerInfo(ctx context.Context) (*pb.ServerInfo, error) {
	if e.f.isDown(false) {
		return nil, errGone
	}
	return e.Engine.GetServerInfo(ctx)
}

func (e *flakyEngine) GetModelInfo(ctx context.Context, model string) (*pb.ModelInfo, error) {
	if e.f.isDown(false) {
		return nil, errGone
	}
	return e.Engine.GetModelInfo(ctx, model)
}

func (e *flakyEngine) GetLoad(ctx context.Context) (*pb.LoadInfo, error) {
	if e.f.isDown(false) {
		return nil, errGone
	}
	return e.Engine.GetLoad(ctx)
}

func (e *flakyEngine) Abort(ctx context.Context, req *pb.AbortRequest) (*pb.AbortResponse, error) {
	if e.f.isDown(false) {
		return nil, errGone
	}
	return e.Engine.Abort(ctx, req)
}

func (e *flakyEngine) Shutdown(ctx context.Context, req *pb.ShutdownRequest) (*pb.ShutdownResponse, error) {
	if e.f.isDown(false) {
		return nil, errGone
	}
	return e.Engine.Shutdown(ctx, req)
}
