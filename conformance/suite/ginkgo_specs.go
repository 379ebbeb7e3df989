package suite

import (
	"sync"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads as prose
	"github.com/onsi/ginkgo/v2/types"
)

// SuiteName is the text of the one top-level Ginkgo container; it is the
// wire profile the cases certify.
const SuiteName = "baton.encoder.v1"

// defaultCaseTimeout bounds a spec when no target is set yet or its
// profile gives no case_timeout (target.ParseConfig's default).
const defaultCaseTimeout = 60 * time.Second

var (
	targetMu  sync.RWMutex
	theTarget target.Target

	describeOnce sync.Once

	observerMu sync.RWMutex
	observer   func(caseName string, outcome Outcome)
)

// SetCaseObserver sets a function called after every case with its name and
// outcome (a runner's progress display); nil removes it.
func SetCaseObserver(f func(caseName string, outcome Outcome)) {
	observerMu.Lock()
	defer observerMu.Unlock()
	observer = f
}

// SetTarget sets the Target the Ginkgo specs run against. Call it before
// RunSpecs (the spec tree reads the profile's case_timeout when it is
// built); it is safe for concurrent use.
func SetTarget(tg target.Target) {
	targetMu.Lock()
	defer targetMu.Unlock()
	theTarget = tg
}

// currentTarget returns the Target set by SetTarget, or nil.
func currentTarget() target.Target {
	targetMu.RLock()
	defer targetMu.RUnlock()
	return theTarget
}

// The specs are registered when this package is initialised, so a runner
// (conformance/check) only calls SetTarget and RunSpecs.
var _ = DescribeSuite()

// DescribeSuite registers the conformance cases as Ginkgo specs: ONE
// top-level Describe(SuiteName) holding one It per Cases() entry, in
// registry order, so Ginkgo's top-level shuffle cannot move the destructive
// cases off the end; the container is Ordered (even --randomize-all keeps
// the registry order) with ContinueOnFailure (a failed case does not skip
// the rest). Each It is labelled with the rule ID, "level:<level>" and the
// case's labels, and bounded by the target profile's case_timeout
// (NodeTimeout on the It alone, read when RunSpecs builds the tree; 60 s
// without a target): the runner's probes of the endpoints before and after
// a case (conformance/check's guard, bounded by their own timeouts) do not
// count against it, so an endpoint whose probe hangs cannot make the next
// case time out and fail.
//
// The package registers the specs at init (var _ = DescribeSuite()); calls
// after the first do nothing and return true. A runner does:
//
//	suite.SetTarget(tg)
//	RunSpecs(t, "baton conformance", suiteConfig, reporterConfig)
//
// Any binary importing this package (conformance.Run's callers too) holds
// the specs; one that runs its own Ginkgo suite runs them as well, and
// without SetTarget each fails with a harness error.
func DescribeSuite() bool {
	describeOnce.Do(func() {
		Describe(SuiteName, Ordered, ContinueOnFailure, func() {
			ReportAfterEach(func(r SpecReport) {
				observerMu.RLock()
				f := observer
				observerMu.RUnlock()
				if f != nil && !(r.State.Is(types.SpecStateSkipped) && r.Failure.Message == "") {
					f(r.LeafNodeText, OutcomeOf(r.Failed(), r.State.Is(types.SpecStateSkipped), r.Failure.Message))
				}
			})
			timeout := defaultCaseTimeout
			if tg := currentTarget(); tg != nil && tg.Profile().CaseTimeout > 0 {
				timeout = tg.Profile().CaseTimeout
			}
			for _, c := range Cases() {
				labels := append([]string{c.Rule, "level:" + string(c.Level)}, c.Labels...)
				It(c.Name, Label(labels...), NodeTimeout(timeout), func(ctx SpecContext) {
					tg := currentTarget()
					if tg == nil {
						HarnessError(GinkgoT(), "no target: call suite.SetTarget before RunSpecs")
					}
					c.Execute(ctx, GinkgoT(), tg)
				})
			}
		})
	})
	return true
}
