package main

import (
	"fmt"
	"io"

	"github.com/baton-dev/baton/gpu/nvml"
	"github.com/baton-dev/baton/reports"
)

// gpuInventory reads the machine's GPUs through NVML for the report; without
// a driver it returns an empty list and says so on out.
func gpuInventory(out io.Writer) []reports.GPUDevice {
	inv, err := nvml.Read()
	if err != nil || !inv.HasGPU() {
		if out != nil {
			note := inv.Note
			if err != nil {
				note = err.Error()
			}
			fmt.Fprintf(out, "gpu: none in the report (%s)\n", note)
		}
		return []reports.GPUDevice{}
	}
	devices := make([]reports.GPUDevice, 0, len(inv.Devices))
	for _, d := range inv.Devices {
		devices = append(devices, reports.GPUDevice{Index: d.Index, Name: d.Name, UUID: d.UUID, MemoryBytes: d.MemoryTotalBytes, Driver: inv.Driver})
	}
	if out != nil {
		fmt.Fprintf(out, "gpu: %s\n", inv.Summary())
	}
	return devices
}
