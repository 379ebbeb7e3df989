package launch

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
)

// Target returns the topology as a live Target for an in-process `baton
// check`: besides the engines it injects transfer faults through the
// topology's fault proxy (target.FaultInjector), replaces instances a
// quarantine poisoned (target.Restarter) and kills and replaces them
// (target.Crasher).
func (t *Topology) Target() *LiveTarget {
	p := t.Config().Profile
	p.Restarts = true // Restart replaces instances
	return &LiveTarget{topo: t, profile: p}
}

// LiveTarget is a Target over a running Topology.
type LiveTarget struct {
	topo    *Topology
	profile target.Profile
}

// Profile implements target.Target. With Options.Security its tls
// listeners are those of the instances running now (a restart moves them).
func (l *LiveTarget) Profile() target.Profile {
	p := l.profile
	l.topo.mu.Lock()
	procs := l.topo.roleProcesses()
	l.topo.mu.Unlock()
	l.topo.sec.declare(&p, procs)
	return p
}

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

// SetTransferFaults implements target.FaultInjector.
func (l *LiveTarget) SetTransferFaults(method string, delay time.Duration, faults ...target.TransferFault) error {
	return target.ProxyFaults{Proxy: l.topo.proxy}.SetTransferFaults(method, delay, faults...)
}

// TransferCalls implements target.FaultInjector.
func (l *LiveTarget) TransferCalls(ctx context.Context, method string, n int) ([]target.TransferCall, error) {
	return target.ProxyFaults{Proxy: l.topo.proxy}.TransferCalls(ctx, method, n)
}

// TransferArrived implements target.FaultInjector.
func (l *LiveTarget) TransferArrived(ctx context.Context, method string, n int) error {
	return target.ProxyFaults{Proxy: l.topo.proxy}.TransferArrived(ctx, method, n)
}

// RefuseProducerConnections implements target.ConnectionRefuser: the fault
// proxy, which the consumers trust as the producer's control endpoint,
// unbinds its port and closes its connections until restore.
func (l *LiveTarget) RefuseProducerConnections(ctx context.Context) (func() error, error) {
	return target.ProxyFaults{Proxy: l.topo.proxy}.RefuseProducerConnections(ctx)
}

// Restart implements target.Restarter: it shuts the role's instance down
// (Shutdown, else kill) and starts a fresh one with the same flags.
func (l *LiveTarget) Restart(ctx context.Context, role target.Role) error {
	t := l.topo
	name, files, slot, err := t.slot(role)
	if err != nil {
		return err
	}
	t.mu.Lock()
	old := *slot
	t.mu.Unlock()
	if old != nil {
		select {
		case <-old.exited: // it crashed or shut down already
		default:
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := old.engine.Shutdown(cctx, &pb.ShutdownRequest{ExpectedInstanceId: old.instance, DrainTimeoutMs: proto32(2000)})
			cancel()
			if err != nil {
				_ = old.cmd.Process.Kill() // it did not accept Shutdown: no drain to wait for
			}
		}
		if t.fixedPorts(processName(name, files)) {
			// Others trust this role's ports (SE-3): the new instance
			// takes them over once the old one has let them go.
			select {
			case <-old.exited:
			case <-time.After(15 * time.Second):
				_ = old.cmd.Process.Kill()
				<-old.exited
			case <-ctx.Done():
				return ctx.Err()
			}
			_ = old.engine.Close()
		} else {
			// A draining instance answers no new handoff (S-2) and lingers
			// a moment for repeated Shutdowns: the new one starts meanwhile,
			// and Shutdown and Kill wait for the old one's exit.
			t.retire(old)
		}
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

// Crash implements target.Crasher: it kills role's process with SIGKILL
// (Topology.Crash: no drain, no cleanup; its connections close as the
// kernel reaps it) and starts a fresh instance with the same flags, as
// Restart does, waiting until it is READY; a new producer gets the fault
// proxy's upstream.
func (l *LiveTarget) Crash(ctx context.Context, role target.Role) error {
	if _, err := l.topo.Crash(role); err != nil {
		return err
	}
	return l.Restart(ctx, role) // the old instance has exited: Restart only starts the new one
}

func proto32(v uint32) *uint32 { return &v }

// slot returns the --role name of a target role, the name of its
// process's files ("" = the --role name; the second PD's differ), and
// where its process is kept.
func (t *Topology) slot(role target.Role) (string, string, **Process, error) {
	switch role {
	case target.RoleProducer:
		return "encoder", "", &t.Producer, nil
	case target.RoleConsumer:
		return "pd", "", &t.Consumer, nil
	case target.RoleSecondConsumer:
		return "pd", secondConsumerName, &t.Consumer2, nil
	case target.RoleBaseline:
		return "aggregated", "", &t.Baseline, nil
	case target.RolePrefill:
		return "prefill", "", &t.Prefill, nil
	case target.RoleDecode:
		return "decode", "", &t.Decode, nil
	}
	return "", "", nil, fmt.Errorf("launch: no role %s", role)
}

// Crash kills role's process with SIGKILL (no drain, no cleanup: its
// sockets close as the kernel reaps it) and waits until it has exited. It
// returns the instance id the process had. Restart brings a new one.
func (t *Topology) Crash(role target.Role) (instanceID string, err error) {
	_, _, slot, err := t.slot(role)
	if err != nil {
		return "", err
	}
	t.mu.Lock()
	p := *slot
	t.mu.Unlock()
	if p == nil {
		return "", fmt.Errorf("launch: this topology has no %s", role)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return "", fmt.Errorf("launch: kill -9 %s: %w", role, err)
	}
	<-p.exited
	return p.instance, nil
}

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
