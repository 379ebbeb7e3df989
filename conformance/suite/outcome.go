package suite

import (
	"fmt"
	"strings"
)

// Message prefixes that tell the outcome of a case that did not pass or fail
// (CONTRACT "Outcomes of a check"). The report code maps skip and failure
// messages to outcomes by these prefixes (see OutcomeOf).
const (
	// NotApplicablePrefix starts the skip message of a case about a topology,
	// role or backend the target does not serve.
	NotApplicablePrefix = "not applicable: "
	// NotVerifiablePrefix starts the skip message of a case whose rule
	// applies but which needs an observable, hook, declared format or limit
	// the profile lacks.
	NotVerifiablePrefix = "not verifiable: "
	// HarnessErrorPrefix starts the failure message of a case the harness
	// itself could not run (cannot reach the engine, fixture missing,
	// inconsistent profile).
	HarnessErrorPrefix = "harness error: "
)

// Outcome is the result of one case (CONTRACT "Outcomes of a check").
type Outcome string

// The outcomes of a case. How a rule's verdict is drawn from its cases'
// outcomes (CONTRACT: "the worst of its cases'") is the report code's job.
const (
	OutcomePassed        Outcome = "passed"
	OutcomeNotApplicable Outcome = "not applicable"
	OutcomeNotVerifiable Outcome = "not verifiable"
	OutcomeError         Outcome = "error"
	OutcomeFailed        Outcome = "failed"
)

// NotApplicable ends the case as `not applicable`: the target does not
// serve the topology, role or backend the case is about. It calls
// t.Skipf("not applicable: <why>") and does not return.
func NotApplicable(t TB, why string) {
	t.Helper()
	t.Skipf("%s%s", NotApplicablePrefix, why)
}

// NotVerifiable ends the case as `not verifiable`: the rule applies but the
// target's profile lacks what the check needs (an observable, a declared
// reference format, a quota, permission to shut down). It calls
// t.Skipf("not verifiable: <why>") and does not return.
func NotVerifiable(t TB, why string) {
	t.Helper()
	t.Skipf("%s%s", NotVerifiablePrefix, why)
}

// HarnessError ends the case as `error`: the harness itself could not run
// it. It calls t.Fatalf("harness error: <message>") and does not return.
func HarnessError(t TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s%s", HarnessErrorPrefix, fmt.Sprintf(format, args...))
}

// OutcomeOf maps a finished case to its outcome. failed and skipped are the
// runner's flags; messages are the case's failure messages (for a failed
// case) or its skip message (for a skipped one). A failed case whose every
// failure message starts with HarnessErrorPrefix is OutcomeError; any other
// failure is OutcomeFailed (a failure outranks a later skip). A skip is
// OutcomeNotApplicable or OutcomeNotVerifiable by its prefix; a skip with
// neither prefix is OutcomeNotVerifiable (a case that did not check its rule
// never counts as passed).
func OutcomeOf(failed, skipped bool, messages ...string) Outcome {
	if failed {
		if len(messages) == 0 {
			return OutcomeFailed
		}
		for _, m := range messages {
			if !strings.HasPrefix(strings.TrimSpace(m), HarnessErrorPrefix) {
				return OutcomeFailed
			}
		}
		return OutcomeError
	}
	if skipped {
		for _, m := range messages {
			if strings.HasPrefix(strings.TrimSpace(m), NotApplicablePrefix) {
				return OutcomeNotApplicable
			}
		}
		return OutcomeNotVerifiable
	}
	return OutcomePassed
}
