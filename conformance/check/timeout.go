package check

import (
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/reports"
)

// runTarget is the target a run hands the suite: tg with
// Profile().CaseTimeout replaced when caseTimeout > 0 (which is how
// Options.CaseTimeout reaches the suite's per-case SpecTimeout; the suite
// reads the profile's case_timeout when RunSpecs builds the spec tree) and,
// with a Recorder, every engine wrapped so each call is recorded, and with
// a guard, every engine behind the guard's gate (availability.go).
type runTarget struct {
	target.Target
	caseTimeout time.Duration
	rec         *Recorder
	guard       *guard
	// modelsDiffer is ModelsDiffer of the identities asked before the run.
	modelsDiffer string
}

// ModelsDiffer implements target.ModelComparer from the endpoints'
// identities the runner asked before any case (Identities, ModelsDiffer).
func (t *runTarget) ModelsDiffer() string { return t.modelsDiffer }

// wrapTarget returns tg wrapped as a runTarget that still implements the
// optional capabilities tg implements (target.FaultInjector,
// target.Restarter), so a case that type-asserts them sees the same target.
func wrapTarget(tg target.Target, caseTimeout time.Duration, rec *Recorder, g *guard, engines []reports.EngineIdentity) target.Target {
	rt := &runTarget{Target: tg, caseTimeout: caseTimeout, rec: rec, guard: g, modelsDiffer: ModelsDiffer(engines)}
	fi, isFI := tg.(target.FaultInjector)
	rs, isRS := tg.(target.Restarter)
	switch {
	case isFI && isRS:
		return struct {
			*runTarget
			target.FaultInjector
			target.Restarter
		}{rt, fi, rs}
	case isFI:
		return struct {
			*runTarget
			target.FaultInjector
		}{rt, fi}
	case isRS:
		return struct {
			*runTarget
			target.Restarter
		}{rt, rs}
	}
	return rt
}

// UnwrapTarget implements target.TargetWrapper: the suite's
// target.Capability finds the other capabilities of the wrapped target.
func (t *runTarget) UnwrapTarget() target.Target { return t.Target }

// Profile implements target.Target.
func (t *runTarget) Profile() target.Profile {
	p := t.Target.Profile()
	if t.caseTimeout > 0 {
		p.CaseTimeout = t.caseTimeout
	}
	return p
}

// Engine implements target.Target: the endpoint of role, behind the
// guard's gate and recorded when the run has them (the transcript shows
// the guard's answers too).
func (t *runTarget) Engine(role target.Role) (target.Engine, bool) {
	e, ok := t.Target.Engine(role)
	if !ok || e == nil {
		return e, ok
	}
	if t.guard != nil {
		e = t.guard.Engine(role, e)
	}
	if t.rec != nil {
		e = t.rec.Engine(role, e)
	}
	return e, true
}
