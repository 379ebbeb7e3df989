package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
)

// The decode budget's load benchmark (CONTRACT SE-4): 100 concurrent
// publishes of a 6000x6000 16-bit PNG (36 megapixels, just under the L-6
// bound of 40; about 280 KB on the wire, 288 MB decoded) against one
// encoder process with the default budget, under a memory cap of
// decodeLoadCapBytes. Without the budget ten of them at once take an
// engine past 3 GiB.
const (
	decodeLoadRequests = 100
	decodeLoadSide     = 6000
	// decodeLoadCapBytes caps the engine's memory (a cgroup, else
	// RLIMIT_AS), so a regression is killed instead of the machine.
	decodeLoadCapBytes = 3 << 30
	// decodeLoadRSSBound is the peak RSS the engine must stay under: the
	// 512 MiB budget (one such image at a time) plus what Go's collector
	// lets the heap grow to and the runtime's own.
	decodeLoadRSSBound = 1 << 30
	// decodeLoadHealthP99 bounds the engine's Health latency during the load.
	decodeLoadHealthP99 = 100 * time.Millisecond
)

// envDecodeHelper makes TestDecodeLoadEngineHelper serve: the value is the
// file it writes its address to.
const envDecodeHelper = "BATON_TEST_DECODE_HELPER"

// envDecodeHelperBudget and envDecodeHelperConcurrent override the
// helper's --decode-budget-bytes and --max-concurrent-decodes (a run by
// hand with both large shows what the load does without a budget).
const (
	envDecodeHelperBudget     = "BATON_TEST_DECODE_HELPER_BUDGET_BYTES"
	envDecodeHelperConcurrent = "BATON_TEST_DECODE_HELPER_CONCURRENT"
)

// TestDecodeLoadEngineHelper is not a test: run by
// BenchmarkDecodeBudgetLoad as its own process, it serves an encoder
// (tiny preset, tcp backend, default decode budget) until SIGTERM.
func TestDecodeLoadEngineHelper(t *testing.T) {
	ready := os.Getenv(envDecodeHelper)
	if ready == "" {
		t.Skip("the decode load benchmark's engine process (BenchmarkDecodeBudgetLoad)")
	}
	cfg := Config{Role: RoleEncoder, Preset: "tiny", Backend: BackendTCP}
	if v := os.Getenv(envDecodeHelperBudget); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DecodeBudget.MaxBytes = n
	}
	if v := os.Getenv(envDecodeHelperConcurrent); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DecodeBudget.MaxConcurrent = n
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(cfg, lis, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ready, []byte(lis.Addr().String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := srv.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDecodeBudgetLoad sends decodeLoadRequests concurrent publishes
// of the heavy PNG to an encoder process under a memory cap and probes its
// Health every 10 ms meanwhile. It fails unless every publish ends OK or
// RESOURCE_EXHAUSTED, the process's peak RSS (VmHWM) stays under
// decodeLoadRSSBound, and Health answers within decodeLoadHealthP99 at the
// 99th percentile. Run once (-benchtime 1x): it reports the peak RSS, the
// Health p50/p99 and how many publishes were served.
func BenchmarkDecodeBudgetLoad(b *testing.B) {
	png := fixtures.HeavyPNG(decodeLoadSide, decodeLoadSide)
	for b.Loop() {
		runDecodeLoad(b, png)
	}
}

func runDecodeLoad(b *testing.B, png []byte) {
	dir := b.TempDir()
	ready := filepath.Join(dir, "addr")
	cmd, release, how := cappedCommand(b, decodeLoadCapBytes, os.Args[0], "-test.run=^TestDecodeLoadEngineHelper$", "-test.bench=^$")
	defer release()
	cmd.Env = append(os.Environ(), envDecodeHelper+"="+ready)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{}) // closed once the process is reaped; then exitErr is set
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	addr := waitReadyFile(b, ready, exited, &out)
	eng, err := target.DialEngine(addr)
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()

	var health []time.Duration
	stopProbe := make(chan struct{})
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopProbe:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			start := time.Now()
			_, err := eng.Health(ctx)
			cancel()
			d := time.Since(start)
			if err != nil {
				d = time.Hour // a failed probe counts as the worst latency
			}
			health = append(health, d)
		}
	}()
	req := &pb.GenerateRequest{Media: []*pb.MediaItem{{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: png}}},
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}}
	codesSeen := map[codes.Code]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range decodeLoadRequests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := eng.Generate(ctx, req)
			code := codes.Unknown
			if err == nil {
				code = res.Code()
			}
			mu.Lock()
			codesSeen[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopProbe)
	<-probed
	peak, alive := peakRSS(cmd.Process.Pid)
	if !alive {
		select {
		case <-exited:
			b.Fatalf("the engine exited during the load (%v; memory cap %d MiB by %s; %v):\n%s", exitErr, decodeLoadCapBytes>>20, how, codesSeen, lastLinesOf(out.String(), 20))
		case <-time.After(10 * time.Second):
			b.Fatal("the engine's /proc status has no peak RSS, yet it did not exit")
		}
	}
	slices.Sort(health)
	p50, p99 := percentile(health, 50), percentile(health, 99)
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(p50.Microseconds())/1000, "health-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "health-p99-ms")
	b.ReportMetric(float64(codesSeen[codes.OK]), "served")
	b.ReportMetric(float64(codesSeen[codes.ResourceExhausted]), "exhausted")
	b.Logf("BENCH decode load: %d concurrent %dx%d 16-bit PNGs (%d bytes each) in %v: %v; engine peak RSS %d MiB (bound %d MiB, memory cap %d MiB by %s); Health p50 %v p99 %v over %d probes",
		decodeLoadRequests, decodeLoadSide, decodeLoadSide, len(png), elapsed.Round(time.Millisecond), codesSeen, peak>>20, decodeLoadRSSBound>>20, decodeLoadCapBytes>>20, how, p50, p99, len(health))
	for c, n := range codesSeen {
		if c != codes.OK && c != codes.ResourceExhausted {
			b.Errorf("%d publishes ended %v; want only OK or RESOURCE_EXHAUSTED (SE-4)", n, c)
		}
	}
	if codesSeen[codes.OK] == 0 {
		b.Errorf("no publish was served; want the budget to let some through")
	}
	if peak > decodeLoadRSSBound {
		b.Errorf("engine peak RSS %d MiB > bound %d MiB", peak>>20, decodeLoadRSSBound>>20)
	}
	if p99 > decodeLoadHealthP99 {
		b.Errorf("Health p99 %v during the load > %v", p99, decodeLoadHealthP99)
	}
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// waitReadyFile waits for the helper's address.
func waitReadyFile(b *testing.B, path string, exited <-chan struct{}, out *strings.Builder) string {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if raw, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(raw), "\n") {
			return strings.TrimSpace(string(raw))
		}
		select {
		case <-exited:
			b.Fatalf("the engine process exited before listening:\n%s", out.String())
		case <-time.After(20 * time.Millisecond): // polling a file another process writes
		}
		if time.Now().After(deadline) {
			b.Fatal("the engine process did not listen within 60 s")
		}
	}
}

// peakRSS is VmHWM of process pid, in bytes; false when the process is
// gone (a zombie has none).
func peakRSS(pid int) (int64, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// cappedCommand is name args run under a memory cap of capBytes: in a
// fresh cgroup (v2, else v1's memory controller) the command joins before
// it execs, else under prlimit --as; with none of them available the
// benchmark is skipped rather than risk the machine. release removes the
// cgroup; how says which cap applies.
func cappedCommand(b *testing.B, capBytes int64, name string, args ...string) (cmd *exec.Cmd, release func(), how string) {
	b.Helper()
	group := fmt.Sprintf("baton-decode-load-%d", os.Getpid())
	for _, c := range []struct{ root, limit, kind string }{
		{"/sys/fs/cgroup", "memory.max", "cgroup v2"},
		{"/sys/fs/cgroup/unified", "memory.max", "cgroup v2"},
		{"/sys/fs/cgroup/memory", "memory.limit_in_bytes", "cgroup v1"},
	} {
		if _, err := os.Stat(filepath.Join(c.root, "cgroup.procs")); err != nil {
			continue
		}
		if c.limit == "memory.max" {
			if ctl, err := os.ReadFile(filepath.Join(c.root, "cgroup.controllers")); err != nil || !strings.Contains(string(ctl), "memory") {
				continue
			}
		}
		dir := filepath.Join(c.root, group)
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, c.limit), []byte(strconv.FormatInt(capBytes, 10)), 0o644); err != nil {
			_ = os.Remove(dir)
			continue
		}
		// The shell joins the cgroup, then execs the engine in it.
		script := `echo $$ > "$0" && exec "$@"`
		cmd := exec.Command("/bin/sh", append([]string{"-c", script, filepath.Join(dir, "cgroup.procs"), name}, args...)...)
		return cmd, func() { _ = os.Remove(dir) }, fmt.Sprintf("%s %s", c.kind, dir)
	}
	if p, err := exec.LookPath("prlimit"); err == nil {
		return exec.Command(p, append([]string{fmt.Sprintf("--as=%d", capBytes), "--", name}, args...)...), func() {}, "prlimit --as"
	}
	b.Skip("no way to cap the engine's memory here (cgroup or prlimit): not running the decode load")
	return nil, nil, ""
}

func lastLinesOf(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
