package cudaenc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/baton-dev/baton/engine/encoder"
	"github.com/baton-dev/baton/gpu/cuda"
)

// torchMs are the PyTorch times on the H200 for preset large that issue 6
// sets as the bar (CUDA events, median of 5, device-resident input), in ms,
// keyed by precision and batch size.
var torchMs = map[string]float64{"fp32/1": 0.142, "bf16/1": 0.071, "fp32/32": 3.72, "bf16/32": 0.49}

func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}

// TestBenchEncoderLarge (BATON_GPU_BENCH=1): preset large, fp32 and bf16,
// batch 1 and 32. Device time: CUDA events around the device part
// (patchify, product, GELU, product) on device-resident input, 20 warm-ups,
// median of 100 runs. End to end: wall time of Encode (CPU resize, upload,
// device part, download), median of 5 after 2 warm-ups. Writes
// encoder-bench.md under $BATON_GPU_BENCH_OUT when set.
func TestBenchEncoderLarge(t *testing.T) {
	if os.Getenv("BATON_GPU_BENCH") != "1" {
		t.Skip("benchmark: set BATON_GPU_BENCH=1 to run (tools/gpu/gpu-bench.sh)")
	}
	requireGPU(t)
	p := encoder.Large
	imgs := randomImages(newRand(t), 32)
	rows := float64(p.Patches())
	flopsPerImage := 2 * rows * float64(p.InDim*p.HiddenDim+p.HiddenDim*p.OutDim)
	var md bytes.Buffer
	fmt.Fprintf(&md, "| preset | precision | batch | device ms (median) | p10 | p90 | TFLOP/s | PyTorch ms | PyTorch/ours | end-to-end ms |\n")
	fmt.Fprintf(&md, "|---|---|---|---|---|---|---|---|---|---|\n")
	for _, prec := range []Precision{FP32, BF16} {
		e := newOrSkip(t, Config{Preset: p, Seed: encoder.DefaultSeed, Precision: prec, MaxBatch: 32})
		for _, n := range []int{1, 32} {
			batch := imgs[:n]
			if err := e.Stage(batch); err != nil {
				t.Fatal(err)
			}
			ms, err := e.TimeDevice(20, 100)
			if err != nil {
				t.Fatal(err)
			}
			med := quantile(ms, 0.5)
			var wall []float64
			for i := range 7 {
				t0 := time.Now()
				if _, err := e.Encode(batch); err != nil {
					t.Fatal(err)
				}
				if i >= 2 {
					wall = append(wall, float64(time.Since(t0).Microseconds())/1e3)
				}
			}
			key := fmt.Sprintf("%v/%d", prec, n)
			ref := torchMs[key]
			fmt.Fprintf(&md, "| %s | %v | %d | %.4f | %.4f | %.4f | %.1f | %.3f | %.2f | %.2f |\n",
				p.Name, prec, n, med, quantile(ms, 0.1), quantile(ms, 0.9),
				flopsPerImage*float64(n)/(med/1e3)/1e12, ref, ref/med, quantile(wall, 0.5))
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Fprintf(&md, "\nPyTorch/ours >= 0.90 meets the issue-6 bar (throughput at least 0.9x PyTorch's).\n")
	v, path := cuda.CUBLASVersion()
	major, minor, nvrtcPath, _ := cuda.NVRTCVersion()
	drv, drvPath, _ := cuda.DriverVersion()
	t.Logf("BATON_LIBS driver CUDA %d.%d (%s), cuBLAS %s (%s), NVRTC %d.%d (%s)",
		drv/1000, drv%1000/10, drvPath, v, path, major, minor, nvrtcPath)
	t.Logf("\n%s", md.String())
	if dir := os.Getenv("BATON_GPU_BENCH_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "encoder-bench.md"), md.Bytes(), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// TestBenchPlans (BATON_GPU_BENCH_VARIANTS=1): device time and host enqueue
// time of the default pass (graph replay) against step-by-step launches and
// the plain batched product with cuBLAS's workspace, preset large, batch 1
// and 32. Writes encoder-plans.md under $BATON_GPU_BENCH_OUT when set.
func TestBenchPlans(t *testing.T) {
	if os.Getenv("BATON_GPU_BENCH_VARIANTS") != "1" {
		t.Skip("benchmark: set BATON_GPU_BENCH_VARIANTS=1 to run")
	}
	requireGPU(t)
	p := encoder.Large
	imgs := randomImages(newRand(t), 32)
	variants := []struct {
		name string
		cfg  Config
	}{
		{"default (strided, no workspace, graph)", Config{}},
		{"strided, no workspace, eager", Config{eager: true}},
		{"batched, cuBLAS workspace, eager", Config{eager: true, plan: planBatched, cublasWorkspace: true}},
	}
	var md bytes.Buffer
	fmt.Fprintf(&md, "| precision | variant | batch | device ms (median) | p90 | host enqueue us (median) |\n|---|---|---|---|---|---|\n")
	for _, prec := range []Precision{FP32, BF16} {
		for _, v := range variants {
			cfg := v.cfg
			cfg.Preset, cfg.Seed, cfg.Precision, cfg.MaxBatch = p, encoder.DefaultSeed, prec, 32
			e := newOrSkip(t, cfg)
			for _, n := range []int{1, 32} {
				if err := e.Stage(imgs[:n]); err != nil {
					t.Fatal(err)
				}
				ms, err := e.TimeDevice(10, 50)
				if err != nil {
					t.Fatal(err)
				}
				var enq []float64
				e.mu.Lock()
				for range 20 {
					t0 := time.Now()
					err = e.forwardLocked(n)
					enq = append(enq, float64(time.Since(t0).Nanoseconds())/1e3)
					if err == nil {
						err = e.stream.Synchronize()
					}
					if err != nil {
						break
					}
				}
				e.mu.Unlock()
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&md, "| %v | %s | %d | %.4f | %.4f | %.1f |\n", prec, v.name, n, quantile(ms, 0.5), quantile(ms, 0.9), quantile(enq, 0.5))
			}
			if err := e.GraphError(); err != nil {
				fmt.Fprintf(&md, "| %v | %s: graphs given up: %v | | | | |\n", prec, v.name, err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("\n%s", md.String())
	if dir := os.Getenv("BATON_GPU_BENCH_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "encoder-plans.md"), md.Bytes(), 0o644); err != nil {
			t.Error(err)
		}
	}
}
