// Command faultscheck runs the Faults-level cases (Q-1..Q-5, C-4, C-5,
// S-3) against an E+PD topology over cuda_ipc on one GPU, with the fault
// proxy between PD and E:
//
//	faultscheck -baton bin/gpu/baton -device cuda:0 -report-dir out/gpu-check/faults
//
// It starts the topology with conformance/launch (E --backend cuda_ipc, PD
// and the baseline, all --device cuda:0 --test-hooks), runs `baton check`'s
// runner in process with the label filter level:faults, prints one line per
// rule, writes the report (NVML inventory stamped) and shuts the topology
// down (S-4: every process exits 0). Exit status: 0 when no rule failed or
// errored and the shutdown was clean, 1 otherwise.
//
// It exists because a script cannot put the fault proxy between processes
// it starts; the Core-level certification of the same pair is in
// gpu-check.sh. The Lifecycle rules are left out until their cases settle.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/baton-dev/baton/conformance/check"
	"github.com/baton-dev/baton/conformance/launch"
	"github.com/baton-dev/baton/gpu/nvml"
	"github.com/baton-dev/baton/reports"
)

func main() {
	bin := flag.String("baton", "bin/gpu/baton", "the baton binary")
	device := flag.String("device", "cuda:0", "every engine's --device")
	backend := flag.String("backend", "cuda_ipc", "the producer's backend (tcp rehearses without a GPU)")
	reportDir := flag.String("report-dir", "out/gpu-check/faults", "where the report goes")
	work := flag.String("work", "", "work directory for the engines (default: a temp dir)")
	flag.Parse()
	os.Exit(run(*bin, *device, *backend, *reportDir, *work))
}

func run(bin, device, backend, reportDir, work string) int {
	if work == "" {
		d, err := os.MkdirTemp("", "faultscheck")
		if err != nil {
			fmt.Fprintln(os.Stderr, "faultscheck:", err)
			return 1
		}
		defer os.RemoveAll(d)
		work = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	topo, err := launch.StartEPD(ctx, launch.Options{Binary: bin, Preset: "base", WorkDir: work, Backend: backend, Device: device,
		FaultProxy: true, TestHooks: true, Level: "faults", ProducerQuotaBytes: 256 << 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultscheck: start E+PD:", err)
		return 1
	}
	var gpus []reports.GPUDevice
	if inv, err := nvml.Read(); err == nil {
		for _, d := range inv.Devices {
			gpus = append(gpus, reports.GPUDevice{Index: d.Index, Name: d.Name, UUID: d.UUID, MemoryBytes: d.MemoryTotalBytes, Driver: inv.Driver})
		}
		fmt.Printf("gpu: %s\n", inv.Summary())
	}
	res, err := check.Run(ctx, topo.Target(), check.Options{LabelFilter: "level:faults", ReportDir: reportDir, Out: os.Stdout, GPU: gpus})
	shutErr := topo.Shutdown(ctx, time.Minute)
	code := 0
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultscheck: check:", err)
		code = 1
	}
	for _, r := range res.Rules {
		if r.Outcome == reports.Failed || r.Outcome == reports.Error {
			code = 1
		}
	}
	if shutErr != nil {
		fmt.Fprintln(os.Stderr, "faultscheck: S-4 shutdown:", shutErr)
		code = 1
	}
	fmt.Printf("faultscheck: E+PD over %s on %s, Faults-level cases: verdict %s; shutdown %v\n", backend, device, res.Verdict, shutErr)
	return code
}
