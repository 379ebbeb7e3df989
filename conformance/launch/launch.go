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
}

// Process is one running `baton serve`.
type Process struct {
	Role     string
	Address  string
	LogPath  string
	cmd      *exec.Cmd
	exited   chan struct{}
	exitErr  error
	engine   *target.GRPCEngine
	instance string
}

// Topology is E + PD + a second PD + the aggregated baseline sharing one
// cache directory (StartEPD), or E + P + D + the baseline (StartEPPD).
type Topology struct {
	Producer, Consumer, Baseline *Process
	// Consumer2 is a second PD process of E+PD (endpoints key consumer2):
	// SU-1 races one reference across the two consumer processes.
	Consumer2 *Process
	// Prefill and Decode are P and D of E+P+D (nil for E+PD).
	Prefill, Decode *Process
	CacheDir        string
	opts            Options
	proxy           *faultproxy.Proxy
	starts          int
	topology        string          // target.TopologyEPPD for StartEPPD; "" is E+PD
	mu              sync.Mutex      // guards the processes' replacement by Restart
	retired         []chan struct{} // closed once an instance Restart replaced has exited
}

// StartEPD starts E, PD, a second PD and an aggregated baseline as four processes.
func StartEPD(ctx context.Context, opts Options) (*Topology, error) {
	if opts.Backend == "" {
		opts.Backend = "shared_dir"
	}
	t := &Topology{opts: opts}
	return t.startAll(ctx, []roleSlot{{"encoder", &t.Producer, ""}, {"pd", &t.Consumer, ""}, {"pd", &t.Consumer2, secondConsumerName}, {"aggregated", &t.Baseline, ""}})
}

// secondConsumerName names the second PD's ready file and logs.
const secondConsumerName = "pd2"

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
	t.CacheDir = filepath.Join(t.opts.WorkDir, "cache")
	var err error
	if t.opts.FaultProxy {
		t.proxy, err = faultproxy.New("", faultproxy.Options{})
		if err != nil {
			return nil, fmt.Errorf("launch: fault proxy: %w", err)
		}
	}
	for _, p := range slots {
		*p.dst, err = t.startAs(ctx, p.role, p.name)
		if err != nil {
			t.Kill()
			return nil, err
		}
	}
	for _, p := range t.processes() {
		if err := p.waitReady(ctx, t.opts.StartTimeout); err != nil {
			t.Kill()
			return nil, err
		}
	}
	if t.proxy != nil {
		if err := t.proxy.SetUpstream(t.Producer.Address); err != nil {
			t.Kill()
			return nil, err
		}
	}
	return t, nil
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
	args := []string{"serve", "--role", role, "--listen", "127.0.0.1:0", "--preset", t.opts.Preset, "--ready-file", ready}
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
	p := &Process{Role: role, LogPath: logPath, cmd: cmd, exited: make(chan struct{})}
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
			return nil, fmt.Errorf("launch: %s exited before listening (%v); log %s:\n%s", role, p.exitErr, logPath, tail(logPath))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond): // polling a file another process writes
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("launch: %s did not listen within %v", role, t.opts.StartTimeout)
		}
	}
	p.engine, err = target.DialEngine(p.Address)
	if err != nil {
		return nil, err
	}
	return p, nil
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
	return target.Config{
		Profile: target.Profile{
			Name:               "baton reference engine (" + topology + ", " + t.opts.Backend + ")",
			Level:              level,
			Topologies:         []string{topology},
			Backends:           []string{t.opts.Backend},
			FaultProxy:         t.proxy != nil,
			TestHooks:          t.opts.TestHooks,
			Observables:        true,
			Destructive:        true,
			ProducerQuotaBytes: t.quota(),
			ReferenceFormat:    "baton-json-v1",
			MediaFormats:       []string{target.MediaPNG, target.MediaJPEG, target.MediaGIF, target.MediaWebP},
			CaseTimeout:        60 * time.Second,
		},
		Endpoints: endpoints,
	}
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

// Kill stops every process without a drain (cleanup after a failed start).
func (t *Topology) Kill() {
	if t.proxy != nil {
		t.proxy.Close()
	}
	for _, p := range t.processes() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if p.engine != nil {
			_ = p.engine.Close()
		}
	}
	t.waitRetired()
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
