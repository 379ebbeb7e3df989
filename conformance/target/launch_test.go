package target

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
)

// fakeProfile is a profile whose launch section starts this test binary as
// the fake engine (fakeengine_test.go) for producer and consumer, with the
// start command of each role as given (extra YAML appended).
func fakeProfile(t *testing.T, producer, consumer, extra string) Config {
	t.Helper()
	text := `name: fake
endpoints: {producer: ` + freeAddr(t) + `, consumer: ` + freeAddr(t) + `}
destructive: true
launch:
  work_dir: ` + t.TempDir() + `
  start_timeout: 20s
  stop_timeout: 10s
  env: {` + fakeEngineEnv + `: "${ADDR}"}
  roles:
    producer:
      start: ` + producer + `
    consumer:
      start: ` + consumer + `
` + extra
	c, err := ParseConfig([]byte(text))
	if err != nil {
		t.Fatalf("ParseConfig:\n%s\n%v", text, err)
	}
	return c
}

// fakeArgv is the argv list that runs the fake engine.
func fakeArgv() string { return `["` + os.Args[0] + `", "-test.run=^$"]` }

func launchFake(t *testing.T, cfg Config) (*Launched, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := LaunchTarget(ctx, cfg, LaunchOptions{Out: &out})
	t.Cleanup(func() { shutDownEndpoints(t, cfg) }) // what Close leaves running (adopted roles), or a failed test left
	if err != nil {
		t.Fatalf("LaunchTarget = %v\n%s", err, out.String())
	}
	return l, &out
}

// shutDownEndpoints sends Shutdown to whatever instance answers at cfg's
// endpoints and waits until each stops answering, so no fake engine a
// test started outlives it.
func shutDownEndpoints(t *testing.T, cfg Config) {
	t.Helper()
	for _, addr := range cfg.Endpoints {
		e, err := DialEngine(addr, withFastReconnect())
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if info, err := e.GetServerInfo(ctx); err == nil {
			_, _ = e.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: info.GetInstanceId()})
			for ctx.Err() == nil {
				if _, err := e.Health(ctx); err != nil {
					break
				}
			}
		}
		cancel()
		e.Close()
	}
}

func serverID(t *testing.T, e Engine) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := e.GetServerInfo(ctx)
	if err != nil {
		t.Fatalf("GetServerInfo = %v", err)
	}
	return info.GetInstanceId()
}

// TestLaunchStartsRestartsAndStops: an argv and a shell-string start
// command each start a role (not a baton binary: this test binary as a
// fake engine); Restart replaces the instance (new instance id, same
// endpoint); Close stops both through Shutdown, and every process's log is
// in the work directory.
func TestLaunchStartsRestartsAndStops(t *testing.T) {
	cfg := fakeProfile(t, fakeArgv(), `"exec '`+os.Args[0]+`' -test.run='^$' # ${ROLE} on ${PORT}"`, "")
	l, out := launchFake(t, cfg)
	tg := l.Target()
	if _, ok := tg.(Restarter); !ok {
		t.Fatalf("Target() of a profile with launch is no Restarter")
	}
	if _, ok := tg.(FaultInjector); ok {
		t.Errorf("Target() without a fault proxy is a FaultInjector")
	}
	if !tg.Profile().Restarts {
		t.Errorf("Profile().Restarts = false with a launch section")
	}
	cons, _ := tg.Engine(RoleConsumer)
	before := serverID(t, cons)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tg.(Restarter).Restart(ctx, RoleConsumer); err != nil {
		t.Fatalf("Restart(consumer) = %v", err)
	}
	after := serverID(t, cons) // the same Engine reaches the new instance
	if after == before || after == "" {
		t.Errorf("instance after Restart = %q, before %q; want a new one", after, before)
	}
	if err := tg.(Restarter).Restart(ctx, RoleBaseline); !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "launch.roles.baseline") {
		t.Errorf("Restart(baseline) = %v; want ErrLaunch naming launch.roles.baseline", err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close = %v\n%s", err, out.String())
	}
	for _, want := range []string{"producer started", "consumer ready", "consumer stopped: exit status 0", "producer stopped: exit status 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, f := range []string{"producer.1.log", "consumer.1.log", "consumer.2.log", "launch.log"} {
		if _, err := os.Stat(filepath.Join(cfg.Launch.WorkDir, f)); err != nil {
			t.Errorf("work directory lacks %s: %v", f, err)
		}
	}
	log, _ := os.ReadFile(filepath.Join(cfg.Launch.WorkDir, "consumer.1.log"))
	if !strings.Contains(string(log), "# consumer on "+strings.Split(cfg.Endpoints[RoleConsumer], ":")[1]) {
		t.Errorf("consumer.1.log does not show the expanded shell command:\n%s", log)
	}
	if _, err := l.health(ctx, RoleProducer, time.Second); err == nil {
		t.Errorf("the producer still answers after Close")
	}
}

// TestLaunchCrash: Crash kills a started role's process group with
// SIGKILL (no Shutdown: the launch log shows the signal) and starts a
// fresh instance at the same endpoint (CONTRACT Q-6's killed peer); an
// adopted role, whose process baton does not hold, and a role without
// launch commands are ErrCannotCrash and keep their instance.
func TestLaunchCrash(t *testing.T) {
	addr, running := startFakeInProcess(t, false)
	cfg := fakeProfile(t, fakeArgv(), fakeArgv(), "")
	cfg.Endpoints[RoleProducer] = addr
	cfg.Launch.Adopt = true
	l, _ := launchFake(t, cfg)
	crasher, ok := l.Target().(Crasher)
	if !ok {
		t.Fatalf("Target() of a profile with launch is no Crasher")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cons, _ := l.Engine(RoleConsumer)
	before := serverID(t, cons)
	if err := crasher.Crash(ctx, RoleConsumer); err != nil {
		t.Fatalf("Crash(consumer) = %v", err)
	}
	if after := serverID(t, cons); after == before || after == "" {
		t.Errorf("instance after Crash = %q, before %q; want a new one", after, before)
	}
	log, _ := os.ReadFile(filepath.Join(cfg.Launch.WorkDir, "launch.log"))
	if !strings.Contains(string(log), "consumer killed with SIGKILL: signal: killed") || strings.Contains(string(log), "consumer Shutdown(") {
		t.Errorf("launch.log does not show the consumer killed by SIGKILL without a Shutdown:\n%s", log)
	}
	if err := crasher.Crash(ctx, RoleProducer); !errors.Is(err, ErrCannotCrash) || !errors.Is(err, ErrLaunch) {
		t.Errorf("Crash(adopted producer) = %v; want ErrCannotCrash", err)
	}
	select {
	case <-running.shut:
		t.Errorf("Crash of the adopted producer shut it down; want it left alone")
	default:
	}
	prod, _ := l.Engine(RoleProducer)
	if id := serverID(t, prod); id != running.id {
		t.Errorf("the producer answers as %q after a refused Crash; want the adopted %q", id, running.id)
	}
	if err := crasher.Crash(ctx, RoleBaseline); !errors.Is(err, ErrCannotCrash) {
		t.Errorf("Crash(baseline) = %v; want ErrCannotCrash (no launch commands)", err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close = %v", err)
	}
}

// TestLaunchAdoptsRunningInstances: with adopt, a READY instance baton did
// not start is kept (not started), restarted with the start command when
// asked (Shutdown stops the old one), and left running by Close; without
// adopt it is an error naming the fix.
func TestLaunchAdoptsRunningInstances(t *testing.T) {
	addr, running := startFakeInProcess(t, false)
	cfg := fakeProfile(t, fakeArgv(), fakeArgv(), "")
	cfg.Endpoints[RoleProducer] = addr

	if _, err := LaunchTarget(context.Background(), cfg, LaunchOptions{}); !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "launch.adopt") {
		t.Fatalf("LaunchTarget with a running producer and no adopt = %v; want ErrLaunch naming launch.adopt", err)
	}

	cfg.Launch.Adopt = true
	l, out := launchFake(t, cfg)
	if !strings.Contains(out.String(), "producer adopted") || strings.Contains(out.String(), "producer started") {
		t.Errorf("the running producer was not adopted:\n%s", out.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Restart(ctx, RoleProducer); err != nil {
		t.Fatalf("Restart(adopted producer) = %v", err)
	}
	select {
	case <-running.shut:
	default:
		t.Errorf("the adopted instance was not shut down by the restart")
	}
	prod, _ := l.Engine(RoleProducer)
	id := serverID(t, prod)
	if id == running.id {
		t.Errorf("the producer is still the adopted instance after Restart")
	}
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close = %v", err)
	}
	// Adopted roles are left running: the replacement still answers.
	e, err := DialEngine(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := serverID(t, e); got != id {
		t.Errorf("after Close the producer answers as %q; want the replacement %q left running", got, id)
	}
	if _, err := e.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: id}); err != nil {
		t.Errorf("Shutdown(replacement) = %v", err)
	}
}

// TestLaunchRestartsAdoptedRoleThatIsNotReady: an adopted role that
// answers but is not READY (poisoned, X-1) is restarted at the start.
func TestLaunchRestartsAdoptedRoleThatIsNotReady(t *testing.T) {
	addr, poisoned := startFakeInProcess(t, true)
	cfg := fakeProfile(t, fakeArgv(), fakeArgv(), "")
	cfg.Endpoints[RoleConsumer] = addr
	cfg.Launch.Adopt = true
	l, out := launchFake(t, cfg)
	defer l.Close(context.Background())
	if !strings.Contains(out.String(), "consumer answers HEALTH_STATE_NOT_READY") {
		t.Errorf("output lacks the restart of the NOT_READY consumer:\n%s", out.String())
	}
	select {
	case <-poisoned.shut:
	default:
		t.Errorf("the NOT_READY instance was not shut down")
	}
}

// TestLaunchFailures: a start command that exits non-zero, one that never
// gets ready and a ready command that never succeeds are errors naming the
// role and showing the log; nothing is left running.
func TestLaunchFailures(t *testing.T) {
	tests := []struct {
		name, consumer, ready, want string
	}{
		{"exits non-zero", `"echo cannot bind >&2; exit 3"`, "", "cannot bind"},
		{"never ready", `"exec sleep 60"`, "", "not ready within"},
		{"ready command fails", fakeArgv(), "echo not yet; exit 1", "ready command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fakeProfile(t, fakeArgv(), tt.consumer, "")
			if tt.ready != "" {
				cfg.Launch.Roles[RoleConsumer].Ready = LaunchCommand{Shell: tt.ready}
			}
			cfg.Launch.StartTimeout = 5 * time.Second // the producer that does start must get ready within it on a loaded 2-core machine (500 ms failed under CI-like load)
			var out bytes.Buffer
			l, err := LaunchTarget(context.Background(), cfg, LaunchOptions{Out: &out})
			if err == nil {
				l.Close(context.Background())
				t.Fatalf("LaunchTarget = nil; want an error with %q", tt.want)
			}
			if !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "consumer") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LaunchTarget = %v; want ErrLaunch naming the consumer and %q", err, tt.want)
			}
			// The producer that did start was killed.
			e, _ := DialEngine(cfg.Endpoints[RoleProducer])
			defer e.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if _, err := e.Health(ctx); err == nil {
				t.Errorf("the producer still answers after a failed launch")
			}
		})
	}
}

// TestLaunchDetachedLauncher: a start command that leaves the engine
// running and exits 0 (docker run -d, systemctl start) is waited for, and
// the engine is stopped through Shutdown at the end.
func TestLaunchDetachedLauncher(t *testing.T) {
	detach := `"'` + os.Args[0] + `' -test.run='^$' > ${INSTANCE_DIR}/engine.log 2>&1 &"`
	cfg := fakeProfile(t, fakeArgv(), detach, "")
	l, out := launchFake(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Restart(ctx, RoleConsumer); err != nil {
		t.Fatalf("Restart(detached consumer) = %v", err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close = %v\n%s", err, out.String())
	}
	if _, err := l.health(ctx, RoleConsumer, time.Second); err == nil {
		t.Errorf("the detached consumer still answers after Close")
	}
	if _, err := os.Stat(filepath.Join(cfg.Launch.WorkDir, "consumer.2", "engine.log")); err != nil {
		t.Errorf("${INSTANCE_DIR} of the second start: %v", err)
	}
}

// TestLaunchFaultProxy: fault_proxy {listen} runs the proxy for engines
// baton did not start; the target injects faults through it and forwards
// to the producer; ${FAULT_PROXY} names it to launch commands.
func TestLaunchFaultProxy(t *testing.T) {
	prod, _ := startFakeInProcess(t, false)
	listen := freeAddr(t)
	cfg, err := ParseConfig([]byte("name: p\nendpoints: {producer: " + prod + ", consumer: " + freeAddr(t) + "}\nfault_proxy: {listen: " + listen + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.FaultProxy || cfg.FaultProxyAt.Listen != listen || cfg.Restarts {
		t.Fatalf("config = %+v; want fault_proxy on at %s and no restarts", cfg.Profile, listen)
	}
	l, out := launchFake(t, cfg)
	defer l.Close(context.Background())
	tg := l.Target()
	fi, ok := tg.(FaultInjector)
	if !ok {
		t.Fatalf("Target() with fault_proxy {listen} is no FaultInjector")
	}
	if _, ok := tg.(Restarter); ok {
		t.Errorf("Target() without launch is a Restarter")
	}
	if l.FaultProxyAddr() != listen || !strings.Contains(out.String(), "fault proxy listens on "+listen) {
		t.Errorf("proxy at %q; output:\n%s", l.FaultProxyAddr(), out.String())
	}
	// A control call through the proxy reaches the producer.
	via, err := DialEngine(listen)
	if err != nil {
		t.Fatal(err)
	}
	defer via.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fi.SetTransferFaults("/openengine.v1.Control/GetServerInfo", 0, FaultUnavailable); err != nil {
		t.Fatal(err)
	}
	if _, err := via.GetServerInfo(ctx); err == nil {
		t.Errorf("GetServerInfo through the proxy with FaultUnavailable = nil; want UNAVAILABLE")
	}
	if _, err := via.GetServerInfo(ctx); err != nil {
		t.Errorf("the second GetServerInfo through the proxy = %v; want the producer's answer", err)
	}
	calls, err := fi.TransferCalls(ctx, "/openengine.v1.Control/GetServerInfo", 2)
	if err != nil || len(calls) != 2 || calls[0].Fault != FaultUnavailable || !calls[1].UpstreamReached {
		t.Errorf("TransferCalls = %+v, %v; want the faulted call, then one that reached the producer", calls, err)
	}
}

// TestLaunchFaultProxyVariable: fault_proxy: true with a launch section
// runs the proxy on a free port and passes it as ${FAULT_PROXY}.
func TestLaunchFaultProxyVariable(t *testing.T) {
	cfg := fakeProfile(t, fakeArgv(), `"echo advertise ${FAULT_PROXY}; exec '`+os.Args[0]+`' -test.run='^$'"`, "fault_proxy: true\n")
	l, _ := launchFake(t, cfg)
	defer l.Close(context.Background())
	if l.FaultProxyAddr() == "" {
		t.Fatal("no fault proxy runs for fault_proxy: true with launch")
	}
	log, _ := os.ReadFile(filepath.Join(cfg.Launch.WorkDir, "consumer.1.log"))
	if !strings.Contains(string(log), "advertise "+l.FaultProxyAddr()) {
		t.Errorf("consumer.1.log lacks ${FAULT_PROXY} = %s:\n%s", l.FaultProxyAddr(), log)
	}
}
