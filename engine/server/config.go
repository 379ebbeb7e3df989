// Package server is the reference engine's gRPC front: openengine.v1
// Inference and Control plus the baton.encoder.v1 extension, for the roles E
// (encoder, the producer), PD (consumer), P (prefill) and D (decode) of
// E+P+D, and aggregated (the B-1 baseline).
// It maps wire requests to the lifecycle core (engine/handoff) and carries out
// the core's decisions with the encoder, the language model and the
// shared-directory backend. Locks guard the core only while it decides; no
// lock is held across file I/O, encoding or decoding (CONTRACT Q-5).
package server

import (
	"fmt"
	"slices"
	"time"

	"github.com/baton-dev/baton/engine/cache"
	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/encoder"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/xfer"
)

// Role is the engine's role (CONTRACT section 1).
type Role string

// Roles served by the reference engine.
const (
	RoleEncoder    Role = "encoder"    // E: publishes encoder outputs (EncoderRole PRODUCER)
	RolePD         Role = "pd"         // PD: consumes references and generates (EncoderRole CONSUMER)
	RoleAggregated Role = "aggregated" // encodes and generates in one process (EncoderRole NONE)
	RolePrefill    Role = "prefill"    // P: consumes references, runs prefill only, ends with PrefillReady (EngineRole PREFILL, EncoderRole CONSUMER)
	RoleDecode     Role = "decode"     // D: decodes from P's KV session and decode preparation (EngineRole DECODE, EncoderRole NONE)
)

// consumes reports whether the role consumes encoder references (PD and P).
func (r Role) consumes() bool { return r == RolePD || r == RolePrefill }

// Backend names on the wire (EncoderCacheRef.backend).
const (
	// BackendSharedDir: safetensors files in a directory shared on one host;
	// consumers claim entries by atomic rename.
	BackendSharedDir = cache.BackendSharedDir
	// BackendTCP: NIXL-style WRITE from the producer's memory into the
	// consumer's registered buffers over TCP (engine/xfer), asked for with
	// TransferEncoderCache.
	BackendTCP = cache.BackendTCP
	// BackendCUDAIPC: the producer keeps an entry in device memory and
	// lends its CUDA IPC handle through TransferEncoderCache; the consumer
	// copies device-to-device and gives the loan back (cudaipc.go,
	// engine/xfer/cuda_ipc.go; CONTRACT S-3). Needs a GPU on both sides.
	BackendCUDAIPC = cache.BackendCUDAIPC
)

// Config configures one engine instance.
type Config struct {
	// Role selects what Generate serves.
	Role Role
	// Preset is the encoder preset ("tiny", "base", "large").
	Preset string
	// CacheDir is the shared directory root (encoder role with the shared_dir
	// backend, and consumers accepting shared_dir).
	CacheDir string
	// Backend is the producer's backend: BackendSharedDir (default),
	// BackendTCP or BackendCUDAIPC.
	Backend string
	// AcceptBackends are the backends a consumer accepts (N-1; default:
	// shared_dir when CacheDir is set, tcp, and cuda_ipc when Device is a
	// CUDA device).
	AcceptBackends []string
	// TransferListen is where the tcp transfer agent listens (default 127.0.0.1:0).
	TransferListen string
	// TransferTimeout bounds one TransferEncoderCache call from the consumer,
	// and the producer's wait for its WRITE (default 10 s).
	TransferTimeout time.Duration
	// MaxTransferRequestBytes bounds the TransferEncoderCacheRequest a
	// consumer sends (bytes; default DefaultMaxTransferRequestBytes, what
	// every conformant producer accepts). A reference whose request would
	// be larger is the client's error (INVALID_ARGUMENT) before anything
	// is sent, never an uncertain outcome (attack A1; CONTRACT SE-4).
	MaxTransferRequestBytes int
	// TestHooks honours the baton.* test hooks of CONTRACT section 4 in
	// GenerateRequest.extra (testhooks.go): baton.encoder_delay_ms,
	// baton.encoder_fail, baton.cleanup_fail and baton.transfer_fail.
	// Without it every extra key is ignored. Never on in production.
	TestHooks bool
	// TrustedProducers are the peers a consumer (PD, P) may dial as a
	// producer's control endpoint, and D as P's control endpoint and
	// transfer agent (CONTRACT SE-3; entries "host:port", "host" or
	// "address/bits", trust.go). Empty: none, so every tcp or cuda_ipc
	// reference is FAILED_PRECONDITION before any connection.
	TrustedProducers []string
	// TrustedConsumers are the consumer transfer agents ("host:port" of
	// their metadata) a tcp producer may WRITE into (SE-3). Empty: none,
	// so every TransferEncoderCache is FAILED_PRECONDITION with the
	// before-write trailer.
	TrustedConsumers []string
	// AdvertiseControl is the host:port put in EncoderCacheRef.producer_endpoint
	// (default: the listen address).
	AdvertiseControl string
	// ProducerQuotaBytes bounds the payload bytes of published entries (L-5; default 256 MiB).
	ProducerQuotaBytes int64
	// ConsumerQuotaBytes bounds receive bytes in flight (L-5; default 256 MiB).
	ConsumerQuotaBytes int64
	// DefaultTTL and MaxTTL bound a published entry's life (X-2; defaults 60 s
	// and 10 min). DefaultTTL is also how long P keeps a KV session D has
	// not fetched, and MaxTTL how long D remembers a session it attached to.
	DefaultTTL, MaxTTL time.Duration
	// CollectInterval is how often the producer expires entries and looks for
	// claimed ones (default 200 ms).
	CollectInterval time.Duration
	// DrainTimeout bounds a drain when Shutdown gives none (default 30 s).
	DrainTimeout time.Duration
	// ShutdownLinger keeps Control answering (Health DRAINING, Shutdown
	// ALREADY_SHUTTING_DOWN) this long after a drain completes (default 300 ms).
	ShutdownLinger time.Duration
	// HandshakeTimeout bounds how long an accepted connection may take to
	// complete its TLS and HTTP/2 handshakes before the server closes it
	// (grpc.ConnectionTimeout; default 10 s, gRPC's own is 120 s): a client
	// that opens connections and sends nothing holds a file descriptor each
	// for that long (SE-4; attack F5 of stop 22 exhausted PD's 20000
	// descriptors with idle connections).
	HandshakeTimeout time.Duration
	// MediaLimits bound media before decoding (L-6).
	MediaLimits encoder.Limits
	// MaxRequestPixels bounds the decoded pixels of all a request's images
	// together (L-6; --max-request-pixels; 0 = the package's
	// MaxRequestPixels, 40 megapixels). The decode budget must hold one
	// such request (DecodeBudget.MaxBytes >= it * DecodedBytesPerPixel), so
	// a deployment, or a test, that wants a small budget lowers it too.
	MaxRequestPixels int64
	// ModelSeed selects the language model; EncoderSeed the encoder weights.
	ModelSeed, EncoderSeed uint64
	// ExecutorMode is ExecutorAsync (default) or ExecutorSync (--executor-mode).
	ExecutorMode string
	// MaxBatchRequests bounds the requests of one encoder batch (default 8).
	MaxBatchRequests int
	// TensorParallel is the number of simulated tensor-parallel ranks of
	// the executor (--tp, default 1): each rank takes every scheduling
	// decision and a divergence makes Health NOT_READY.
	TensorParallel int
	// ExecutorInvariants checks the executor core's invariants after every
	// decision and panics on a broken one (tests only: O(requests) a call).
	ExecutorInvariants bool
	// ModelArchitecture is the language side's architecture: "decoder-only"
	// (default) or "encoder-decoder" (--model-architecture; E+P+D serves
	// decoder-only only).
	ModelArchitecture string
	// Device is where the engine computes: "cpu" (default) or "cuda:N"
	// (the CUDA encoder on device N, and the device of the cuda_ipc backend).
	Device string
	// FS is the file system of the shared directory; nil is the real disk
	// (shareddir.OSFS). Tests inject failures through it (ENOSPC).
	FS shareddir.FS
	// IPCDevice replaces the CUDA device of the cuda_ipc backend (tests:
	// xfer.FakeIPC); nil opens the device Device names.
	IPCDevice xfer.IPCDevice
	// Security turns on TLS (and mTLS) on every listener and operator
	// authorization (CONTRACT SE-1, SE-2; security.go). The zero value
	// serves plaintext without authorization.
	Security Security
	// DecodeBudget bounds decoding across all requests together (CONTRACT
	// SE-4; budget.go). Zero fields take their defaults.
	DecodeBudget DecodeBudget
	// Hooks replace single decisions; nil fields keep the contract's decision.
	// Only conformance/mutants sets them.
	Hooks Hooks

	// wrapAgent, set only by this package's tests, wraps the tcp transfer
	// agent New starts (every use of it, the store's included), so a test
	// can order two calls' agent operations deterministically (the A4
	// race of TransferEncoderCache).
	wrapAgent func(xfer.Agent) xfer.Agent
}

// needsTransferAgent reports whether the engine runs a tcp transfer agent:
// the producer with the tcp backend, a consumer (PD, P) accepting tcp, P
// (its KV sessions are READ from its registered memory) and D (it READs them).
func (c *Config) needsTransferAgent() bool {
	switch c.Role {
	case RoleEncoder:
		return c.Backend == BackendTCP
	case RolePD:
		return slices.Contains(c.AcceptBackends, BackendTCP)
	case RolePrefill, RoleDecode:
		return true
	}
	return false
}

// ModelName is the served model name for a preset.
func ModelName(preset string) string { return "baton-vlm-" + preset }

func (c *Config) fill() error {
	switch c.Role {
	case RoleEncoder, RolePD, RoleAggregated, RolePrefill, RoleDecode:
	default:
		return fmt.Errorf("server: unknown role %q (want encoder, pd, prefill, decode or aggregated)", c.Role)
	}
	if c.Preset == "" {
		c.Preset = "base"
	}
	if _, err := encoder.PresetByName(c.Preset); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if c.Backend == "" {
		c.Backend = BackendSharedDir
	}
	if c.Backend != BackendSharedDir && c.Backend != BackendTCP && c.Backend != BackendCUDAIPC {
		return fmt.Errorf("server: --backend %q (want %s, %s or %s)", c.Backend, BackendSharedDir, BackendTCP, BackendCUDAIPC)
	}
	if c.Device == "" {
		c.Device = "cpu"
	}
	if _, _, err := ParseDevice(c.Device); err != nil {
		return err
	}
	if c.Role == RoleEncoder && c.Backend == BackendSharedDir && c.CacheDir == "" {
		return fmt.Errorf("server: role encoder with the shared_dir backend needs --cache-dir")
	}
	if c.Role.consumes() && len(c.AcceptBackends) == 0 {
		if c.CacheDir != "" {
			c.AcceptBackends = append(c.AcceptBackends, BackendSharedDir)
		}
		c.AcceptBackends = append(c.AcceptBackends, BackendTCP)
		if c.Device != "cpu" {
			c.AcceptBackends = append(c.AcceptBackends, BackendCUDAIPC)
		}
	}
	for _, b := range c.AcceptBackends {
		if b != BackendSharedDir && b != BackendTCP && b != BackendCUDAIPC {
			return fmt.Errorf("server: accepted backend %q (want %s, %s or %s)", b, BackendSharedDir, BackendTCP, BackendCUDAIPC)
		}
		if b == BackendSharedDir && c.CacheDir == "" {
			return fmt.Errorf("server: a consumer accepting shared_dir needs --cache-dir")
		}
	}
	switch c.ExecutorMode {
	case "":
		c.ExecutorMode = ExecutorAsync
	case ExecutorAsync, ExecutorSync:
	default:
		return fmt.Errorf("server: --executor-mode %q (want %s or %s)", c.ExecutorMode, ExecutorAsync, ExecutorSync)
	}
	if c.MaxBatchRequests == 0 {
		c.MaxBatchRequests = 8
	}
	if c.MaxBatchRequests < 1 || c.MaxBatchRequests > 1024 {
		return fmt.Errorf("server: --max-batch-requests %d (want 1..1024; 0 takes the default, 8)", c.MaxBatchRequests)
	}
	if c.TensorParallel == 0 {
		c.TensorParallel = 1
	}
	if c.TensorParallel < 1 || c.TensorParallel > 8 {
		return fmt.Errorf("server: --tp %d (want 1..8; 0 takes the default, 1)", c.TensorParallel)
	}
	arch, err := lm.ArchitectureByName(c.ModelArchitecture)
	if err != nil {
		return fmt.Errorf("server: --model-architecture: %w", err)
	}
	if arch == lm.EncoderDecoder && (c.Role == RolePrefill || c.Role == RoleDecode) {
		return fmt.Errorf("server: --model-architecture encoder-decoder serves the encoder, pd and aggregated roles (E+P+D moves a decoder-only KV session)")
	}
	if c.TransferListen == "" {
		c.TransferListen = "127.0.0.1:0"
	}
	if c.TransferTimeout == 0 {
		c.TransferTimeout = 10 * time.Second
	}
	if c.MaxTransferRequestBytes == 0 {
		c.MaxTransferRequestBytes = DefaultMaxTransferRequestBytes
	}
	if c.MaxTransferRequestBytes < 0 || c.MaxTransferRequestBytes > MaxMessageBytes {
		return fmt.Errorf("server: MaxTransferRequestBytes %d (want 1..%d; 0 takes the default, %d)", c.MaxTransferRequestBytes, MaxMessageBytes, DefaultMaxTransferRequestBytes)
	}
	if c.ProducerQuotaBytes == 0 {
		c.ProducerQuotaBytes = 256 << 20
	}
	if c.ConsumerQuotaBytes == 0 {
		c.ConsumerQuotaBytes = 256 << 20
	}
	if c.DefaultTTL == 0 {
		c.DefaultTTL = 60 * time.Second
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = 10 * time.Minute
	}
	if c.CollectInterval == 0 {
		c.CollectInterval = 200 * time.Millisecond
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.ShutdownLinger == 0 {
		c.ShutdownLinger = 300 * time.Millisecond
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.MediaLimits == (encoder.Limits{}) {
		c.MediaLimits = encoder.DefaultLimits()
	}
	if c.MaxRequestPixels == 0 {
		c.MaxRequestPixels = MaxRequestPixels
	}
	if c.MaxRequestPixels < 1 {
		return fmt.Errorf("server: --max-request-pixels %d (want at least 1; 0 takes the default, %d)", c.MaxRequestPixels, int64(MaxRequestPixels))
	}
	c.DecodeBudget = c.DecodeBudget.withDefaults()
	if err := c.DecodeBudget.check(largestRequestPixels(c.MediaLimits, c.MaxRequestPixels)); err != nil {
		return err
	}
	if c.EncoderSeed == 0 {
		c.EncoderSeed = encoder.DefaultSeed
	}
	if c.ModelSeed == 0 {
		c.ModelSeed = DefaultModelSeed
	}
	return nil
}

// DefaultModelSeed selects the reference engine's language model.
const DefaultModelSeed = 0x626174_6f6e
