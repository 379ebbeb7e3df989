package launch

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-dev/baton/conformance/faultproxy"
	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
)

// Target returns the topology as a live Target for an in-process `baton
// check`: besides the engines it injects transfer faults through the
// topology's fault proxy (target.FaultInjector) and replaces instances a
// quarantine poisoned (target.Restarter).
func (t *Topology) Target() *LiveTarget { return &LiveTarget{topo: t, profile: t.Config().Profile} }

// LiveTarget is a Target over a running Topology.
type LiveTarget struct {
	topo    *Topology
	profile target.Profile
}

// Profile implements target.Target.
func (l *LiveTarget) Profile() target.Profile { return l.profile }

// Engine implements target.Target; after a Restart it returns the new instance.
func (l *LiveTarget) Engine(role target.Role) (target.Engine, bool) {
	l.topo.mu.Lock()
	defer l.topo.mu.Unlock()
	var p *Process
	switch role {
	case target.RoleProducer:
		p = l.topo.Producer
	case target.RoleConsumer:
		p = l.topo.Consumer
	case target.RoleSecondConsumer:
		p = l.topo.Consumer2
	case target.RoleBaseline:
		p = l.topo.Baseline
	case target.RolePrefill:
		p = l.topo.Prefill
	case target.RoleDecode:
		p = l.topo.Decode
	}
	if p == nil {
		return nil, false
	}
	return p.engine, true
}

var faultKinds = map[target.TransferFault]faultproxy.Fault{
	target.FaultNone:            faultproxy.FaultNone,
	target.FaultDropRequest:     faultproxy.FaultDropRequest,
	target.FaultDropReply:       faultproxy.FaultDropReply,
	target.FaultDelay:           faultproxy.FaultDelay,
	target.FaultCutConnection:   faultproxy.FaultCutConnection,
	target.FaultUnavailable:     faultproxy.FaultUnavailable,
	target.FaultInvalidArgument: faultproxy.FaultInvalidArgument,
}

// SetTransferFaults implements target.FaultInjector.
func (l *LiveTarget) SetTransferFaults(method string, delay time.Duration, faults ...target.TransferFault) error {
	if l.topo.proxy == nil {
		return fmt.Errorf("launch: this topology runs no fault proxy")
	}
	steps := make([]faultproxy.Step, len(faults))
	for i, f := range faults {
		k, ok := faultKinds[f]
		if !ok {
			return fmt.Errorf("launch: unknown transfer fault %q", f)
		}
		steps[i] = faultproxy.Step{Fault: k}
		if k == faultproxy.FaultDelay {
			steps[i].Delay = delay
		}
	}
	return l.topo.proxy.SetPlan(faultproxy.Plan{Rules: map[string]faultproxy.Rule{method: {Sequence: steps}}})
}

// TransferCalls implements target.FaultInjector.
func (l *LiveTarget) TransferCalls(ctx context.Context, method string, n int) ([]target.TransferCall, error) {
	if l.topo.proxy == nil {
		return nil, fmt.Errorf("launch: this topology runs no fault proxy")
	}
	recs, err := l.topo.proxy.WaitCalls(ctx, method, n)
	out := make([]target.TransferCall, len(recs))
	for i, r := range recs {
		code := ""
		if r.UpstreamDone {
			code = target.CodeName(r.UpstreamCode)
		}
		out[i] = target.TransferCall{Method: r.Method, Fault: target.TransferFault(r.Step.Fault.String()), UpstreamReached: r.UpstreamReached, UpstreamCode: code}
	}
	return out, err
}

// TransferArrived implements target.FaultInjector.
func (l *LiveTarget) TransferArrived(ctx context.Context, method string, n int) error {
	if l.topo.proxy == nil {
		return fmt.Errorf("launch: this topology runs no fault proxy")
	}
	return l.topo.proxy.WaitArrived(ctx, method, n)
}

// Restart implements target.Restarter: it shuts the role's instance down
// (Shutdown, else kill) and starts a fresh one with the same flags.
func (l *LiveTarget) Restart(ctx context.Context, role target.Role) error {
	t := l.topo
	var name, files string
	var slot **Process
	switch role {
	case target.RoleProducer:
		name, slot = "encoder", &t.Producer
	case target.RoleConsumer:
		name, slot = "pd", &t.Consumer
	case target.RoleSecondConsumer:
		name, slot, files = "pd", &t.Consumer2, secondConsumerName
	case target.RoleBaseline:
		name, slot = "aggregated", &t.Baseline
	case target.RolePrefill:
		name, slot = "prefill", &t.Prefill
	case target.RoleDecode:
		name, slot = "decode", &t.Decode
	default:
		return fmt.Errorf("launch: cannot restart role %s", role)
	}
	t.mu.Lock()
	old := *slot
	t.mu.Unlock()
	if old != nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := old.engine.Shutdown(cctx, &pb.ShutdownRequest{ExpectedInstanceId: old.instance, DrainTimeoutMs: proto32(2000)})
		cancel()
		if err != nil {
			_ = old.cmd.Process.Kill() // it did not accept Shutdown: no drain to wait for
		}
		// A draining instance answers no new handoff (S-2) and lingers
		// a moment for repeated Shutdowns: the new one starts meanwhile,
		// and Shutdown and Kill wait for the old one's exit.
		t.retire(old)
	}
	p, err := t.startAs(ctx, name, files)
	if err != nil {
		return err
	}
	if err := p.waitReady(ctx, t.opts.StartTimeout); err != nil {
		_ = p.cmd.Process.Kill()
		return err
	}
	t.mu.Lock()
	*slot = p
	t.mu.Unlock()
	if role == target.RoleProducer && t.proxy != nil {
		return t.proxy.SetUpstream(p.Address)
	}
	return nil
}

func proto32(v uint32) *uint32 { return &v }

// retire waits in the background (at most 15 s, then kills it) for the
// exit of an instance Restart replaced; Shutdown and Kill wait for it.
func (t *Topology) retire(p *Process) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		_ = p.engine.Close()
	}()
	t.mu.Lock()
	t.retired = append(t.retired, done)
	t.mu.Unlock()
}

// waitRetired waits until every instance Restart replaced has exited.
func (t *Topology) waitRetired() {
	t.mu.Lock()
	retired := t.retired
	t.retired = nil
	t.mu.Unlock()
	for _, done := range retired {
		<-done
	}
}

// WithProfile returns the live target declaring p instead (the demo adds the
// implementation metadata).
func (l *LiveTarget) WithProfile(p target.Profile) *LiveTarget {
	return &LiveTarget{topo: l.topo, profile: p}
}
