package check

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"github.com/baton-dev/baton/reports"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Cascade isolation (CONTRACT "Outcomes of a check": failed is the target
// answering wrongly, or not answering within the case timeout although it
// answered the harness's probe before the case; error is the harness not
// being able to run the case, or the target already down, draining or
// NOT_READY for a reason the case did not cause).
//
// A guard watches every endpoint between cases:
//
//   - after each case it probes every endpoint (Health must answer READY,
//     GetServerInfo must answer; each call bounded by ProbeTimeout). An
//     endpoint that was up when the case started and is down now went down
//     during the case: unless the case declares it may take endpoints down
//     (suite.Case.MayTakeDown, or the "destructive" label), its rule fails
//     with WentDownMessage;
//   - before each case it probes the endpoints known down again (restarting
//     them first when the target is a target.Restarter); those still down
//     answer every call of the case at once with UNAVAILABLE (a harness
//     answer, so a hung endpoint cannot hang every later case), and a case
//     that called one of them and did not pass, or passed having sent one
//     of them a Generate, Abort or Shutdown, is an error
//     ("harness error: target unavailable since <case>"), never failed.
//
// The verdicts are adjusted when the Ginkgo report is converted (guard.apply),
// so results.json, junit.xml, report.html, the rule lines and the progress
// display agree; Ginkgo's own ginkgo.json and ginkgo-junit.xml keep the raw
// spec states.

// WentDownMessage starts the note added to a case during which an endpoint
// went away without the case asking for it.
const WentDownMessage = "the target went down during this case"

// UnavailablePrefix starts the message of a case that ran against an
// endpoint that was already down ("harness error: target unavailable since
// case \"S-1 ...\": consumer endpoint: Health = DRAINING"), and the
// harness's answer to each of its calls to that endpoint.
const UnavailablePrefix = PrefixHarnessError + " target unavailable since "

// beforeRun is the "case" an endpoint that was down when the run started is
// down since.
const beforeRun = "before the first case"

// downState is why an endpoint is known down, and since which case.
type downState struct {
	since  string // the case during which it went down, or beforeRun
	reason string // "Health = DRAINING"
}

// caseNote is what the guard saw of one case.
type caseNote struct {
	// wentDown lists the endpoints that went down during the case without
	// its declaring it ("consumer endpoint: Health = DRAINING").
	wentDown []string
	// unavailable describes the endpoints down when the case started that
	// it called; "" when it called none.
	unavailable string
	// sent: it sent one of them a Generate, Abort or Shutdown (a call whose
	// fast UNAVAILABLE could pass for an answer).
	sent bool
}

// guard is the run's availability tracker. Its zero value is not usable;
// see newGuard.
type guard struct {
	tg       target.Target // the target as given to Run: not recorded, not guarded
	roles    []target.Role
	declared func(name string, labels []string) bool

	mu      sync.Mutex
	down    map[target.Role]downState
	atStart map[target.Role]downState // down when the current case started
	current string
	notes   map[string]*caseNote
}

// newGuard returns a guard over tg's endpoints; declared says whether a
// case may take endpoints down on purpose.
func newGuard(tg target.Target, declared func(name string, labels []string) bool) *guard {
	return &guard{tg: tg, roles: RolesOf(tg), declared: declared,
		down: map[target.Role]downState{}, notes: map[string]*caseNote{}}
}

// suiteDeclared is the declaration of the registered cases: Destructive or
// TakesDown (suite.Case.MayTakeDown), or the "destructive" label.
func suiteDeclared() func(string, []string) bool {
	declared := map[string]bool{}
	for _, c := range suite.Cases() {
		if c.MayTakeDown() {
			declared[c.Name] = true
		}
	}
	return func(name string, labels []string) bool {
		return declared[name] || slices.Contains(labels, suite.LabelDestructive)
	}
}

// DownProbeTimeout bounds each call of the probe of an endpoint already
// known down, before each case: a recovered endpoint answers within it,
// and a hung one costs each later case this, not ProbeTimeout.
const DownProbeTimeout = time.Second

// probeEndpoint asks one endpoint Health and GetServerInfo, each bounded by
// timeout; "" when it answers READY, else why not.
func probeEndpoint(ctx context.Context, e target.Engine, timeout time.Duration) string {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	h, err := e.Health(cctx)
	cancel()
	if err != nil {
		return "Health = " + callText(err)
	}
	if st := h.GetState(); st != pb.HealthState_HEALTH_STATE_READY {
		return "Health = " + healthText(h)
	}
	cctx, cancel = context.WithTimeout(ctx, timeout)
	_, err = e.GetServerInfo(cctx)
	cancel()
	if err != nil {
		return "GetServerInfo = " + callText(err)
	}
	return ""
}

// callText is a failed call's code and message.
func callText(err error) string {
	st := status.Convert(err)
	if st.Message() == "" {
		return "code " + target.CodeName(st.Code())
	}
	return fmt.Sprintf("code %s: %s", target.CodeName(st.Code()), st.Message())
}

// healthText is a Health answer: its state and the reasons of its checks
// that are not READY.
func healthText(h *pb.HealthResponse) string {
	s := strings.TrimPrefix(h.GetState().String(), "HEALTH_STATE_")
	for _, c := range h.GetChecks() {
		if c.GetState() != pb.HealthState_HEALTH_STATE_READY && c.GetMessage() != "" {
			s += fmt.Sprintf(" (%s: %s)", c.GetName(), c.GetMessage())
		}
	}
	return s
}

// probe asks every role in roles concurrently, each call bounded by
// timeout; the result maps each role that is not READY to why.
func (g *guard) probe(ctx context.Context, roles []target.Role, timeout time.Duration) map[target.Role]string {
	reasons := make([]string, len(roles))
	var wg sync.WaitGroup
	for i, r := range roles {
		e, ok := g.tg.Engine(r)
		if !ok || e == nil {
			reasons[i] = "no endpoint"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			reasons[i] = probeEndpoint(ctx, e, timeout)
		}()
	}
	wg.Wait()
	out := map[target.Role]string{}
	for i, r := range roles {
		if reasons[i] != "" {
			out[r] = reasons[i]
		}
	}
	return out
}

// start probes every endpoint once before the first case: those down are
// down since beforeRun.
func (g *guard) start(ctx context.Context) {
	down := g.probe(ctx, g.roles, ProbeTimeout)
	g.mu.Lock()
	defer g.mu.Unlock()
	for r, why := range down {
		g.down[r] = downState{since: beforeRun, reason: why}
	}
}

// beforeCase runs before each case: it probes the endpoints known down
// again (restarting them first when the target can), and makes those still
// down answer the case's calls with UNAVAILABLE.
func (g *guard) beforeCase(ctx context.Context, name string) {
	g.mu.Lock()
	var down []target.Role
	for _, r := range g.roles {
		if _, ok := g.down[r]; ok {
			down = append(down, r)
		}
	}
	g.mu.Unlock()
	restartErr := map[target.Role]error{}
	if rs, ok := g.tg.(target.Restarter); ok && len(down) > 0 {
		for _, r := range down {
			if why := g.probe(ctx, []target.Role{r}, DownProbeTimeout)[r]; why == "" {
				continue // it recovered by itself
			}
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			restartErr[r] = rs.Restart(rctx, r)
			cancel()
		}
	}
	still := g.probe(ctx, down, DownProbeTimeout)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range down {
		why, ok := still[r]
		if !ok {
			delete(g.down, r)
			continue
		}
		d := g.down[r]
		d.reason = why
		if err := restartErr[r]; err != nil {
			d.reason += fmt.Sprintf("; the harness's restart failed: %v", err)
		}
		g.down[r] = d
	}
	g.current = name
	g.atStart = map[target.Role]downState{}
	for r, d := range g.down {
		g.atStart[r] = d
	}
	g.notes[name] = &caseNote{}
}

// afterCase runs after each case: endpoints up when it started and down
// now went down during it; unless it declared that, its rule fails. The
// endpoints down when it started (its calls to them were gated) are
// probed again before the next case, not here.
func (g *guard) afterCase(ctx context.Context, name string, labels []string) {
	g.mu.Lock()
	var up []target.Role
	for _, r := range g.roles {
		if _, wasDown := g.atStart[r]; !wasDown {
			up = append(up, r)
		}
	}
	g.mu.Unlock()
	now := g.probe(ctx, up, ProbeTimeout)
	g.mu.Lock()
	defer g.mu.Unlock()
	note := g.notes[name]
	if note == nil {
		note = &caseNote{}
		g.notes[name] = note
	}
	declared := g.declared != nil && g.declared(name, labels)
	for _, r := range up {
		why, isDown := now[r]
		switch {
		case !isDown:
			delete(g.down, r) // up (again: a case may restart what it poisoned)
		default:
			g.down[r] = downState{since: name, reason: why}
			if !declared {
				note.wentDown = append(note.wentDown, fmt.Sprintf("%s endpoint: %s", r, why))
			}
		}
	}
	g.current, g.atStart = "", nil
}

// gate is called by every call of the current case to role: nil when the
// endpoint was up at the case's start, else the UNAVAILABLE the call gets.
func (g *guard) gate(role target.Role, sends bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	d, ok := g.atStart[role]
	if !ok || g.current == "" {
		return nil
	}
	note := g.notes[g.current]
	if note.unavailable == "" {
		note.unavailable = unavailableText(role, d)
	}
	note.sent = note.sent || sends
	return status.Error(codes.Unavailable, UnavailablePrefix+unavailableText(role, d)+" (the harness did not send this call)")
}

// unavailableText says since when an endpoint is down and why:
// `case "S-1 ...": consumer endpoint: Health = DRAINING`.
func unavailableText(role target.Role, d downState) string {
	since := d.since
	if since != beforeRun {
		since = fmt.Sprintf("case %q", since)
	}
	return fmt.Sprintf("%s: %s endpoint: %s", since, role, d.reason)
}

// apply adjusts the converted cases by what the guard saw (see the comment
// at the top of this file).
func (g *guard) apply(cases []reports.CaseResult) []reports.CaseResult {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]reports.CaseResult, len(cases))
	for i, c := range cases {
		out[i] = adjust(c, g.notes[c.Name])
	}
	return out
}

// adjust applies one case's note to its result.
func adjust(c reports.CaseResult, note *caseNote) reports.CaseResult {
	if note == nil {
		return c
	}
	if len(note.wentDown) > 0 && (c.Outcome == reports.NotApplicable || c.Outcome == reports.NotVerifiable) && note.unavailable == "" {
		// Decided before it ran (suite.Case.Decide): it sent the target
		// nothing, so the endpoint went down around it, not because of it;
		// the cases after it are errors (the guard keeps it down).
		return c
	}
	if len(note.wentDown) > 0 {
		wd := WentDownMessage + ": " + strings.Join(note.wentDown, "; ")
		if c.Outcome == reports.Failed && c.Message != "" {
			c.Message += "\n" + wd
		} else {
			c.Message = strings.TrimSpace(wd + "\n" + c.Message)
		}
		c.Outcome = reports.Failed
		return c
	}
	if note.unavailable == "" {
		return c
	}
	switch c.Outcome {
	case reports.Failed, reports.Error, reports.NotVerifiable:
	case reports.Passed:
		if !note.sent {
			return c // it only asked a down endpoint whether it was up
		}
	default:
		return c
	}
	msg := UnavailablePrefix + note.unavailable
	if c.Message != "" {
		msg += "\nthe case said: " + c.Message
	}
	c.Outcome, c.Message = reports.Error, msg
	return c
}

// Engine wraps e so that, while role is known down, every call of a case
// gets the guard's UNAVAILABLE at once.
func (g *guard) Engine(role target.Role, e target.Engine) target.Engine {
	return &guardedEngine{Engine: e, role: role, g: g}
}

// guardedEngine is a target.Engine behind the guard's gate.
type guardedEngine struct {
	target.Engine
	role target.Role
	g    *guard
}

// UnwrapEngine implements target.EngineWrapper, so the suite's
// target.Capability finds what the wrapped engine offers beyond the Engine
// methods (grpc.health.v1 for SE-5, the dialled address for SE-1, the
// transfer call for SE-3); those calls pass the gate.
func (e *guardedEngine) UnwrapEngine() target.Engine { return e.Engine }

// Generate passes req to the wrapped engine, unless the endpoint was down when
// the current case started: then the case gets the guard's UNAVAILABLE
// (UnavailablePrefix) as the stream's status, nothing is sent, and the case is
// marked as having sent a call whose fast UNAVAILABLE could pass for an answer.
func (e *guardedEngine) Generate(ctx context.Context, req *pb.GenerateRequest) (*target.GenerateResult, error) {
	if err := e.g.gate(e.role, true); err != nil {
		return &target.GenerateResult{Status: status.Convert(err), Trailer: metadata.MD{}}, nil
	}
	return e.Engine.Generate(ctx, req)
}

// GetServerInfo passes the call to the wrapped engine, unless the endpoint was
// down when the current case started: then it returns the guard's UNAVAILABLE
// (UnavailablePrefix) without calling.
func (e *guardedEngine) GetServerInfo(ctx context.Context) (*pb.ServerInfo, error) {
	if err := e.g.gate(e.role, false); err != nil {
		return nil, err
	}
	return e.Engine.GetServerInfo(ctx)
}

// GetModelInfo passes the call to the wrapped engine, unless the endpoint was
// down when the current case started: then it returns the guard's UNAVAILABLE
// (UnavailablePrefix) without calling.
func (e *guardedEngine) GetModelInfo(ctx context.Context, model string) (*pb.ModelInfo, error) {
	if err := e.g.gate(e.role, false); err != nil {
		return nil, err
	}
	return e.Engine.GetModelInfo(ctx, model)
}

// GetLoad passes the call to the wrapped engine, unless the endpoint was down
// when the current case started: then it returns the guard's UNAVAILABLE
// (UnavailablePrefix) without calling.
func (e *guardedEngine) GetLoad(ctx context.Context) (*pb.LoadInfo, error) {
	if err := e.g.gate(e.role, false); err != nil {
		return nil, err
	}
	return e.Engine.GetLoad(ctx)
}

// Health passes the call to the wrapped engine, unless the endpoint was down
// when the current case started: then it returns the guard's UNAVAILABLE
// (UnavailablePrefix) without calling.
func (e *guardedEngine) Health(ctx context.Context) (*pb.HealthResponse, error) {
	if err := e.g.gate(e.role, false); err != nil {
		return nil, err
	}
	return e.Engine.Health(ctx)
}

// Abort passes the call to the wrapped engine, unless the endpoint was down
// when the current case started: then it returns the guard's UNAVAILABLE
// (UnavailablePrefix) without calling, and the case is marked as having sent a
// call whose fast UNAVAILABLE could pass for an answer.
func (e *guardedEngine) Abort(ctx context.Context, req *pb.AbortRequest) (*pb.AbortResponse, error) {
	if err := e.g.gate(e.role, true); err != nil {
		return nil, err
	}
	return e.Engine.Abort(ctx, req)
}

// Shutdown passes the call to the wrapped engine, unless the endpoint was down
// when the current case started: then it returns the guard's UNAVAILABLE
// (UnavailablePrefix) without calling, and the case is marked as having sent a
// call whose fast UNAVAILABLE could pass for an answer.
func (e *guardedEngine) Shutdown(ctx context.Context, req *pb.ShutdownRequest) (*pb.ShutdownResponse, error) {
	if err := e.g.gate(e.role, true); err != nil {
		return nil, err
	}
	return e.Engine.Shutdown(ctx, req)
}

// activeGuard is the guard of the run in progress (nil outside Run): the
// Ginkgo nodes below are registered once per process and act only during
// a Run.
var activeGuard atomic.Pointer[guard]

// activeProgress is the progress display of the run in progress, if any.
var activeProgress atomic.Pointer[progressSink]

type progressSink struct{ p Progress }

// Every spec of the process gets these nodes (top-level setup nodes apply
// to every spec, the suite's Ordered container included).
var (
	_ = ginkgo.BeforeEach(func(ctx ginkgo.SpecContext) {
		if g := activeGuard.Load(); g != nil {
			name, _ := currentCase()
			g.beforeCase(context.WithoutCancel(ctx), name)
		}
	})
	_ = ginkgo.AfterEach(func(ctx ginkgo.SpecContext) {
		if g := activeGuard.Load(); g != nil {
			name, labels := currentCase()
			g.afterCase(context.WithoutCancel(ctx), name, labels)
		}
	})
	_ = ginkgo.ReportAfterEach(func(r types.SpecReport) {
		ps := activeProgress.Load()
		if ps == nil {
			return
		}
		c, ok := CaseFromSpec(r)
		if !ok || !r.LeafNodeType.Is(types.NodeTypeIt) {
			return
		}
		if g := activeGuard.Load(); g != nil {
			g.mu.Lock()
			c = adjust(c, g.notes[c.Name])
			g.mu.Unlock()
		}
		ps.p.Done(c.Name, string(c.Outcome))
	})
)
