package launch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/baton-dev/baton/conformance/faultproxy"
	"github.com/baton-dev/baton/conformance/target"
)

// StartEPPD starts E+P+D as four processes: E (`--role encoder`, backend
// Options.Backend, default "tcp"), P (`--role prefill`, accepting the
// references), D (`--role decode`, which READs P's KV sessions through its
// tcp transfer agent) and the aggregated baseline. Config() then declares
// topology "E+P+D" with endpoints producer, prefill, decode and baseline;
// Shutdown and Kill work as for StartEPD. With Options.FaultProxy the proxy
// sits between P and E's control address, as between PD and E in StartEPD.
func StartEPPD(ctx context.Context, opts Options) (*Topology, error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	if opts.Backend == "" {
		opts.Backend = "tcp"
	}
	if opts.FaultProxy && opts.TransferTimeout == 0 {
		opts.TransferTimeout = 3 * time.Second
	}
	t := &Topology{CacheDir: filepath.Join(opts.WorkDir, "cache"), opts: opts, topology: target.TopologyEPPD}
	var err error
	if opts.FaultProxy {
		t.proxy, err = faultproxy.New("", faultproxy.Options{})
		if err != nil {
			return nil, fmt.Errorf("launch: fault proxy: %w", err)
		}
	}
	for _, p := range []struct {
		role string
		dst  **Process
	}{{"encoder", &t.Producer}, {"prefill", &t.Prefill}, {"decode", &t.Decode}, {"aggregated", &t.Baseline}} {
		*p.dst, err = t.start(ctx, p.role)
		if err != nil {
			t.Kill()
			return nil, err
		}
	}
	for _, p := range t.processes() {
		if err := p.waitReady(ctx, opts.StartTimeout); err != nil {
			t.Kill()
			return nil, err
		}
	}
	if t.proxy != nil {
		if err := t.proxy.SetUpstream(t.Producer.Address); err != nil {
			t.Kill()
			return nil, err
		}
	}
	return t, nil
}
