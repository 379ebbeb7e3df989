// Package conformance runs baton's conformance cases (package
// conformance/suite) against an implementation from plain `go test`, the way
// golang.org/x/net/nettest.TestConn and testing/fstest.TestFS check theirs:
//
//	func TestBatonConformance(t *testing.T) {
//		conformance.Run(t, func() (target.Target, func(), error) {
//			tg, err := startMyEngines()
//			return tg, func() { tg.Close() }, err
//		})
//	}
//
// Each case is a subtest named after it ("SU-2 replay of ..."), so
// `go test -run 'TestBatonConformance/SU-2'` selects a rule. A case that does
// not apply to the target skips with "not applicable: ...", one the target
// cannot be checked for with "not verifiable: ..."; a harness failure fails
// with "harness error: ..." (see suite.OutcomeOf).
package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/target"
)

// defaultCaseTimeout bounds a case when the profile gives no case_timeout.
const defaultCaseTimeout = 60 * time.Second

// Run runs every case of suite.Cases() as a subtest of t, in registry
// order (destructive cases last). makeTarget starts a target and returns it
// with a function that stops it; it is called once for all non-destructive
// cases (lazily, at the first one; stopped before the destructive ones) and
// once more for each destructive case, which gets a fresh target to itself
// and stops it afterwards (so the case needs no restart: the fresh target
// counts as one, target.Restarter). A makeTarget error fails that subtest as a
// harness error. Each case runs under a context bounded by the target
// profile's CaseTimeout (60 s when unset) and by t's deadline.
func Run(t *testing.T, makeTarget func() (target.Target, func(), error)) {
	t.Helper()
	var (
		shared     target.Target
		stopShared func()
		sharedErr  error
		started    bool
	)
	stop := func() {
		if stopShared != nil {
			stopShared()
			stopShared = nil
		}
	}
	defer stop()

	for _, c := range suite.Cases() {
		if c.Destructive {
			stop() // the shared target is done with; free its resources first
		}
		t.Run(c.Name, func(t *testing.T) {
			var tg target.Target
			if c.Destructive {
				fresh, stopFresh, err := makeTarget()
				if stopFresh != nil {
					defer stopFresh()
				}
				if err != nil {
					suite.HarnessError(t, "makeTarget for a destructive case: %v", err)
				}
				tg = disposable(fresh)
			} else {
				if !started {
					started = true
					shared, stopShared, sharedErr = makeTarget()
				}
				if sharedErr != nil {
					suite.HarnessError(t, "makeTarget: %v", sharedErr)
				}
				tg = shared
			}
			if tg == nil {
				suite.HarnessError(t, "makeTarget returned no target")
			}
			ctx, cancel := caseContext(t, tg.Profile().CaseTimeout)
			defer cancel()
			c.Execute(ctx, t, tg)
		})
	}
}

// disposable makes a fresh target of a destructive case a Restarter, when
// it is not one already: it is stopped after the case and the next case
// gets its own, so what the case takes down needs no restart (CONTRACT
// section 3: destructive cases run "against an instance the harness
// started for them"). FaultInjector is kept.
func disposable(tg target.Target) target.Target {
	if tg == nil {
		return nil
	}
	if _, ok := tg.(target.Restarter); ok {
		return tg
	}
	if fi, ok := tg.(target.FaultInjector); ok {
		return struct {
			target.Target
			target.FaultInjector
			target.Restarter
		}{tg, fi, noRestart{}}
	}
	return struct {
		target.Target
		target.Restarter
	}{tg, noRestart{}}
}

// noRestart is the Restarter of a disposable target: nothing to bring back.
type noRestart struct{}

// Restart implements target.Restarter.
func (noRestart) Restart(context.Context, target.Role) error { return nil }

// caseContext bounds a case by timeout (defaultCaseTimeout when zero) and
// by t's deadline, whichever comes first.
func caseContext(t *testing.T, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		timeout = defaultCaseTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	if dl, ok := t.Deadline(); ok {
		ctx2, cancel2 := context.WithDeadline(ctx, dl)
		return ctx2, func() { cancel2(); cancel() }
	}
	return ctx, cancel
}
