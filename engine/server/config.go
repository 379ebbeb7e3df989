// Package server is the reference engine's gRPC front: openengine.v1
// Inference and Control plus the baton.encoder.v1 extension, for the roles E
// (encoder, the producer), PD (consumer) and aggregated (the B-1 baseline).
// It maps wire requests to the lifecycle core (engine/handoff) and carries out
// the core's decisions with the encoder, the language model and the
// shared-directory backend. Locks guard the core only while it decides; no
// lock is held across file I/O, encoding or decoding (CONTRACT Q-5).
package server

import (
	"fmt"
	"time"

	"github.com/baton-dev/baton/engine/encoder"
)

// Role is the engine's role (CONTRACT section 1).
type Role string

// Roles served by the reference engine.
const (
	RoleEncoder    Role = "encoder"    // E: publishes encoder outputs (EncoderRole PRODUCER)
	RolePD         Role = "pd"         // PD: consumes references and generates (EncoderRole CONSUMER)
	RoleAggregated Role = "aggregated" // encodes and generates in one process (EncoderRole NONE)
)

// BackendSharedDir is the shared-directory backend's name on the wire
// (EncoderCacheRef.backend).
const BackendSharedDir = "shared_dir"

// Config configures one engine instance.
type Config struct {
	// Role selects what Generate serves.
	Role Role
	// Preset is the encoder preset ("tiny", "base", "large").
	Preset string
	// CacheDir is the shared directory root (encoder and pd roles).
	CacheDir string
	// AdvertiseControl is the host:port put in EncoderCacheRef.producer_endpoint
	// (default: the listen address).
	AdvertiseControl string
	// ProducerQuotaBytes bounds the payload bytes of published entries (L-5; default 256 MiB).
	ProducerQuotaBytes int64
	// ConsumerQuotaBytes bounds receive bytes in flight (L-5; default 256 MiB).
	ConsumerQuotaBytes int64
	// DefaultTTL and MaxTTL bound a published entry's life (X-2; defaults 60 s and 10 min).
	DefaultTTL, MaxTTL time.Duration
	// CollectInterval is how often the producer expires entries and looks for
	// claimed ones (default 200 ms).
	CollectInterval time.Duration
	// DrainTimeout bounds a drain when Shutdown gives none (default 30 s).
	DrainTimeout time.Duration
	// ShutdownLinger keeps Control answering (Health DRAINING, Shutdown
	// ALREADY_SHUTTING_DOWN) this long after a drain completes (default 300 ms).
	ShutdownLinger time.Duration
	// MediaLimits bound media before decoding (L-6).
	MediaLimits encoder.Limits
	// ModelSeed selects the language model; EncoderSeed the encoder weights.
	ModelSeed, EncoderSeed uint64
	// Hooks replace single decisions; nil fields keep the contract's decision.
	// Only conformance/mutants sets them.
	Hooks Hooks
}

// ModelName is the served model name for a preset.
func ModelName(preset string) string { return "baton-vlm-" + preset }

func (c *Config) fill() error {
	switch c.Role {
	case RoleEncoder, RolePD, RoleAggregated:
	default:
		return fmt.Errorf("server: unknown role %q (want encoder, pd or aggregated)", c.Role)
	}
	if c.Preset == "" {
		c.Preset = "base"
	}
	if _, err := encoder.PresetByName(c.Preset); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if (c.Role == RoleEncoder || c.Role == RolePD) && c.CacheDir == "" {
		return fmt.Errorf("server: role %s needs a cache directory", c.Role)
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
	if c.MediaLimits == (encoder.Limits{}) {
		c.MediaLimits = encoder.DefaultLimits()
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
