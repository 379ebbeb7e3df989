// Package nvml reads the NVIDIA device inventory (driver, CUDA version, and
// per GPU: name, UUID, memory, compute capability, utilization) that baton
// stamps on its reports (`baton check`, `baton bench`) and that the engine's
// Health check reports.
//
// The NVIDIA Management Library (libnvidia-ml.so.1) is opened at run time,
// never at build time: builds with cgo go through github.com/NVIDIA/go-nvml
// (which dlopens the library at nvml.Init); builds without cgo
// (CGO_ENABLED=0) call the same C entry points through
// github.com/ebitengine/purego. Nothing is opened at import time; only Read
// opens the library, and it closes it again before returning.
//
// On a machine without the library or without a loaded NVIDIA kernel driver
// (CI, laptops), Read returns an Inventory whose Note is NoDriverNote and no
// error: the absence of a GPU is a fact to report, not a failure.
package nvml
