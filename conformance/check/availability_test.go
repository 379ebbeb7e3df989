package check

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"github.com/baton-dev/baton/reports"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// switchEngine answers Health with state (or err), and counts the calls
// that reach it.
type switchEngine struct {
	target.Engine
	mu    sync.Mutex
	state pb.HealthState
	err   error
	calls int
}

func (s *switchEngine) set(state pb.HealthState, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state, s.err = state, err
}

func (s *switchEngine) Health(context.Context) (*pb.HealthResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return nil, s.err
	}
	return &pb.HealthResponse{State: s.state}, nil
}

func (s *switchEngine) GetServerInfo(context.Context) (*pb.ServerInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return nil, s.err
	}
	return &pb.ServerInfo{SchemaRevision: 1, InstanceId: "i"}, nil
}

func (s *switchEngine) Generate(context.Context, *pb.GenerateRequest) (*target.GenerateResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return &target.GenerateResult{Status: status.New(codes.OK, "")}, nil
}

// restartingTarget restarts an engine by setting it READY.
type restartingTarget struct {
	*target.Static
	engines  map[target.Role]*switchEngine
	restarts []target.Role
}

func (r *restartingTarget) Restart(_ context.Context, role target.Role) error {
	r.restarts = append(r.restarts, role)
	r.engines[role].set(pb.HealthState_HEALTH_STATE_READY, nil)
	return nil
}

func ready() *switchEngine { return &switchEngine{state: pb.HealthState_HEALTH_STATE_READY} }

// TestGuard drives the guard through cases by hand: a case during which
// an endpoint starts draining is noted (unless it declared it), the next
// case's calls to that endpoint get the guard's UNAVAILABLE without
// reaching it, and an endpoint that answers READY again is used again.
func TestGuard(t *testing.T) {
	prod, cons := ready(), ready()
	tg := target.NewStatic(target.Profile{}, map[target.Role]target.Engine{target.RoleProducer: prod, target.RoleConsumer: cons})
	g := newGuard(tg, func(name string, _ []string) bool { return name == "declared" })
	ctx := context.Background()
	g.start(ctx)
	gated := g.Engine(target.RoleConsumer, cons)

	g.beforeCase(ctx, "first")
	cons.set(pb.HealthState_HEALTH_STATE_DRAINING, nil)
	g.afterCase(ctx, "first", nil)
	if n := g.notes["first"]; len(n.wentDown) != 1 || !strings.Contains(n.wentDown[0], "consumer endpoint: Health = DRAINING") {
		t.Fatalf("note of the case the consumer went down in = %+v; want the consumer DRAINING", n)
	}

	g.beforeCase(ctx, "second")
	before := cons.calls
	res, err := gated.Generate(ctx, &pb.GenerateRequest{})
	if err != nil || res.Code() != codes.Unavailable || !strings.Contains(res.Status.Message(), `since case "first"`) {
		t.Errorf("Generate on the draining consumer = %v, %v; want the guard's UNAVAILABLE naming the case it went down in", res.Status, err)
	}
	if cons.calls != before {
		t.Errorf("the guard let a call through to an endpoint known down")
	}
	g.afterCase(ctx, "second", nil)
	if n := g.notes["second"]; n.unavailable == "" || !n.sent || len(n.wentDown) != 0 {
		t.Errorf("note of the case after = %+v; want unavailable, sent, nothing new went down", n)
	}

	cons.set(pb.HealthState_HEALTH_STATE_READY, nil) // it recovered
	g.beforeCase(ctx, "third")
	if res, _ := gated.Generate(ctx, &pb.GenerateRequest{}); res.Code() != codes.OK {
		t.Errorf("Generate after the consumer recovered = %v; want it to reach the consumer", res.Status)
	}
	g.afterCase(ctx, "third", nil)
	if n := g.notes["third"]; n.unavailable != "" || len(n.wentDown) != 0 {
		t.Errorf("note of a case on a recovered target = %+v; want none", n)
	}

	g.beforeCase(ctx, "declared")
	prod.set(0, status.Error(codes.Unavailable, "connection refused"))
	g.afterCase(ctx, "declared", nil)
	if n := g.notes["declared"]; len(n.wentDown) != 0 {
		t.Errorf("a case declaring it takes endpoints down got %+v", n)
	}
	if d, ok := g.down[target.RoleProducer]; !ok || d.since != "declared" {
		t.Errorf("down = %+v; want the producer down since the declared case", g.down)
	}
}

// TestGuardRestarts: with a target.Restarter, an endpoint still down
// before a case is restarted, and the case runs against it.
func TestGuardRestarts(t *testing.T) {
	cons := ready()
	engines := map[target.Role]*switchEngine{target.RoleConsumer: cons}
	tg := &restartingTarget{Static: target.NewStatic(target.Profile{}, map[target.Role]target.Engine{target.RoleConsumer: cons}), engines: engines}
	g := newGuard(tg, nil)
	ctx := context.Background()
	g.start(ctx)
	g.beforeCase(ctx, "a")
	cons.set(0, status.Error(codes.Unavailable, "gone"))
	g.afterCase(ctx, "a", nil)
	g.beforeCase(ctx, "b")
	if len(tg.restarts) != 1 || tg.restarts[0] != target.RoleConsumer {
		t.Errorf("restarts = %v; want the consumer once", tg.restarts)
	}
	if err := g.gate(target.RoleConsumer, true); err != nil {
		t.Errorf("gate after the restart = %v; want the call let through", err)
	}
}

// TestGuardDownBeforeRun: an endpoint down when the run starts is down
// "before the first case".
func TestGuardDownBeforeRun(t *testing.T) {
	cons := ready()
	cons.set(pb.HealthState_HEALTH_STATE_NOT_READY, nil)
	g := newGuard(target.NewStatic(target.Profile{}, map[target.Role]target.Engine{target.RoleConsumer: cons}), nil)
	g.start(context.Background())
	g.beforeCase(context.Background(), "a")
	err := g.gate(target.RoleConsumer, false)
	if err == nil || !strings.Contains(err.Error(), "since "+beforeRun) || !strings.Contains(err.Error(), "NOT_READY") {
		t.Errorf("gate = %v; want UNAVAILABLE since %s naming NOT_READY", err, beforeRun)
	}
}

func TestAdjust(t *testing.T) {
	failed := reports.CaseResult{Name: "c", Outcome: reports.Failed, Message: "Consume = UNAVAILABLE; want OK"}
	passed := reports.CaseResult{Name: "c", Outcome: reports.Passed}
	harness := reports.CaseResult{Name: "c", Outcome: reports.Error, Message: "harness error: Generate: connection refused"}
	na := reports.CaseResult{Name: "c", Outcome: reports.NotApplicable, Message: "not applicable: no E+P+D"}
	down := &caseNote{wentDown: []string{"consumer endpoint: Health = DRAINING"}}
	probed := &caseNote{unavailable: "case \"x\": producer endpoint: Health = DRAINING"}
	sent := &caseNote{unavailable: probed.unavailable, sent: true}
	for _, tt := range []struct {
		name     string
		c        reports.CaseResult
		note     *caseNote
		want     reports.Outcome
		msgStart string
		msgHas   string
	}{
		{"no note", failed, nil, reports.Failed, failed.Message, ""},
		{"failed and went down: appended", failed, down, reports.Failed, failed.Message, WentDownMessage + ": consumer endpoint"},
		{"passed and went down: failed", passed, down, reports.Failed, WentDownMessage, ""},
		{"harness error and went down: failed", harness, down, reports.Failed, WentDownMessage, harness.Message},
		{"failed against a down endpoint: error", failed, sent, reports.Error, UnavailablePrefix + `case "x": producer endpoint`, failed.Message},
		{"passed, only asking a down endpoint's health: passed", passed, probed, reports.Passed, "", ""},
		{"passed with a Generate to a down endpoint: error", passed, sent, reports.Error, UnavailablePrefix + `case "x"`, ""},
		{"not applicable stays", na, sent, reports.NotApplicable, na.Message, ""},
		// A case decided before it ran sent nothing: an endpoint that went
		// down around it (a hang that began during its probe) is not its
		// failure; the cases after it are errors.
		{"not applicable and went down: stays", na, down, reports.NotApplicable, na.Message, ""},
		{"not verifiable and went down: stays", reports.CaseResult{Name: "c", Outcome: reports.NotVerifiable, Message: "not verifiable: no hooks"}, down, reports.NotVerifiable, "not verifiable: no hooks", ""},
	} {
		got := adjust(tt.c, tt.note)
		if got.Outcome != tt.want || !strings.HasPrefix(got.Message, tt.msgStart) || !strings.Contains(got.Message, tt.msgHas) {
			t.Errorf("%s: adjust = %s %q; want %s starting %q containing %q", tt.name, got.Outcome, got.Message, tt.want, tt.msgStart, tt.msgHas)
		}
	}
}

// TestGuardedEngineUnwraps: a capability of the engine behind the guard
// and the recorder (grpc.health.v1, the dialled engine) is still found, or
// SE-1 and SE-5 would be not verifiable in every run.
func TestGuardedEngineUnwraps(t *testing.T) {
	e, err := target.DialEngine("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	g := &guard{}
	wrapped := g.Engine(target.RoleProducer, &recordingEngine{Engine: e})
	if _, ok := target.Capability[target.StandardHealth](wrapped); !ok {
		t.Error("StandardHealth not found through the guard and the recorder")
	}
	if target.Dialled(wrapped) != e {
		t.Error("Dialled does not find the gRPC engine through the guard and the recorder")
	}
}
