package check

import (
	"time"

	"github.com/baton-dev/baton/conformance/target"
)

// caseTimeoutTarget is tg with Profile().CaseTimeout replaced, which is how
// Options.CaseTimeout reaches the suite's per-case SpecTimeout (the suite
// reads the profile's case_timeout when RunSpecs builds the spec tree). It
// forwards only target.Target's methods: if the suite ever type-asserts a
// target for optional capabilities, pass the timeout through a suite setter
// instead.
type caseTimeoutTarget struct {
	target.Target
	caseTimeout time.Duration
}

func withCaseTimeout(tg target.Target, d time.Duration) target.Target {
	return caseTimeoutTarget{Target: tg, caseTimeout: d}
}

// Profile implements target.Target.
func (t caseTimeoutTarget) Profile() target.Profile {
	p := t.Target.Profile()
	p.CaseTimeout = t.caseTimeout
	return p
}
