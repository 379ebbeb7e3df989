package check

import (
	"context"
	"fmt"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/reports"
)

// Identities asks every endpoint of tg who it is (GetServerInfo,
// GetModelInfo; ProbeTimeout each) and returns one identity per role, in
// probe order (producer, consumer, prefill, decode, baseline). An endpoint
// that does not answer keeps only its role and address: identities are
// recorded for the reports (the cross-implementation matrix names a run's
// producer and consumer by them), never judged here (Probe judges).
func Identities(ctx context.Context, tg target.Target) []reports.EngineIdentity {
	var out []reports.EngineIdentity
	for _, r := range probeRoles {
		e, ok := tg.Engine(r)
		if !ok || e == nil {
			continue
		}
		id := reports.EngineIdentity{Role: string(r)}
		if a, ok := e.(interface{ Address() string }); ok {
			id.Address = a.Address()
		}
		cctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
		if si, err := e.GetServerInfo(cctx); err == nil {
			id.EngineName, id.EngineVersion = si.GetEngineName(), si.GetEngineVersion()
			id.Preset = si.GetExtra().GetFields()["baton.preset"].GetStringValue()
		}
		cancel()
		cctx, cancel = context.WithTimeout(ctx, ProbeTimeout)
		if mi, err := e.GetModelInfo(cctx, tg.Profile().Model); err == nil {
			id.Model = mi.GetModelId()
		}
		cancel()
		out = append(out, id)
	}
	return out
}

// ModelsDiffer returns "" when the producer and the consumer (P where there
// is no consumer) recorded in ids run one model and preset, or when either
// did not say; else a one-line reason naming both (target.ModelComparer).
// Within one implementation the preflight already requires one model and
// preset (identityProblems), so only two implementations meeting in one
// topology (the cross-implementation matrix) get here with a difference.
func ModelsDiffer(ids []reports.EngineIdentity) string {
	find := func(roles ...target.Role) (reports.EngineIdentity, bool) {
		for _, r := range roles {
			for _, id := range ids {
				if id.Role == string(r) && id.EngineName != "" {
					return id, true
				}
			}
		}
		return reports.EngineIdentity{}, false
	}
	p, okP := find(target.RoleProducer)
	c, okC := find(target.RoleConsumer, target.RolePrefill)
	if !okP || !okC || (p.Model == c.Model && p.Preset == c.Preset) {
		return ""
	}
	return fmt.Sprintf("the producer is %s (model %q, preset %q) and the %s %s (model %q, preset %q)", p.EngineName, p.Model, p.Preset, c.Role, c.EngineName, c.Model, c.Preset)
}
