package cuda

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The IPC tests run a second process (this test binary again, with
// ipcChildEnv set; see TestMain), because CUDA refuses to open an IPC
// handle in the process that exported it.
const (
	ipcChildEnv   = "BATON_CUDA_IPC_CHILD" // "verify" or "bench"
	ipcHandleEnv  = "BATON_CUDA_IPC_HANDLE"
	ipcHandle2Env = "BATON_CUDA_IPC_HANDLE2"
	ipcBytesEnv   = "BATON_CUDA_IPC_BYTES"
	ipcSeedEnv    = "BATON_CUDA_IPC_SEED"
)

// ipcPattern is the test content: word i of the buffer for seed.
func ipcPattern(seed uint32, words int) []uint32 {
	p := make([]uint32, words)
	for i := range p {
		p[i] = uint32(i)*2654435761 ^ seed
	}
	return p
}

func runChild(t *testing.T, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process: %v\n%s", err, out)
	}
	return string(out)
}

// TestIPCAcrossProcesses: the parent exports a buffer; a child process
// opens the handle, checks the content through a device-to-device copy into
// its own buffer, writes a new pattern into the first half of the shared
// buffer, closes the handle and exits; the parent then sees the child's
// writes and its own second half untouched.
func TestIPCAcrossProcesses(t *testing.T) {
	c := openOrSkip(t)
	s := streamOrFail(t, c)
	seed := rand.Uint32()
	t.Logf("seed %#x", seed)
	const words = 1 << 20
	buf := allocOrFail(t, c, 4*words)
	if err := Upload(s, buf, 0, ipcPattern(seed, words)); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	h, err := c.ExportIPC(buf)
	if err != nil {
		t.Fatalf("ExportIPC: %v", err)
	}
	if b, err := c.OpenIPC(h, 4*words); err == nil {
		t.Log("note: this driver opened an IPC handle in the exporting process")
		_ = b.Free()
	} else {
		t.Logf("opening in the exporting process fails, as CUDA documents: %v", err)
	}
	out := runChild(t, ipcChildEnv+"=verify", ipcHandleEnv+"="+h.String(),
		ipcBytesEnv+"="+strconv.Itoa(4*words), ipcSeedEnv+"="+strconv.FormatUint(uint64(seed), 10))
	t.Logf("child: %s", strings.TrimSpace(out))
	got := make([]uint32, words)
	if err := Download(s, got, buf, 0); err != nil {
		t.Fatal(err)
	}
	want := ipcPattern(seed, words)
	copy(want, ipcPattern(seed+1, words/2))
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("word %d after the child ran = %#x, want %#x", i, got[i], want[i])
		}
	}
	imported, err := c.ExportIPC(&Buffer{ctx: c, ptr: buf.ptr, bytes: 4, imported: true})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("exporting an imported buffer: %v (%v), want ErrInvalidArgument", err, imported)
	}
}

// ipcChild is the child process's side (mode from ipcChildEnv).
func ipcChild(mode string) error {
	h, err := ParseIPCHandle(os.Getenv(ipcHandleEnv))
	if err != nil {
		return err
	}
	nbytes, err := strconv.Atoi(os.Getenv(ipcBytesEnv))
	if err != nil {
		return err
	}
	c, err := Open(0)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	switch mode {
	case "verify":
		return ipcChildVerify(c, s, h, nbytes)
	case "bench":
		h8, err := ParseIPCHandle(os.Getenv(ipcHandle2Env))
		if err != nil {
			return err
		}
		return ipcChildBench(c, s, h, nbytes, h8)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

func ipcChildVerify(c *Context, s *Stream, h IPCHandle, nbytes int) error {
	seed64, err := strconv.ParseUint(os.Getenv(ipcSeedEnv), 10, 32)
	if err != nil {
		return err
	}
	seed := uint32(seed64)
	// A malformed handle must fail cleanly.
	var junk IPCHandle
	for i := range junk.Reserved {
		junk.Reserved[i] = byte(i*31 + 7)
	}
	if b, err := c.OpenIPC(junk, 64); err == nil {
		_ = b.Free()
		return errors.New("a junk IPC handle opened")
	} else {
		fmt.Printf("junk handle rejected: %v\n", err)
	}
	in, err := c.OpenIPC(h, nbytes)
	if err != nil {
		return err
	}
	own, err := c.Alloc(nbytes)
	if err != nil {
		return err
	}
	defer own.Free()
	if err := s.CopyDtoD(own, 0, in, 0, nbytes); err != nil {
		return err
	}
	words := nbytes / 4
	got := make([]uint32, words)
	if err := Download(s, got, own, 0); err != nil {
		return err
	}
	want := ipcPattern(seed, words)
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("imported word %d = %#x, want %#x", i, got[i], want[i])
		}
	}
	if err := Upload(s, in, 0, ipcPattern(seed+1, words/2)); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	if err := in.Free(); err != nil {
		return err
	}
	fmt.Printf("verified %d bytes, wrote %d\n", nbytes, nbytes/2)
	return nil
}

// ipcChildBench times, in the importing process: device-to-device copies
// out of the imported big buffer (CUDA events, median of 20 after 3
// warm-ups), and the whole handoff of the small buffer (open, copy,
// synchronize, close; wall clock, 30 runs after 5 warm-ups).
func ipcChildBench(c *Context, s *Stream, h IPCHandle, nbytes int, hSmall IPCHandle) error {
	in, err := c.OpenIPC(h, nbytes)
	if err != nil {
		return err
	}
	own, err := c.Alloc(nbytes)
	if err != nil {
		return err
	}
	defer own.Free()
	ms, err := timeCopies(c, s, own, in, nbytes, 3, 20)
	if err != nil {
		return err
	}
	fmt.Printf("BATON_IPC ipc_copy_ms %.6f\n", median(ms))
	if err := in.Free(); err != nil {
		return err
	}
	const small = 8 << 20
	ownSmall, err := c.Alloc(small)
	if err != nil {
		return err
	}
	defer ownSmall.Free()
	var lat []float64
	for i := range 35 {
		t0 := time.Now()
		b, err := c.OpenIPC(hSmall, small)
		if err != nil {
			return err
		}
		if err := s.CopyDtoD(ownSmall, 0, b, 0, small); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if err := b.Free(); err != nil {
			return err
		}
		if i >= 5 {
			lat = append(lat, float64(time.Since(t0).Microseconds()))
		}
	}
	slices.Sort(lat)
	fmt.Printf("BATON_IPC handoff_8MiB_p50_us %.1f\n", lat[len(lat)/2])
	fmt.Printf("BATON_IPC handoff_8MiB_p90_us %.1f\n", lat[len(lat)*9/10])
	return nil
}

// timeCopies returns the event-timed duration of each of reps copies of
// bytes from src to dst, after warmup untimed ones.
func timeCopies(c *Context, s *Stream, dst, src *Buffer, bytes, warmup, reps int) ([]float64, error) {
	start, err := c.NewEvent()
	if err != nil {
		return nil, err
	}
	defer start.Destroy()
	end, err := c.NewEvent()
	if err != nil {
		return nil, err
	}
	defer end.Destroy()
	var out []float64
	for i := range warmup + reps {
		if err := start.Record(s); err != nil {
			return nil, err
		}
		if err := s.CopyDtoD(dst, 0, src, 0, bytes); err != nil {
			return nil, err
		}
		if err := end.Record(s); err != nil {
			return nil, err
		}
		if err := end.Synchronize(); err != nil {
			return nil, err
		}
		ms, err := ElapsedMs(start, end)
		if err != nil {
			return nil, err
		}
		if i >= warmup {
			out = append(out, ms)
		}
	}
	return out, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// TestBenchCopyAndIPC (BATON_GPU_BENCH=1): device-to-device copy bandwidth
// of 256 MiB in this process, the same copy out of a buffer imported by a
// second process through CUDA IPC, and the 8 MiB handoff latency. Writes
// cuda-bench.md under $BATON_GPU_BENCH_OUT when set.
func TestBenchCopyAndIPC(t *testing.T) {
	if os.Getenv("BATON_GPU_BENCH") != "1" {
		t.Skip("benchmark: set BATON_GPU_BENCH=1 to run (tools/gpu/gpu-bench.sh)")
	}
	c := openOrSkip(t)
	s := streamOrFail(t, c)
	const big = 256 << 20
	src := allocOrFail(t, c, big)
	dst := allocOrFail(t, c, big)
	if err := s.Memset32(src, 0, 0x3f800000, big/4); err != nil {
		t.Fatal(err)
	}
	ms, err := timeCopies(c, s, dst, src, big, 3, 20)
	if err != nil {
		t.Fatal(err)
	}
	d2d := median(ms)
	small := allocOrFail(t, c, 8<<20)
	hBig, err := c.ExportIPC(src)
	if err != nil {
		t.Fatal(err)
	}
	hSmall, err := c.ExportIPC(small)
	if err != nil {
		t.Fatal(err)
	}
	out := runChild(t, ipcChildEnv+"=bench", ipcHandleEnv+"="+hBig.String(), ipcHandle2Env+"="+hSmall.String(),
		ipcBytesEnv+"="+strconv.Itoa(big))
	res := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "BATON_IPC" {
			v, err := strconv.ParseFloat(f[2], 64)
			if err == nil {
				res[f[1]] = v
			}
		}
	}
	ipcMs, ok := res["ipc_copy_ms"]
	if !ok {
		t.Fatalf("child printed no results:\n%s", out)
	}
	gbps := func(ms float64) float64 { return float64(big) / (ms / 1e3) / 1e12 }
	var md bytes.Buffer
	fmt.Fprintf(&md, "| copy (256 MiB, bytes copied) | median ms | TB/s | vs D2D |\n|---|---|---|---|\n")
	fmt.Fprintf(&md, "| device-to-device, same process | %.4f | %.3f | 1.00 |\n", d2d, gbps(d2d))
	fmt.Fprintf(&md, "| cuda_ipc import + D2D copy | %.4f | %.3f | %.2f |\n", ipcMs, gbps(ipcMs), d2d/ipcMs)
	fmt.Fprintf(&md, "\n8 MiB IPC handoff (open, copy, sync, close): p50 %.1f us, p90 %.1f us\n",
		res["handoff_8MiB_p50_us"], res["handoff_8MiB_p90_us"])
	t.Logf("\n%s", md.String())
	if dir := os.Getenv("BATON_GPU_BENCH_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "cuda-bench.md"), md.Bytes(), 0o644); err != nil {
			t.Error(err)
		}
	}
}
