// Command topocheck starts a baton topology on one GPU through
// conformance/launch and runs the conformance runner against it in
// process; gpu-check.sh uses it where a script cannot do the job itself:
//
//	# the Faults-level cases, with the fault proxy between PD and E
//	topocheck -baton bin/gpu/baton -topology E+PD -level faults -report-dir out/gpu-check/faults
//	# E+P+D over cuda_ipc at the Core level (four processes)
//	topocheck -baton bin/gpu/baton -topology E+P+D -level core -report-dir out/gpu-check/eppd-core
//
// Every engine runs with --device (default cuda:0) and E with --backend
// (default cuda_ipc); P and PD then accept cuda_ipc. With -level faults the
// fault proxy sits in front of E, the engines run with --test-hooks, and
// the runner selects the label filter level:faults (Q-1..Q-5, C-4, S-3;
// the Lifecycle rules are left out until their cases settle); with -level
// core it runs every Core case. It prints one line per rule, writes the
// report (NVML inventory stamped) and shuts the topology down (S-4: every
// process must exit 0). Exit status: 0 when no rule failed or errored and
// the shutdown was clean, 1 otherwise.
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
	topology := flag.String("topology", "E+PD", "E+PD or E+P+D")
	level := flag.String("level", "faults", "faults (the Faults-level cases, fault proxy) or core (every Core case)")
	reportDir := flag.String("report-dir", "out/gpu-check/faults", "where the report goes")
	work := flag.String("work", "", "work directory for the engines (default: a temp dir)")
	flag.Parse()
	os.Exit(run(*bin, *device, *backend, *topology, *level, *reportDir, *work))
}

func run(bin, device, backend, topology, level, reportDir, work string) int {
	start := launch.StartEPD
	switch topology {
	case "E+PD":
	case "E+P+D":
		start = launch.StartEPPD
	default:
		fmt.Fprintf(os.Stderr, "topocheck: -topology %q (want E+PD or E+P+D)\n", topology)
		return 2
	}
	opts := launch.Options{Binary: bin, Preset: "base", Backend: backend, Device: device, Level: level, ProducerQuotaBytes: 256 << 20}
	filter := ""
	switch level {
	case "faults":
		opts.FaultProxy, opts.TestHooks, filter = true, true, "level:faults"
	case "core":
	default:
		fmt.Fprintf(os.Stderr, "topocheck: -level %q (want faults or core)\n", level)
		return 2
	}
	if work == "" {
		d, err := os.MkdirTemp("", "topocheck")
		if err != nil {
			fmt.Fprintln(os.Stderr, "topocheck:", err)
			return 1
		}
		defer os.RemoveAll(d)
		work = d
	}
	opts.WorkDir = work
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	topo, err := start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "topocheck: start %s: %v\n", topology, err)
		return 1
	}
	var gpus []reports.GPUDevice
	if inv, err := nvml.Read(); err == nil {
		for _, d := range inv.Devices {
			gpus = append(gpus, reports.GPUDevice{Index: d.Index, Name: d.Name, UUID: d.UUID, MemoryBytes: d.MemoryTotalBytes, Driver: inv.Driver})
		}
		fmt.Printf("gpu: %s\n", inv.Summary())
	}
	res, err := check.Run(ctx, topo.Target(), check.Options{LabelFilter: filter, ReportDir: reportDir, Out: os.Stdout, GPU: gpus})
	shutErr := topo.Shutdown(ctx, time.Minute)
	code := 0
	if err != nil {
		fmt.Fprintln(os.Stderr, "topocheck: check:", err)
		code = 1
	}
	for _, r := range res.Rules {
		if r.Outcome == reports.Failed || r.Outcome == reports.Error {
			code = 1
		}
	}
	if shutErr != nil {
		fmt.Fprintln(os.Stderr, "topocheck: S-4 shutdown:", shutErr)
		code = 1
	}
	fmt.Printf("topocheck: %s over %s on %s, level %s: verdict %s; shutdown %v\n", topology, backend, device, level, res.Verdict, shutErr)
	return code
}
