// Command topocheck starts a baton topology on one GPU through
// conformance/launch and runs the conformance runner against it in
// process; gpu-check.sh uses it where a script cannot do the job itself:
//
//	# E+PD certified at the Faults level, with the fault proxy between PD and E
//	topocheck -baton bin/gpu/baton -topology E+PD -level faults -report-dir out/gpu-check/faults
//	# E+P+D over cuda_ipc certified at the Faults level (four processes and the proxy)
//	topocheck -baton bin/gpu/baton -topology E+P+D -level faults -report-dir out/gpu-check/eppd-faults
//
// Every engine runs with --device (default cuda:0) and E with --backend
// (default cuda_ipc); P and PD then accept cuda_ipc. The run is a
// certification run at -level: with faults the fault proxy sits in front
// of E and the engines run with --test-hooks, and every Core, Lifecycle and
// Faults case runs (the Core and Lifecycle ones again under injected
// faults); with core every Core case. It prints one line per rule, writes
// the report (NVML inventory and certificate stamped) and shuts the
// topology down (S-4: every process must exit 0). Exit status: 0 when the
// certificate was issued and the shutdown was clean, 1 otherwise.
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
	preset := flag.String("preset", "base", "every engine's encoder preset")
	flag.Parse()
	os.Exit(run(*bin, *device, *backend, *topology, *level, *reportDir, *work, *preset))
}

func run(bin, device, backend, topology, level, reportDir, work, preset string) int {
	start := launch.StartEPD
	switch topology {
	case "E+PD":
	case "E+P+D":
		start = launch.StartEPPD
	default:
		fmt.Fprintf(os.Stderr, "topocheck: -topology %q (want E+PD or E+P+D)\n", topology)
		return 2
	}
	opts := launch.Options{Binary: bin, Preset: preset, Backend: backend, Device: device, Level: level, ProducerQuotaBytes: 256 << 20}
	switch level {
	case "faults":
		opts.FaultProxy, opts.TestHooks = true, true
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
	res, err := check.Run(ctx, topo.Target(), check.Options{ReportDir: reportDir, Out: os.Stdout, GPU: gpus, Certify: true})
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
	if res.Certificate == nil || !res.Certificate.Issued {
		fmt.Fprintf(os.Stderr, "topocheck: no certificate for level %s\n", level)
		code = 1
	}
	fmt.Printf("topocheck: %s over %s on %s, level %s: verdict %s; certificate issued %v; shutdown %v\n", topology, backend, device, level, res.Verdict, code == 0, shutErr)
	return code
}
