// Package launch starts reference-engine processes (`baton serve`) on
// loopback ports for the demo, the end-to-end tests and the mutant table,
// waits until they are READY, describes them as a target profile, and shuts
// them down through Shutdown (CONTRACT S-1), checking they exit 0 and leave
// nothing in the cache directory (S-4).
package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/conformance/faultproxy"
	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Options say how to start a topology.
type Options struct {
	// Binary is the path of the baton binary.
	Binary string
	// Preset is the encoder preset ("tiny" in tests, "base" for the demo).
	Preset string
	// WorkDir holds the cache directory, ready files and logs (created if missing).
	WorkDir string
	// Mutant names a deliberately broken engine (conformance/mutants) for every process; "" for none.
	Mutant string
	// ProducerQuotaBytes is the producer's L-5 bound (0 = the engine default).
	ProducerQuotaBytes int64
	// DecodeBudgetBytes is the encoder's and the baseline's
	// --decode-budget-bytes (CONTRACT SE-4), started with
	// --max-request-pixels DecodeBudgetBytes/8 (the engine wants a budget
	// that holds one request of the largest size), and declared in Config
	// as decode_budget_bytes. 0: DefaultFaultsDecodeBudgetBytes when a fault
	// proxy runs (the Faults level certifies SE-4, whose decode-budget case
	// needs a declared budget it can fill cheaply), else the engine's
	// default, undeclared.
	DecodeBudgetBytes int64
	// MaxConcurrentDecodes is the encoder's and the baseline's
	// --max-concurrent-decodes (CONTRACT SE-4: the decode slots). 0:
	// DefaultFaultsConcurrentDecodes when a fault proxy runs, else the
	// engine's default (CPUs - 1).
	MaxConcurrentDecodes int
	// Logs receives the processes' logs (nil = files in WorkDir only).
	Logs io.Writer
	// StartTimeout bounds the wait for READY (default 60 s).
	StartTimeout time.Duration
	// Backend is the producer's backend: "shared_dir" (default), "tcp", or
	// "cuda_ipc" (with Device "cuda:N").
	Backend string
	// FaultProxy puts a fault proxy (conformance/faultproxy) in front of the
	// producer's control address, advertised in its references, so the
	// Faults-level cases can break the consumer -> producer transfer calls.
	FaultProxy bool
	// TestHooks starts every engine with --test-hooks.
	TestHooks bool
	// Level is the conformance level Config claims ("core", "lifecycle",
	// "faults"); "" claims "faults" with a fault proxy, else "core".
	// Claiming "lifecycle" or "faults" needs TestHooks (CONTRACT section 5).
	Level string
	// TransferTimeout is the engines' --transfer-timeout (default 3 s with a
	// fault proxy, so a dropped reply costs little).
	TransferTimeout time.Duration
	// ServeArgs are more flags for every `baton serve` (e.g. --tp 2,
	// --model-architecture encoder-decoder, --executor-mode sync).
	ServeArgs []string
	// Device is every engine's --device ("" keeps the default, cpu); with
	// "cuda:N" and Backend "cuda_ipc" the consumers accept cuda_ipc.
	Device string
	// Security starts every engine with TLS and client authentication on
	// every listener (a metrics listener included) and an operator token
	// (CONTRACT SE-1, SE-2), with a CA, certificates and the token generated
	// at start under WorkDir/tls (security.go). Config then declares tls
	// (client_auth, the metrics and transfer listeners) and authorization.
	// Not with FaultProxy (the proxy speaks plaintext).
	Security bool
}

// DefaultFaultsDecodeBudgetBytes is Options.DecodeBudgetBytes of a topology
// with a fault proxy: 32 MiB, so requests hold at most 4 megapixels (2048 x
// 2048; every fixture image but the volume cases' 1920x1080 ones is far
// smaller) and the SE-4 case fills the budget with one image decoded in
// about 0.15 s on the CI machines.
const DefaultFaultsDecodeBudgetBytes = 32 << 20

// DefaultFaultsConcurrentDecodes is Options.MaxConcurrentDecodes of a
// topology with a fault proxy: one decode slot, what the engine's default
// (CPUs - 1, at least 1) gives on the 2-core CI machines, pinned so the
// Faults level runs alike on any machine. The kill table's scan mutant
// (se4-no-jpeg-scan-bound) is stalled by the SE-4 scan case's bombs in two
// ways: one bomb reserves the whole DefaultFaultsDecodeBudgetBytes (4
// megapixels at 8 bytes) while it decodes, and, the slot being one, it
// also holds every decode slot; with CPUs - 1 slots and a larger budget a
// 16-core machine would decode the 4 bombs beside the other publishes and
// let the mutant survive. One slot costs the other Faults cases nothing:
// none decodes two images at once on purpose, and a decode waits its turn.
const DefaultFaultsConcurrentDecodes = 1

// decodedBytesPerPixel is what `baton serve` charges the decode budget for
// one pixel (server.DecodedBytesPerPixel).
const decodedBytesPerPixel = 8

// Process is one running `baton serve`.
type Process struct {
	// Role is the process's `baton serve --role`: "encoder", "pd",
	// "prefill", "decode" or "aggregated".
	Role string
	// Address is the gRPC listener's "127.0.0.1:port", read from the
	// process's ready file.
	Address string
	// LogPath is the file that holds the process's stdout and stderr:
	// <WorkDir>/<name>.<start number>.log.
	LogPath  string
	args     []string // the `baton serve` arguments it was started with
	cmd      *exec.Cmd
	exited   chan struct{}
	exitErr  error
	engine   *target.GRPCEngine
	instance string
	// listeners are its other listeners (ServerInfo.extra
	// "baton.listeners.*"): kind -> host:port.
	listeners map[string]string
}

// Topology is E + PD + a second PD + the aggregated baseline sharing one
// cache directory (StartEPD), or E + P + D + the baseline (StartEPPD).
type Topology struct {
	// Producer is E, Consumer the (first) PD of E+PD (nil for E+P+D),
	// Baseline the aggregated baseline (B-1).
	Producer, Consumer, Baseline *Process
	// Consumer2 is a second PD process of E+PD (endpoints key consumer2):
	// SU-1 races one reference across the two consumer processes.
	Consumer2 *Process
	// Prefill and Decode are P and D of E+P+D (nil for E+PD).
	Prefill, Decode *Process
	// CacheDir is the cache directory the roles share, <WorkDir>/cache; it
	// must be empty after a drain (CONTRACT S-4).
	CacheDir string
	opts     Options
	sec      *security // Options.Security's certificates and token
	proxy    *faultproxy.Proxy
	starts   int
	topology string          // target.TopologyEPPD for StartEPPD; "" is E+PD
	mu       sync.Mutex      // guards the processes' replacement by Restart
	retired  []chan struct{} // closed once an instance Restart replaced has exited
	// ports are the fixed ports of the roles other roles trust (CONTRACT
	// SE-3: trust lists name them, so a restarted instance must come back
	// on the same ones): role -> control and transfer port (0: any).
	ports map[string]rolePorts
	// roles are the names of this topology's processes (processName: the
	// --role, or "pd2" for the second PD).
	roles []string
}

// rolePorts are a role's fixed ports; 0 picks a free one at each start.
type rolePorts struct{ control, transfer int }

// StartEPD starts E, PD, a second PD and an aggregated baseline as four processes.
func StartEPD(ctx context.Context, opts Options) (*Topology, error) {
	if opts.Backend == "" {
		opts.Backend = "shared_dir"
	}
	t := &Topology{opts: opts}
	return t.startAll(ctx, []roleSlot{{"encoder", &t.Producer, ""}, {"pd", &t.Consumer, ""}, {"pd", &t.Consumer2, secondConsumerName}, {"aggregated", &t.Baseline, ""}})
}

// secondConsumerName names the second PD's ready file, logs and ports.
const secondConsumerName = "pd2"

// processName is the name of a process's files and ports: files, or its
// --role when files is "".
func processName(role, files string) string {
	if files != "" {
		return files
	}
	return role
}

// roleOfName is the --role of the process called name (processName).
func roleOfName(name string) string {
	if name == secondConsumerName {
		return "pd"
	}
	return name
}

// roleSlot is one process of a topology: its --role, where it is kept, and
// the name of its files ("" = the role).
type roleSlot struct {
	role string
	dst  **Process
	name string
}

// startAll starts the fault proxy (if asked for) and every role's process,
// waits until each is READY, and points the proxy at the producer. On any
// failure it kills what it started.
func (t *Topology) startAll(ctx context.Context, slots []roleSlot) (*Topology, error) {
	if t.opts.StartTimeout == 0 {
		t.opts.StartTimeout = 60 * time.Second
	}
	if err := os.MkdirAll(t.opts.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	if t.opts.FaultProxy && t.opts.TransferTimeout == 0 {
		t.opts.TransferTimeout = 3 * time.Second
	}
	if t.opts.FaultProxy && t.opts.DecodeBudgetBytes == 0 {
		t.opts.DecodeBudgetBytes = DefaultFaultsDecodeBudgetBytes
	}
	if t.opts.FaultProxy && t.opts.MaxConcurrentDecodes == 0 {
		t.opts.MaxConcurrentDecodes = DefaultFaultsConcurrentDecodes
	}
	t.CacheDir = filepath.Join(t.opts.WorkDir, "cache")
	var err error
	if t.opts.Security {
		if t.opts.FaultProxy {
			return nil, fmt.Errorf("launch: Security with FaultProxy: the fault proxy speaks plaintext")
		}
		if t.sec, err = newSecurity(filepath.Join(t.opts.WorkDir, "tls")); err != nil {
			return nil, err
		}
	}
	if t.opts.FaultProxy {
		t.proxy, err = faultproxy.New("", faultproxy.Options{})
		if err != nil {
			return nil, fmt.Errorf("launch: fault proxy: %w", err)
		}
	}
	for _, p := range slots {
		t.roles = append(t.roles, processName(p.role, p.name))
	}
	for attempt := 1; ; attempt++ {
		err = t.startProcesses(ctx, slots)
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == portAttempts {
			t.Kill()
			return nil, err
		}
		// A port reserved for a role another process took before the role
		// bound it: start every role again on fresh ports.
		t.killProcesses(slots)
	}
	if t.proxy != nil {
		if err := t.proxy.SetUpstream(t.Producer.Address); err != nil {
			t.Kill()
			return nil, err
		}
	}
	return t, nil
}

// portAttempts is how many times startAll starts a topology whose
// reserved port another process took first (errPortTaken).
const portAttempts = 3

// errPortTaken: a role exited before listening because a port reserved for
// it (reservePorts) was taken between the reservation and its bind.
var errPortTaken = errors.New("a reserved port was taken before the role bound it")

// startProcesses reserves the roles' fixed ports, starts every slot's
// process and waits until each is READY.
func (t *Topology) startProcesses(ctx context.Context, slots []roleSlot) error {
	if err := t.reservePorts(); err != nil {
		return err
	}
	for _, p := range slots {
		var err error
		if *p.dst, err = t.startAs(ctx, p.role, p.name); err != nil {
			return err
		}
	}
	for _, p := range t.processes() {
		if err := p.waitReady(ctx, t.opts.StartTimeout); err != nil {
			return err
		}
	}
	return nil
}

// killProcesses kills the slots' processes startProcesses started, and
// forgets them.
func (t *Topology) killProcesses(slots []roleSlot) {
	t.killEach()
	for _, p := range slots {
		*p.dst = nil
	}
}

func (t *Topology) processes() []*Process {
	var ps []*Process
	for _, p := range []*Process{t.Producer, t.Consumer, t.Consumer2, t.Prefill, t.Decode, t.Baseline} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

func (t *Topology) start(ctx context.Context, role string) (*Process, error) {
	return t.startAs(ctx, role, "")
}

// startAs is start with the process's files named name ("" = role).
func (t *Topology) startAs(ctx context.Context, role, name string) (*Process, error) {
	if name == "" {
		name = role
	}
	ready := filepath.Join(t.opts.WorkDir, name+".addr")
	_ = os.Remove(ready)
	t.starts++
	logPath := filepath.Join(t.opts.WorkDir, fmt.Sprintf("%s.%d.log", name, t.starts))
	ports := t.ports[name]
	args := []string{"serve", "--role", role, "--listen", fmt.Sprintf("127.0.0.1:%d", ports.control), "--preset", t.opts.Preset, "--ready-file", ready}
	if ports.transfer != 0 {
		args = append(args, "--transfer-listen", fmt.Sprintf("127.0.0.1:%d", ports.transfer))
	}
	args = append(args, t.trustFlags(role)...)
	if role != "aggregated" && role != "decode" && (role != "encoder" || t.opts.Backend == "shared_dir") {
		args = append(args, "--cache-dir", t.CacheDir)
	}
	if role == "encoder" {
		args = append(args, "--backend", t.opts.Backend)
		if t.proxy != nil {
			args = append(args, "--advertise-control", t.proxy.Addr())
		}
	}
	if t.opts.TestHooks {
		args = append(args, "--test-hooks")
	}
	if t.opts.TransferTimeout > 0 && role != "aggregated" {
		args = append(args, "--transfer-timeout", t.opts.TransferTimeout.String())
	}
	if t.opts.Mutant != "" {
		args = append(args, "--mutant", t.opts.Mutant)
	}
	if t.opts.Device != "" {
		args = append(args, "--device", t.opts.Device)
	}
	if t.opts.ProducerQuotaBytes > 0 && role == "encoder" {
		args = append(args, "--producer-quota-bytes", fmt.Sprint(t.opts.ProducerQuotaBytes))
	}
	if b := t.opts.DecodeBudgetBytes; b > 0 && (role == "encoder" || role == "aggregated") {
		args = append(args, "--decode-budget-bytes", fmt.Sprint(b), "--max-request-pixels", fmt.Sprint(b/decodedBytesPerPixel))
	}
	if n := t.opts.MaxConcurrentDecodes; n > 0 && (role == "encoder" || role == "aggregated") {
		args = append(args, "--max-concurrent-decodes", fmt.Sprint(n))
	}
	args = append(args, t.sec.serveArgs()...)
	args = append(args, t.opts.ServeArgs...)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	cmd := exec.Command(t.opts.Binary, args...)
	var sink io.Writer = logFile
	if t.opts.Logs != nil {
		sink = io.MultiWriter(logFile, prefixWriter(t.opts.Logs, role))
	}
	cmd.Stdout, cmd.Stderr = sink, sink
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("launch: start %s: %w", role, err)
	}
	p := &Process{Role: role, LogPath: logPath, args: args, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	// The address appears in the ready file once the listener is bound.
	deadline := time.Now().Add(t.opts.StartTimeout)
	for {
		if b, err := os.ReadFile(ready); err == nil && strings.HasSuffix(string(b), "\n") {
			p.Address = strings.TrimSpace(string(b))
			break
		}
		select {
		case <-p.exited:
			log := tail(logPath)
			if strings.Contains(log, "address already in use") {
				return nil, fmt.Errorf("launch: %s exited before listening (%v): %w; log %s:\n%s", role, p.exitErr, errPortTaken, logPath, log)
			}
			return nil, fmt.Errorf("launch: %s exited before listening (%v); log %s:\n%s", role, p.exitErr, logPath, log)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond): // polling a file another process writes
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("launch: %s did not listen within %v", role, t.opts.StartTimeout)
		}
	}
	p.engine, err = target.DialEngine(p.Address, t.sec.dialOptions()...)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// reservePorts picks the fixed ports of the roles other roles trust
// (SE-3): the consumers' (pd, prefill) transfer agents, which the encoder
// WRITEs into and D READs from; P's control address, which D dials; and
// the encoder's control address when no fault proxy stands in front of
// it (the proxy's address is what consumers trust then).
func (t *Topology) reservePorts() error {
	t.ports = map[string]rolePorts{}
	for _, name := range t.roles {
		var p rolePorts
		var err error
		switch roleOfName(name) {
		case "pd":
			p.transfer, err = freePort()
		case "prefill":
			if p.transfer, err = freePort(); err == nil {
				p.control, err = freePort()
			}
		case "encoder":
			if t.proxy == nil && t.opts.Backend != "shared_dir" {
				p.control, err = freePort()
			}
		}
		if err != nil {
			return fmt.Errorf("launch: reserve a port for %s: %w", name, err)
		}
		t.ports[name] = p
	}
	return nil
}

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// trustFlags are role's --trusted-producers and --trusted-consumers
// (CONTRACT SE-3): consumers trust the encoder's advertised control
// address (the fault proxy's, when it runs: the proxy is what they dial),
// the encoder trusts the consumers' transfer agents, and D trusts P's
// control address and transfer agent.
func (t *Topology) trustFlags(role string) []string {
	addr := func(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
	switch role {
	case "pd", "prefill":
		if t.proxy != nil {
			return []string{"--trusted-producers", t.proxy.Addr()}
		}
		if p := t.ports["encoder"].control; p != 0 {
			return []string{"--trusted-producers", addr(p)}
		}
	case "encoder":
		var agents []string
		for _, name := range t.roles { // every PD (the second one too) and P
			if r := roleOfName(name); r != "pd" && r != "prefill" {
				continue
			}
			if p := t.ports[name].transfer; p != 0 {
				agents = append(agents, addr(p))
			}
		}
		if len(agents) > 0 {
			return []string{"--trusted-consumers", strings.Join(agents, ",")}
		}
	case "decode":
		if p := t.ports["prefill"]; p.control != 0 {
			return []string{"--trusted-producers", addr(p.control) + "," + addr(p.transfer)}
		}
	}
	return nil
}

// fixedPorts reports whether role comes back on the same ports after a
// restart (others trust them): Restart must wait for the old instance to
// exit first.
func (t *Topology) fixedPorts(role string) bool {
	p := t.ports[role]
	return p.control != 0 || p.transfer != 0
}

func (p *Process) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		h, err := p.engine.Health(cctx)
		cancel()
		if err == nil && h.GetState() == pb.HealthState_HEALTH_STATE_READY {
			info, err := p.engine.GetServerInfo(ctx)
			if err != nil {
				return fmt.Errorf("launch: %s GetServerInfo: %w", p.Role, err)
			}
			p.instance = info.GetInstanceId()
			p.listeners = listenersOf(info)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("launch: %s not READY within %v (last: %v, %v)", p.Role, timeout, h.GetState(), err)
		}
		select {
		case <-p.exited:
			return fmt.Errorf("launch: %s exited (%v); log:\n%s", p.Role, p.exitErr, tail(p.LogPath))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Config describes the topology as a target profile. It claims
// Options.Level when set; otherwise the Faults level when a fault proxy
// runs (only a Target from Target() can inject faults and restart
// instances), else the Core level. An E+PD topology
// names endpoints producer, consumer and baseline; an E+P+D one producer,
// prefill, decode and baseline.
func (t *Topology) Config() target.Config {
	level := "core"
	if t.proxy != nil {
		level = "faults"
	}
	if t.opts.Level != "" {
		level = t.opts.Level
	}
	topology := t.topology
	if topology == "" {
		topology = target.TopologyEPD
	}
	endpoints := map[target.Role]string{
		target.RoleProducer: t.Producer.Address,
		target.RoleBaseline: t.Baseline.Address,
	}
	if topology == target.TopologyEPPD {
		endpoints[target.RolePrefill] = t.Prefill.Address
		endpoints[target.RoleDecode] = t.Decode.Address
	} else {
		endpoints[target.RoleConsumer] = t.Consumer.Address
		if t.Consumer2 != nil {
			endpoints[target.RoleSecondConsumer] = t.Consumer2.Address
		}
	}
	name := "baton reference engine (" + topology + ", " + t.opts.Backend + ")"
	if t.sec != nil {
		name = "baton reference engine (" + topology + ", " + t.opts.Backend + ", mTLS, authorization)"
	}
	cfg := target.Config{
		Profile: target.Profile{
			Name:               name,
			Level:              level,
			Topologies:         []string{topology},
			Backends:           []string{t.opts.Backend},
			FaultProxy:         t.proxy != nil,
			TestHooks:          t.opts.TestHooks,
			Observables:        true,
			Destructive:        true,
			ProducerQuotaBytes: t.quota(),
			DecodeBudgetBytes:  t.opts.DecodeBudgetBytes,
			ReferenceFormat:    "baton-json-v1",
			MediaFormats:       []string{target.MediaPNG, target.MediaJPEG, target.MediaGIF, target.MediaWebP},
			CaseTimeout:        60 * time.Second,
			// Every trust list launch passes names exact host:port entries
			// of this topology's own ports (trustFlags): any other port on
			// loopback is untrusted (SE-3).
			UntrustedHost: "127.0.0.1",
			AgentFormat:   target.AgentFormatBatonXferV1,
		},
		Endpoints: endpoints,
	}
	t.sec.declare(&cfg.Profile, t.roleProcesses())
	// Target() restarts instances; a `baton check` in another process
	// reaches these engines through the profile: it adopts them and
	// restarts them with the same flags at the same address (the profile's
	// launch section), so the cases that take an instance down (S-1, S-2,
	// S-4, X-1) can run there too. A fault proxy lives in this process:
	// only Target() can drive it, so a topology with one gets no launch
	// section.
	cfg.Restarts = true
	if t.proxy == nil {
		cfg.Launch = t.launchSection()
	}
	return cfg
}

// launchSection is a launch section that adopts the running processes and
// restarts each with its own `baton serve` flags at its own address.
func (t *Topology) launchSection() *target.Launch {
	l := &target.Launch{Adopt: true, Roles: map[target.Role]*target.LaunchRole{}}
	for role, p := range map[target.Role]*Process{target.RoleProducer: t.Producer, target.RoleConsumer: t.Consumer, target.RoleSecondConsumer: t.Consumer2,
		target.RolePrefill: t.Prefill, target.RoleDecode: t.Decode, target.RoleBaseline: t.Baseline} {
		if p == nil {
			continue
		}
		argv := []string{t.opts.Binary}
		for i := 0; i < len(p.args); i++ {
			switch p.args[i] {
			case "--ready-file":
				i++ // nothing waits for it
			case "--listen":
				argv = append(argv, "--listen", p.Address)
				i++
			default:
				argv = append(argv, p.args[i])
			}
		}
		l.Roles[role] = &target.LaunchRole{Start: target.LaunchCommand{Argv: argv}}
	}
	return l
}

func (t *Topology) quota() int64 {
	if t.opts.ProducerQuotaBytes > 0 {
		return t.opts.ProducerQuotaBytes
	}
	return 256 << 20
}

// Shutdown stops every process through Shutdown(expected_instance_id) (S-1)
// and waits for each to exit; it returns an error if one exits non-zero or
// does not exit within timeout, or if the cache directory is not empty
// afterwards (S-4). A process that already shut down (a destructive case did
// it) is only waited for.
func (t *Topology) Shutdown(ctx context.Context, timeout time.Duration) error {
	var errs []error
	for _, p := range t.processes() {
		select {
		case <-p.exited:
			// Gone before this Shutdown: a destructive case ended it, and
			// a `baton check` that adopted this topology (Config's launch
			// section) may have started a replacement at its address.
			if err := shutdownReplacement(ctx, p, timeout); err != nil {
				errs = append(errs, err)
			}
			continue
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := p.engine.Shutdown(cctx, &pb.ShutdownRequest{ExpectedInstanceId: p.instance})
		cancel()
		if err != nil && status.Code(err) != codes.Unavailable {
			errs = append(errs, fmt.Errorf("launch: Shutdown %s: %w", p.Role, err))
		}
	}
	for _, p := range t.processes() {
		select {
		case <-p.exited:
			if p.exitErr != nil {
				errs = append(errs, fmt.Errorf("launch: S-4 %s exited with %v; log:\n%s", p.Role, p.exitErr, tail(p.LogPath)))
			}
		case <-time.After(timeout):
			_ = p.cmd.Process.Kill()
			errs = append(errs, fmt.Errorf("launch: S-4 %s did not exit within %v after Shutdown", p.Role, timeout))
		}
		_ = p.engine.Close()
	}
	t.waitRetired()
	if t.proxy != nil {
		t.proxy.Close()
	}
	if left, err := Leftovers(t.CacheDir); err != nil {
		errs = append(errs, err)
	} else if len(left) > 0 {
		errs = append(errs, fmt.Errorf("launch: S-4 cache directory %s still holds %v", t.CacheDir, left))
	}
	return errors.Join(errs...)
}

// shutdownReplacement shuts down an instance that answers at the address
// of p, which exited: one another process started there (it is no child
// of this one, so only its leaving the wire can be checked, not its exit
// status). It returns an error if one answers and does not leave within
// timeout.
func shutdownReplacement(ctx context.Context, p *Process, timeout time.Duration) error {
	e, err := target.DialEngine(p.Address)
	if err != nil {
		return nil
	}
	defer e.Close()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	info, err := e.GetServerInfo(cctx)
	cancel()
	if err != nil || info.GetInstanceId() == "" || info.GetInstanceId() == p.instance {
		return nil // nothing there
	}
	cctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	_, err = e.Shutdown(cctx, &pb.ShutdownRequest{ExpectedInstanceId: info.GetInstanceId()})
	cancel()
	if err != nil && status.Code(err) != codes.Unavailable {
		return fmt.Errorf("launch: Shutdown the %s that replaced %s at %s: %w", p.Role, p.Role, p.Address, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := e.Health(cctx)
		cancel()
		if status.Code(err) == codes.Unavailable {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("launch: S-4 the %s that replaced %s at %s still answers %v after Shutdown", p.Role, p.Role, p.Address, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling a process this one did not start
		}
	}
}

// Kill stops every process without a drain (cleanup after a failed start).
func (t *Topology) Kill() {
	if t.proxy != nil {
		t.proxy.Close()
	}
	t.killEach()
	for _, p := range t.processes() {
		_ = shutdownReplacement(context.Background(), p, 10*time.Second) // what an adopter started at its address
	}
	t.waitRetired()
}

// killEach kills every process of the topology (SIGKILL), waits for its
// exit and closes its client.
func (t *Topology) killEach() {
	for _, p := range t.processes() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if p.engine != nil {
			_ = p.engine.Close()
		}
	}
}

// Leftovers lists every file or directory under dir (not dir itself).
func Leftovers(dir string) ([]string, error) {
	var left []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if path != dir {
			rel, _ := filepath.Rel(dir, path)
			left = append(left, rel)
		}
		return nil
	})
	return left, err
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

func prefixWriter(w io.Writer, role string) io.Writer {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintf(w, "[%s] %s\n", role, sc.Text())
		}
	}()
	return pw
}
