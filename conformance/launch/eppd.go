package launch

import (
	"context"

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
	if opts.Backend == "" {
		opts.Backend = "tcp"
	}
	t := &Topology{opts: opts, topology: target.TopologyEPPD}
	return t.startAll(ctx, []roleSlot{{"encoder", &t.Producer, ""}, {"prefill", &t.Prefill, ""}, {"decode", &t.Decode, ""}, {"aggregated", &t.Baseline, ""}})
}
