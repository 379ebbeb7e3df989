package target

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/conformance/faultproxy"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// LaunchOptions configure LaunchTarget.
type LaunchOptions struct {
	// ReportDir is the run's report directory: without launch.work_dir the
	// launched processes' logs go to ReportDir/launch ("" too: a temporary
	// directory that Close removes).
	ReportDir string
	// Out receives one line per start, adoption and stop
	// ("launch: consumer started (pid 4242), log out/report/launch/consumer.1.log");
	// restarts during the run go to <work_dir>/launch.log only. nil discards.
	Out io.Writer
}

// Launched is the target `baton check` builds from a profile: the engines
// at the profile's endpoints, with the harness's side of the profile
// running: the launch section's roles started (or adopted), and the fault
// proxy at fault_proxy.listen. Target() is what the suite sees: it
// implements Restarter and Crasher when the profile has a launch section and
// FaultInjector when the proxy runs. Close ends it all.
type Launched struct {
	cfg     Config
	opts    LaunchOptions
	workDir string
	dir     string
	tmpWork bool
	logMu   sync.Mutex
	log     *os.File // <work_dir>/launch.log

	engines map[Role]*GRPCEngine
	closers []func() error
	proxy   *faultproxy.Proxy

	running bool       // LaunchTarget returned: the cases run (starts go to the launch log only)
	mu      sync.Mutex // guards roles' fields, retired and running
	roles   map[Role]*managedRole
	retired []*launchedProcess
}

// managedRole is one role of the launch section.
type managedRole struct {
	op       sync.Mutex // one start, stop or restart of the role at a time
	role     Role
	spec     *LaunchRole
	starts   int
	proc     *launchedProcess // the instance's process when baton started it and it still runs
	adopted  bool             // found running at the start
	instance string           // ServerInfo.instance_id of the current instance ("" unknown)
}

// launchedProcess is one process a launch command started.
type launchedProcess struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	err     error // cmd.Wait's, valid once exited is closed
}

// ErrLaunch is wrapped by every error of LaunchTarget, Restart and Close about
// the launched roles (a start that did not get ready, a stop that did not
// end the instance, a role that already answers).
var ErrLaunch = errors.New("target: launch")

// readyPoll is how often a starting role is probed for readiness: polling
// an external process, whose readiness nothing announces.
const readyPoll = 100 * time.Millisecond

// LaunchTarget builds the target for cfg: it starts the fault proxy (fault_proxy
// {listen}, or a free loopback port for fault_proxy: true with a launch
// section), starts or adopts every role of the launch section and waits
// until each is ready, then connects to every endpoint. On an error it
// undoes what it started. Close must be called at the end.
//
// Errors wrap ErrLaunch (a role that does not get ready within
// launch.start_timeout, with its log's last lines; a role that already
// answers without launch.adopt), or are the proxy's listen error.
func LaunchTarget(ctx context.Context, cfg Config, opts LaunchOptions) (*Launched, error) {
	l := &Launched{cfg: cfg, opts: opts, engines: map[Role]*GRPCEngine{}, roles: map[Role]*managedRole{}}
	if l.opts.Out == nil {
		l.opts.Out = io.Discard
	}
	ok := false
	defer func() {
		if !ok {
			l.abort()
		}
	}()
	if err := l.dialEngines(); err != nil {
		return nil, err
	}
	if cfg.HarnessRunsFaultProxy() {
		if err := l.startProxy(); err != nil {
			return nil, err
		}
	}
	if cfg.Launch != nil {
		if err := l.startRoles(ctx); err != nil {
			return nil, err
		}
	}
	ok = true
	l.mu.Lock()
	l.running = true
	l.mu.Unlock()
	return l, nil
}

// dialEngines connects to every endpoint, with a short reconnect backoff so
// a restarted instance is reached at once.
func (l *Launched) dialEngines() error {
	opts := []DialOption{withFastReconnect()}
	if l.cfg.TLS != nil {
		opts = append(opts, WithTLS(l.cfg.TLS))
	}
	for _, r := range probeOrder {
		addr := l.cfg.Endpoints[r]
		if addr == "" {
			continue
		}
		e, err := DialEngine(addr, opts...)
		if err != nil {
			return err
		}
		l.engines[r] = e
		l.closers = append(l.closers, e.Close)
	}
	return nil
}

// startProxy starts the fault proxy in front of the producer's control
// address.
func (l *Launched) startProxy() error {
	listen, upstream := "127.0.0.1:0", l.cfg.Endpoints[RoleProducer]
	if a := l.cfg.FaultProxyAt; a != nil {
		listen = a.Listen
		if a.ProducerControl != "" {
			upstream = a.ProducerControl
		}
	}
	p, err := faultproxy.New(upstream, faultproxy.Options{ListenAddr: listen})
	if err != nil {
		return fmt.Errorf("target: fault proxy at %s: %w", listen, err)
	}
	l.proxy = p
	fmt.Fprintf(l.opts.Out, "launch: fault proxy listens on %s, forwarding to the producer's control address %s\n", p.Addr(), upstream)
	return nil
}

// FaultProxyAddr is where the harness's fault proxy listens ("" when none
// runs): the address the producer must advertise as its control endpoint.
func (l *Launched) FaultProxyAddr() string {
	if l.proxy == nil {
		return ""
	}
	return l.proxy.Addr()
}

// WorkDir is the launch work directory (logs, ${CACHE_DIR}); "" without a
// launch section.
func (l *Launched) WorkDir() string { return l.workDir }

// startRoles prepares the work directory and starts or adopts each role.
func (l *Launched) startRoles(ctx context.Context) error {
	ls := l.cfg.Launch
	l.workDir = ls.WorkDir
	switch {
	case l.workDir == "" && l.opts.ReportDir != "":
		l.workDir = filepath.Join(l.opts.ReportDir, "launch")
	case l.workDir == "":
		tmp, err := os.MkdirTemp("", "baton-launch-*")
		if err != nil {
			return fmt.Errorf("%w: work directory: %v", ErrLaunch, err)
		}
		l.workDir, l.tmpWork = tmp, true
	}
	var err error
	if l.workDir, err = filepath.Abs(l.workDir); err != nil {
		return fmt.Errorf("%w: work directory: %v", ErrLaunch, err)
	}
	if l.dir = ls.Dir; l.dir == "" {
		if l.dir, err = os.Getwd(); err != nil {
			return fmt.Errorf("%w: working directory: %v", ErrLaunch, err)
		}
	}
	if l.dir, err = filepath.Abs(l.dir); err != nil {
		return fmt.Errorf("%w: launch.dir: %v", ErrLaunch, err)
	}
	if err := os.MkdirAll(l.workDir, 0o755); err != nil {
		return fmt.Errorf("%w: work directory: %v", ErrLaunch, err)
	}
	if l.log, err = os.OpenFile(filepath.Join(l.workDir, "launch.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return fmt.Errorf("%w: %v", ErrLaunch, err)
	}
	for _, r := range probeOrder {
		if spec := ls.Roles[r]; spec != nil {
			l.roles[r] = &managedRole{role: r, spec: spec}
		}
	}
	// Which roles already answer: adopted (READY), restarted (not READY),
	// or an error without launch.adopt.
	state := map[Role]pb.HealthState{}
	answers := map[Role]bool{}
	for _, r := range probeOrder {
		if l.roles[r] == nil {
			continue
		}
		st, err := l.health(ctx, r, time.Second)
		answers[r], state[r] = err == nil, st
		if err == nil && !ls.Adopt {
			return fmt.Errorf("%w: %s already answers at %s (Health %s) before baton started it: stop it, or set launch.adopt: true to use it", ErrLaunch, r, l.cfg.Endpoints[r], st)
		}
	}
	adopted := 0
	for _, r := range probeOrder {
		if answers[r] && state[r] == pb.HealthState_HEALTH_STATE_READY {
			adopted++
		}
	}
	if err := l.prepareCacheDir(adopted > 0); err != nil {
		return err
	}
	// Start every role that does not answer, then wait for them together.
	var started []Role
	for _, r := range probeOrder {
		m := l.roles[r]
		if m == nil {
			continue
		}
		switch {
		case answers[r] && state[r] == pb.HealthState_HEALTH_STATE_READY:
			m.adopted = true
			m.instance = l.instanceID(ctx, r)
			l.say("launch: %s adopted: it already answers READY at %s (instance %s)", r, l.cfg.Endpoints[r], orUnknown(m.instance))
		case answers[r]:
			m.adopted = true
			l.say("launch: %s answers %s at %s: restarting it", r, state[r], l.cfg.Endpoints[r])
			if err := l.restart(ctx, m); err != nil {
				return err
			}
		default:
			if err := l.start(m, m.spec.Start); err != nil {
				return err
			}
			started = append(started, r)
		}
	}
	for _, r := range started {
		m := l.roles[r]
		began := time.Now()
		if err := l.waitReady(ctx, m, ""); err != nil {
			return err
		}
		l.say("launch: %s ready at %s in %v (instance %s)", r, l.cfg.Endpoints[r], time.Since(began).Round(time.Millisecond), orUnknown(m.instance))
	}
	return nil
}

// prepareCacheDir creates ${CACHE_DIR}; a run that adopts no role starts
// it empty (an adopted instance may be using it).
func (l *Launched) prepareCacheDir(adopting bool) error {
	dir := l.cacheDir()
	if !adopting {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("%w: empty ${CACHE_DIR} %s: %v", ErrLaunch, dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: ${CACHE_DIR}: %v", ErrLaunch, err)
	}
	return nil
}

func (l *Launched) cacheDir() string { return filepath.Join(l.workDir, "cache") }

// vars are the ${NAME}s of one command of m, for its current start.
func (l *Launched) vars(m *managedRole) map[string]string {
	addr := l.cfg.Endpoints[m.role]
	host, port, _ := net.SplitHostPort(addr)
	v := map[string]string{
		"ROLE": string(m.role), "ADDR": addr, "HOST": host, "PORT": port,
		"CACHE_DIR": l.cacheDir(), "WORK_DIR": l.workDir, "START": strconv.Itoa(m.starts),
		"INSTANCE_DIR": filepath.Join(l.workDir, fmt.Sprintf("%s.%d", m.role, m.starts)),
	}
	for name, r := range launchEndpointVars {
		if a := l.cfg.Endpoints[r]; a != "" {
			v[name] = a
		}
	}
	if l.proxy != nil {
		v["FAULT_PROXY"] = l.proxy.Addr()
	}
	return v
}

// command builds the exec.Cmd of c for role m (variables expanded,
// environment added, run in launch.dir, in its own process group).
func (l *Launched) command(ctx context.Context, m *managedRole, c LaunchCommand) (*exec.Cmd, error) {
	vars := l.vars(m)
	var argv []string
	if c.Shell != "" {
		s, err := expandLaunch(c.Shell, vars)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrLaunch, m.role, err)
		}
		argv = []string{"/bin/sh", "-c", s}
	} else {
		for _, a := range c.Argv {
			s, err := expandLaunch(a, vars)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrLaunch, m.role, err)
			}
			argv = append(argv, s)
		}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = l.dir
	cmd.Env = os.Environ()
	for _, env := range []map[string]string{l.cfg.Launch.Env, m.spec.Env} {
		for k, raw := range env {
			v, err := expandLaunch(raw, vars)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: env %s: %v", ErrLaunch, m.role, k, err)
			}
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	setProcessGroup(cmd, !l.leftRunning(m))
	return cmd, nil
}

// procOf is m's process while baton's instance runs (nil: none).
func (l *Launched) procOf(m *managedRole) *launchedProcess {
	l.mu.Lock()
	defer l.mu.Unlock()
	return m.proc
}

// leftRunning reports whether Close leaves m's instance running: it was
// adopted, or launch.leave_running.
func (l *Launched) leftRunning(m *managedRole) bool {
	return m.adopted || (l.cfg.Launch != nil && l.cfg.Launch.LeaveRunning)
}

// start runs c as the role's next instance; its output goes to
// <work_dir>/<role>.<n>.log.
func (l *Launched) start(m *managedRole, c LaunchCommand) error {
	l.mu.Lock()
	m.starts++
	l.mu.Unlock()
	if err := os.MkdirAll(l.vars(m)["INSTANCE_DIR"], 0o755); err != nil {
		return fmt.Errorf("%w: ${INSTANCE_DIR}: %v", ErrLaunch, err)
	}
	cmd, err := l.command(context.Background(), m, c) // an instance outlives the call that started it
	if err != nil {
		return err
	}
	logPath := filepath.Join(l.workDir, fmt.Sprintf("%s.%d.log", m.role, m.starts))
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrLaunch, err)
	}
	fmt.Fprintf(logFile, "# baton launch: %s start %d at %s: %s\n", m.role, m.starts, time.Now().UTC().Format(time.RFC3339), strings.Join(cmd.Args, " "))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("%w: start %s (%s): %v", ErrLaunch, m.role, c, err)
	}
	p := &launchedProcess{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	l.mu.Lock()
	m.proc = p
	l.mu.Unlock()
	l.mu.Lock()
	running := l.running
	l.mu.Unlock()
	if running {
		l.logf("launch: %s started (pid %d), log %s", m.role, cmd.Process.Pid, logPath) // a restart during the run: the launch log only
	} else {
		l.say("launch: %s started (pid %d), log %s", m.role, cmd.Process.Pid, logPath)
	}
	return nil
}

// waitReady waits until m's instance is ready (its ready command exits 0,
// else Health READY) with an instance id other than old (when both are
// known), within launch.start_timeout.
func (l *Launched) waitReady(ctx context.Context, m *managedRole, old string) error {
	timeout := l.cfg.Launch.StartTimeout
	if timeout <= 0 {
		timeout = DefaultLaunchStartTimeout
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	last := "no answer yet"
	for {
		p := l.procOf(m)
		if p != nil {
			select {
			case <-p.exited:
				if p.err != nil {
					return fmt.Errorf("%w: %s exited before it was ready (%v); log %s:\n%s", ErrLaunch, m.role, p.err, p.logPath, logTail(p.logPath))
				}
				// A launcher that left the instance running elsewhere.
				l.mu.Lock()
				m.proc = nil
				l.mu.Unlock()
			default:
			}
		}
		ready, why := l.probeReady(ctx, m)
		if ready {
			id := l.instanceID(ctx, m.role)
			if old == "" || id == "" || id != old {
				l.mu.Lock()
				m.instance = id
				l.mu.Unlock()
				return nil
			}
			why = fmt.Sprintf("still the old instance %s", old)
		}
		last = why
		if time.Now().After(deadline) {
			logPath := ""
			if p != nil {
				logPath = p.logPath
			}
			return fmt.Errorf("%w: %s not ready within %v (launch.start_timeout; last: %s)%s", ErrLaunch, m.role, timeout, last, logHint(logPath))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: %v", ErrLaunch, m.role, ctx.Err())
		case <-tick.C:
		}
	}
}

// probeReady runs m's ready probe once.
func (l *Launched) probeReady(ctx context.Context, m *managedRole) (bool, string) {
	if !m.spec.Ready.IsZero() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cmd, err := l.command(cctx, m, m.spec.Ready)
		if err != nil {
			return false, err.Error()
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return false, fmt.Sprintf("ready command %s: %v %s", m.spec.Ready, err, strings.TrimSpace(lastLine(out.String())))
		}
		return true, ""
	}
	st, err := l.health(ctx, m.role, 2*time.Second)
	switch {
	case err != nil:
		return false, "Health = " + status.Code(err).String()
	case st != pb.HealthState_HEALTH_STATE_READY:
		return false, "Health = " + st.String()
	}
	return true, ""
}

// health asks role's endpoint for its Health state, within timeout.
func (l *Launched) health(ctx context.Context, role Role, timeout time.Duration) (pb.HealthState, error) {
	e := l.engines[role]
	e.conn.ResetConnectBackoff()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h, err := e.Health(cctx)
	if err != nil {
		return 0, err
	}
	return h.GetState(), nil
}

// instanceID is the role's ServerInfo.instance_id, "" when it does not say.
func (l *Launched) instanceID(ctx context.Context, role Role) string {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := l.engines[role].GetServerInfo(cctx)
	if err != nil {
		return ""
	}
	return info.GetInstanceId()
}

// Restart implements Restarter: it replaces role's instance with a fresh
// one (launch.roles.<role>.restart, else stop and start) and waits until
// it is ready with a new instance id. The fault proxy, if any, reconnects
// to a restarted producer. Errors wrap ErrLaunch: a role the launch
// section does not manage; a stop or start that failed.
func (l *Launched) Restart(ctx context.Context, role Role) error {
	m := l.roles[role]
	if m == nil {
		return fmt.Errorf("%w: the profile's launch section has no commands for %s, so baton cannot restart it (add launch.roles.%s)", ErrLaunch, role, role)
	}
	return l.restart(ctx, m)
}

func (l *Launched) restart(ctx context.Context, m *managedRole) error {
	m.op.Lock()
	defer m.op.Unlock()
	began := time.Now()
	l.mu.Lock()
	old := m.instance
	l.mu.Unlock()
	if !m.spec.Restart.IsZero() {
		l.mu.Lock()
		if m.proc != nil {
			l.retired = append(l.retired, m.proc) // the restart command replaces it
			m.proc = nil
		}
		l.mu.Unlock()
		if err := l.start(m, m.spec.Restart); err != nil {
			return err
		}
	} else {
		if err := l.stop(ctx, m); err != nil {
			return err
		}
		if err := l.start(m, m.spec.Start); err != nil {
			return err
		}
	}
	return l.readyAgain(ctx, m, old, began, "restarted")
}

// readyAgain waits until m's new instance is ready with an instance id
// other than old, points the fault proxy, if any, at a new producer, and
// logs how long the replacement (what) took since began.
func (l *Launched) readyAgain(ctx context.Context, m *managedRole, old string, began time.Time, what string) error {
	if err := l.waitReady(ctx, m, old); err != nil {
		return err
	}
	if m.role == RoleProducer && l.proxy != nil {
		upstream := l.cfg.Endpoints[RoleProducer]
		if a := l.cfg.FaultProxyAt; a != nil && a.ProducerControl != "" {
			upstream = a.ProducerControl
		}
		if err := l.proxy.SetUpstream(upstream); err != nil {
			return err
		}
	}
	l.logf("launch: %s %s in %v (instance %s -> %s)", m.role, what, time.Since(began).Round(time.Millisecond), orUnknown(old), orUnknown(m.instance))
	return nil
}

// crashGoneBound bounds the wait, after the SIGKILL of Crash, for the
// killed instance to stop answering at its endpoint (the kernel closes
// its listener as it reaps the process: milliseconds).
const crashGoneBound = 5 * time.Second

// Crash implements Crasher: it kills the process group of role's
// instance with SIGKILL (no drain, no cleanup: its connections close as
// the kernel reaps it), waits until its endpoint no longer answers as that
// instance, then starts the role again (launch.roles.<role>.start) and
// waits until it is ready with a new instance id; the fault proxy, if any,
// reconnects to a crashed producer's successor. Errors wrap ErrLaunch: a
// role the launch section does not manage, a start that failed; and
// ErrCannotCrash as well when baton holds no process of the running
// instance (adopted, or left running elsewhere by its launcher) or the
// instance still answers after its process group was killed (a launcher
// whose instance is not in its process group, as `docker run` is not).
func (l *Launched) Crash(ctx context.Context, role Role) error {
	m := l.roles[role]
	if m == nil {
		return fmt.Errorf("%w: %w: the profile's launch section has no commands for %s, so baton cannot kill or start it", ErrLaunch, ErrCannotCrash, role)
	}
	m.op.Lock()
	defer m.op.Unlock()
	began := time.Now()
	p := l.procOf(m)
	l.mu.Lock()
	old := m.instance
	l.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%w: %w: baton did not start the %s instance running now (adopted, or its launcher left it running elsewhere): there is no process of it to kill", ErrLaunch, ErrCannotCrash, role)
	}
	signalGroup(p.cmd, sigKill)
	<-p.exited
	l.mu.Lock()
	m.proc = nil
	l.mu.Unlock()
	l.logf("launch: %s killed with SIGKILL: %s", role, exitText(p.err))
	for deadline := time.Now().Add(crashGoneBound); ; {
		if id := l.instanceID(ctx, role); id == "" || id != old {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %w: %s still answers as instance %s at %s %v after its process group was killed: the instance is not in the process group baton started", ErrLaunch, ErrCannotCrash, role, old, l.cfg.Endpoints[role], crashGoneBound)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: crash %s: %v", ErrLaunch, role, ctx.Err())
		case <-time.After(readyPoll):
		}
	}
	if err := l.start(m, m.spec.Start); err != nil {
		return err
	}
	return l.readyAgain(ctx, m, old, began, "killed and started again")
}

// stop ends m's instance: its stop command, else Shutdown with its
// instance id; then waits for it to be gone (its process exited, or its
// endpoint no longer answers), and after launch.stop_timeout sends SIGTERM,
// then SIGKILL, to what baton started.
func (l *Launched) stop(ctx context.Context, m *managedRole) error {
	timeout := l.cfg.Launch.StopTimeout
	if timeout <= 0 {
		timeout = DefaultLaunchStopTimeout
	}
	deadline := time.Now().Add(timeout)
	if !m.spec.Stop.IsZero() {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		cmd, err := l.command(cctx, m, m.spec.Stop)
		if err != nil {
			cancel()
			return err
		}
		out, err := cmd.CombinedOutput()
		cancel()
		l.logf("launch: %s stop command %s: %v %s", m.role, m.spec.Stop, errText(err), strings.TrimSpace(lastLine(string(out))))
		if err != nil {
			return fmt.Errorf("%w: stop %s (%s): %v: %s", ErrLaunch, m.role, m.spec.Stop, err, strings.TrimSpace(string(out)))
		}
	} else {
		l.shutdown(ctx, m)
	}
	p := l.procOf(m)
	if p != nil {
		select {
		case <-p.exited:
		case <-time.After(time.Until(deadline)):
			l.logf("launch: %s did not exit within %v of its stop: SIGTERM", m.role, timeout)
			signalGroup(p.cmd, sigTerm)
			select {
			case <-p.exited:
			case <-time.After(5 * time.Second):
				signalGroup(p.cmd, sigKill)
				<-p.exited
			}
		}
		l.mu.Lock()
		m.proc = nil
		l.mu.Unlock()
		l.logf("launch: %s exited: %s", m.role, exitText(p.err))
		// A process group may leave children (a shell's): they are gone
		// with the group, or answer below.
	}
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		if _, err := l.health(ctx, m.role, time.Second); err != nil && status.Code(err) == codes.Unavailable {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s still answers at %s %v after its stop (launch.stop_timeout)", ErrLaunch, m.role, l.cfg.Endpoints[m.role], timeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: stop %s: %v", ErrLaunch, m.role, ctx.Err())
		case <-tick.C:
		}
	}
}

// shutdown sends Shutdown(expected_instance_id) to m's instance, if it
// answers (CONTRACT S-1: the same path as SIGTERM).
func (l *Launched) shutdown(ctx context.Context, m *managedRole) {
	l.mu.Lock()
	id := m.instance
	l.mu.Unlock()
	if id == "" {
		id = l.instanceID(ctx, m.role)
	}
	if id == "" {
		return // gone already, or it does not say who it is
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := l.engines[m.role].Shutdown(cctx, &pb.ShutdownRequest{ExpectedInstanceId: id, DrainTimeoutMs: proto.Uint32(uint32((5 * time.Second).Milliseconds()))})
	l.logf("launch: %s Shutdown(%s) = %s", m.role, id, shutdownText(resp, err))
}

// Close ends the run (LaunchTarget): roles baton started are stopped (Shutdown
// first) unless launch.leave_running; adopted roles, and with
// leave_running every role, are left running, restarted if a case left
// them down. Then it stops the fault proxy and closes every connection.
// It returns every role it could not stop or bring back (ErrLaunch).
func (l *Launched) Close(ctx context.Context) error {
	var errs []error
	for i := len(probeOrder) - 1; i >= 0; i-- {
		m := l.roles[probeOrder[i]]
		if m == nil {
			continue
		}
		if l.leftRunning(m) {
			if ready, why := l.probeReady(ctx, m); !ready {
				l.say("launch: %s is not ready at the end (%s): restarting it so it is left running", m.role, why)
				if err := l.restart(ctx, m); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		m.op.Lock()
		p := l.procOf(m)
		err := l.stop(ctx, m)
		m.op.Unlock()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if p != nil {
			l.say("launch: %s stopped: %s", m.role, exitText(p.err))
		} else {
			l.say("launch: %s stopped", m.role)
		}
	}
	l.waitRetired()
	l.release(true)
	return errors.Join(errs...)
}

// abort undoes a failed LaunchTarget: it kills what it started and closes
// what it opened.
func (l *Launched) abort() { l.release(false) }

// release kills what baton started (but, at the end of a run, not the
// instances Close leaves running) and closes what LaunchTarget opened.
func (l *Launched) release(atEnd bool) {
	l.mu.Lock()
	var procs []*launchedProcess
	for _, m := range l.roles {
		if m.proc != nil && !(atEnd && l.leftRunning(m)) {
			procs = append(procs, m.proc)
		}
	}
	l.mu.Unlock()
	for _, p := range procs {
		select {
		case <-p.exited:
		default:
			signalGroup(p.cmd, sigKill)
			<-p.exited
		}
	}
	if l.proxy != nil {
		l.proxy.Close()
		l.proxy = nil
	}
	for _, c := range l.closers {
		_ = c()
	}
	l.closers = nil
	if l.log != nil {
		l.log.Close()
		l.log = nil
	}
	if l.tmpWork {
		os.RemoveAll(l.workDir)
	}
}

// waitRetired waits for the processes a restart command replaced, killing
// those that outlive launch.stop_timeout.
func (l *Launched) waitRetired() {
	l.mu.Lock()
	retired := l.retired
	l.retired = nil
	l.mu.Unlock()
	timeout := DefaultLaunchStopTimeout
	if l.cfg.Launch != nil && l.cfg.Launch.StopTimeout > 0 {
		timeout = l.cfg.Launch.StopTimeout
	}
	for _, p := range retired {
		select {
		case <-p.exited:
		case <-time.After(timeout):
			signalGroup(p.cmd, sigKill)
			<-p.exited
		}
	}
}

// Profile implements Target: the profile, with Restarts set when the
// launch section can restart roles.
func (l *Launched) Profile() Profile {
	p := l.cfg.Profile
	p.Restarts = l.cfg.Launch != nil
	return p
}

// Engine implements Target.
func (l *Launched) Engine(role Role) (Engine, bool) {
	e, ok := l.engines[role]
	if !ok {
		return nil, false
	}
	return e, true
}

// Target is what the suite sees: l, implementing Restarter and Crasher
// when the profile has a launch section, and FaultInjector and
// ConnectionRefuser (ProxyFaults) when the fault proxy runs.
func (l *Launched) Target() Target {
	base := launchedTarget{l}
	restarts, faults := l.cfg.Launch != nil, l.proxy != nil
	switch {
	case restarts && faults:
		return struct {
			launchedTarget
			Restarter
			Crasher
			ProxyFaults
		}{base, l, l, ProxyFaults{Proxy: l.proxy}}
	case restarts:
		return struct {
			launchedTarget
			Restarter
			Crasher
		}{base, l, l}
	case faults:
		return struct {
			launchedTarget
			ProxyFaults
		}{base, ProxyFaults{Proxy: l.proxy}}
	}
	return base
}

// launchedTarget is the plain Target of a Launched.
type launchedTarget struct{ l *Launched }

// Profile is the Launched's Profile.
func (t launchedTarget) Profile() Profile { return t.l.Profile() }

// Engine is the Launched's engine of role; false when the launch has none.
func (t launchedTarget) Engine(role Role) (Engine, bool) { return t.l.Engine(role) }

// say prints a line to Out and the launch log.
func (l *Launched) say(format string, args ...any) {
	fmt.Fprintf(l.opts.Out, format+"\n", args...)
	l.logf(format, args...)
}

// logf appends a line to <work_dir>/launch.log.
func (l *Launched) logf(format string, args ...any) {
	l.logMu.Lock()
	defer l.logMu.Unlock()
	if l.log != nil {
		fmt.Fprintf(l.log, "%s %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func exitText(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &ee):
		return ee.String()
	}
	return err.Error()
}

func shutdownText(resp *pb.ShutdownResponse, err error) string {
	if err != nil {
		return "code " + status.Code(err).String()
	}
	return resp.GetStatus().String()
}

func logHint(path string) string {
	if path == "" {
		return ""
	}
	return fmt.Sprintf("; log %s:\n%s", path, logTail(path))
}

// logTail is the last 20 lines of a log file.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
