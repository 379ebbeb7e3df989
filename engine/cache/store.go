// Package cache names what every producer store does, whatever its
// backend: the producer's lifecycle table (engine/handoff) decides, and a
// Store only does the I/O it is told to. The stores are
// engine/cache/shareddir (files consumers claim by atomic rename),
// engine/cache/memory (registered host memory a tcp WRITE streams from)
// and engine/cache/cudaipc (device allocations lent by IPC handle).
package cache

import (
	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/xfer"
)

// Backend names on the wire (EncoderCacheRef.backend, WIRE.md).
const (
	// BackendSharedDir: safetensors files in a directory shared on one host;
	// consumers claim entries by atomic rename.
	BackendSharedDir = "shared_dir"
	// BackendTCP: NIXL-style WRITE from the producer's memory into the
	// consumer's registered buffers over TCP (engine/xfer), asked for with
	// TransferEncoderCache.
	BackendTCP = "tcp"
	// BackendCUDAIPC: the producer keeps an entry in device memory and
	// lends its CUDA IPC handle through TransferEncoderCache; the consumer
	// copies device-to-device and gives the loan back (engine/xfer/cuda_ipc.go;
	// CONTRACT S-3). Needs a GPU on both sides.
	BackendCUDAIPC = xfer.BackendCUDAIPC
)

// Store holds a producer's published entries for one backend. Ids are the
// producer's entry ids (CONTRACT SU-6); every method may be called from
// several goroutines.
type Store interface {
	// Backend is the EncoderCacheRef.backend name of references to this
	// store: one of the Backend constants.
	Backend() string
	// Key is the producer instance's HMAC key for its references (SU-5).
	Key() []byte
	// Write makes an entry durable and visible under its id; meta is kept
	// by stores that have a place for it (the safetensors header).
	Write(id string, tensors []shareddir.Tensor, meta map[string]string) error
	// KeepsTensors reports whether Write keeps the tensors' bytes as the
	// entry's memory (then they must be the entry's own); otherwise Write
	// copies them out before it returns (a file, a device upload).
	KeepsTensors() bool
	// Remove takes an entry's storage; won is false when it was already
	// gone (a consumer claimed it first). An error is a failed cleanup.
	Remove(id string) (won bool, err error)
	// Exists reports whether the entry's storage is still there (a consumer
	// may claim it behind the producer's back: shared directory).
	Exists(id string) (bool, error)
	// Collect removes stale leftovers (temp files); nowMs is wall-clock
	// milliseconds since the Unix epoch.
	Collect(nowMs int64) error
	// Close removes everything the store holds (S-4).
	Close() error
}

// Quarantining is a Store that keeps sources quarantined after a transfer
// failed past the claim (CONTRACT Q-3) until a proof frees them.
type Quarantining interface {
	Store
	// QuarantinedSources returns how many sources are quarantined and
	// their bytes.
	QuarantinedSources() (n int, bytes int64)
}

// Short abbreviates an entry id for error messages and logs: its first 8
// characters and "..".
func Short(id string) string {
	if len(id) > 8 {
		return id[:8] + ".."
	}
	return id
}
