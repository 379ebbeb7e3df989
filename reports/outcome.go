package reports

import (
	"errors"
	"fmt"
)

// Outcome is the result of one check, one rule, one level or a whole run
// (CONTRACT.md "Outcomes of a check"). The zero value "" means "no outcome
// yet" and is only meaningful as the start of a Worst fold.
type Outcome string

// The outcomes of CONTRACT.md "Outcomes of a check", and nothing else.
const (
	// Passed: the case ran and every assertion held.
	Passed Outcome = "passed"
	// Failed: the target broke the rule.
	Failed Outcome = "failed"
	// Error: the harness itself could not run the case (the target is not at
	// fault, or not provably so).
	Error Outcome = "error"
	// NotApplicable: the target does not serve the topology, role or backend
	// the rule is about (L-2 without D, S-3 without cuda_ipc). Never counts as
	// passed.
	NotApplicable Outcome = "not applicable"
	// NotVerifiable: the rule applies but the target lacks an observable or a
	// hook the check needs (CONTRACT section 4). Not allowed at a claimed level.
	NotVerifiable Outcome = "not verifiable"
)

// Outcomes lists every valid Outcome from best to worst (Worst's order).
var Outcomes = []Outcome{NotApplicable, Passed, NotVerifiable, Error, Failed}

// ErrUnknownOutcome is returned (wrapped) when a file or caller names an
// outcome outside Outcomes.
var ErrUnknownOutcome = errors.New("reports: unknown outcome")

// severity ranks outcomes for Worst. Order, worst first:
//
//	failed > error > not verifiable > passed > not applicable > "" (none yet)
//
// Why: a failure is evidence against the target and must never be hidden by
// a harness problem; an error means a case did not run, which is worse than a
// case that could not be checked by design; not verifiable is worse than
// passed because CONTRACT section 5 forbids it at a claimed level; not
// applicable is the weakest, so it never turns a passed rule or level into
// anything else and a rule with only not-applicable cases stays not
// applicable (never passed). An unknown outcome ranks as error.
func severity(o Outcome) int {
	switch o {
	case "":
		return 0
	case NotApplicable:
		return 1
	case Passed:
		return 2
	case NotVerifiable:
		return 3
	case Error:
		return 4
	case Failed:
		return 5
	default:
		return 4 // unknown: the harness produced something it should not have
	}
}

// Worst returns the worse of a and b in the order
// failed > error > not verifiable > passed > not applicable (see severity).
// "" is the identity, so a fold may start from it. An unknown (invalid)
// outcome is treated as, and returned as, Error.
func Worst(a, b Outcome) Outcome {
	if !a.Valid() && a != "" {
		a = Error
	}
	if !b.Valid() && b != "" {
		b = Error
	}
	if severity(b) > severity(a) {
		return b
	}
	return a
}

// Valid reports whether o is one of the five outcomes of CONTRACT.md.
func (o Outcome) Valid() bool {
	switch o {
	case Passed, Failed, Error, NotApplicable, NotVerifiable:
		return true
	}
	return false
}

// ParseOutcome returns the Outcome named s, or an error wrapping
// ErrUnknownOutcome.
func ParseOutcome(s string) (Outcome, error) {
	o := Outcome(s)
	if !o.Valid() {
		return "", fmt.Errorf("%w %q (want passed, failed, error, not applicable or not verifiable)", ErrUnknownOutcome, s)
	}
	return o, nil
}

// UnmarshalText implements encoding.TextUnmarshaler, so a results.json with an
// unknown outcome is rejected (ErrUnknownOutcome) instead of read as garbage.
func (o *Outcome) UnmarshalText(text []byte) error {
	p, err := ParseOutcome(string(text))
	if err != nil {
		return err
	}
	*o = p
	return nil
}

// Tag is the fixed-width (5 characters) terminal tag of o: "PASS ", "FAIL ",
// "ERROR", "N/A  ", "N/V  ", or "?    " for an invalid outcome.
func (o Outcome) Tag() string {
	switch o {
	case Passed:
		return "PASS "
	case Failed:
		return "FAIL "
	case Error:
		return "ERROR"
	case NotApplicable:
		return "N/A  "
	case NotVerifiable:
		return "N/V  "
	}
	return "?    "
}
