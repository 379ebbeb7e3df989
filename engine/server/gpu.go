package server

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/engine/cache/cudaipc"
	cudaenc "github.com/baton-dev/baton/engine/encoder/cuda"
	"github.com/baton-dev/baton/gpu/nvml"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/protobuf/proto"
)

// ParseDevice parses Config.Device: "cpu" or "cuda:N" (N a CUDA device
// ordinal, 0..1023) into its kind ("cpu", "cuda") and ordinal. Errors name
// the flag (--device) and the accepted forms.
func ParseDevice(s string) (kind string, ordinal int, err error) {
	if s == "cpu" {
		return "cpu", 0, nil
	}
	if rest, ok := strings.CutPrefix(s, "cuda:"); ok {
		n, err := strconv.Atoi(rest)
		if err == nil && n >= 0 && n < 1024 && strconv.Itoa(n) == rest {
			return "cuda", n, nil
		}
	}
	return "", 0, fmt.Errorf("server: --device %.40q (want cpu or cuda:N, N a device ordinal)", s)
}

// usesIPC reports whether the engine moves entries over cuda_ipc: the
// producer with that backend, or a consumer accepting it.
func (c *Config) usesIPC() bool {
	if c.Role == RoleEncoder {
		return c.Backend == BackendCUDAIPC
	}
	return c.Role.consumes() && slices.Contains(c.AcceptBackends, BackendCUDAIPC)
}

// usesGPU reports whether the engine runs anything on a GPU.
func (c *Config) usesGPU() bool { return c.Device != "cpu" || c.usesIPC() }

// startGPU sets the engine up on its GPU, failing the start with a clear
// error where the GPU is missing: the CUDA encoder for --device cuda:N
// (roles that encode), the cuda_ipc producer's device (opened now), and a
// consumer accepting cuda_ipc (checked through NVML, which does not
// initialize CUDA; the device is opened on the first cuda_ipc receive).
func (e *Engine) startGPU() error {
	c := &e.cfg
	kind, ordinal, err := ParseDevice(c.Device)
	if err != nil {
		return err
	}
	if kind == "cuda" && (c.Role == RoleEncoder || c.Role == RoleAggregated) {
		enc, err := cudaenc.New(cudaenc.Config{Preset: e.preset, Seed: c.EncoderSeed, Device: ordinal})
		if err != nil {
			return fmt.Errorf("server: --device %s: the CUDA encoder: %w", c.Device, err)
		}
		e.encoder = enc
	}
	switch {
	case !c.usesIPC():
	case c.Role == RoleEncoder:
		dev, err := e.ipcDevice()
		if err != nil {
			e.closeEncoder()
			return err
		}
		store, err := cudaipc.New(dev)
		if err != nil {
			e.closeEncoder()
			return err
		}
		e.store = store
	case c.IPCDevice == nil:
		inv, err := nvml.Read()
		if err == nil && !inv.HasGPU() {
			err = fmt.Errorf("%s", inv.Summary())
		}
		if err != nil {
			e.closeEncoder()
			return fmt.Errorf("server: accepting cuda_ipc needs a GPU: %w (drop cuda_ipc from --accept-backends)", err)
		}
	}
	return nil
}

func (e *Engine) closeEncoder() {
	if c, ok := e.encoder.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

// gpuCheckMaxAge bounds how often Health reads NVML (once a second at most).
const gpuCheckMaxAge = time.Second

// gpuHealthCheck is the Health check "gpu" of an engine that uses a GPU
// (none otherwise): READY with NVML's one-line inventory, or DEGRADED with
// the reason NVML could not be read (the GPU may still work through CUDA;
// the overall state does not change). NVML is read at most once per
// gpuCheckMaxAge; Health calls in between get the last answer.
func (e *Engine) gpuHealthCheck() []*pb.HealthCheck {
	if !e.cfg.usesGPU() {
		return nil
	}
	g := &e.gpu
	g.checkMu.Lock()
	defer g.checkMu.Unlock()
	if g.check == nil || e.now().Sub(g.checkAt) >= gpuCheckMaxAge {
		c := &pb.HealthCheck{Name: "gpu", State: pb.HealthState_HEALTH_STATE_READY}
		inv, err := nvml.Read()
		switch {
		case err != nil:
			c.State, c.Message = pb.HealthState_HEALTH_STATE_DEGRADED, fmt.Sprintf("device %s: NVML: %v", e.cfg.Device, err)
		case !inv.HasGPU():
			c.State, c.Message = pb.HealthState_HEALTH_STATE_DEGRADED, fmt.Sprintf("device %s: NVML: %s", e.cfg.Device, inv.Summary())
		default:
			c.Message = fmt.Sprintf("device %s: %s", e.cfg.Device, inv.Summary())
		}
		g.check, g.checkAt = c, e.now()
	}
	return []*pb.HealthCheck{proto.Clone(g.check).(*pb.HealthCheck)}
}
