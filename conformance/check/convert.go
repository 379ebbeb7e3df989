package check

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/reports"
	"github.com/onsi/ginkgo/v2/types"
)

// SuiteDescribe is the text of the suite's top-level container
// (suite.SuiteName); it is left out of case names ("SU-2 replay ..." rather
// than "baton.encoder.v1 SU-2 ...").
const SuiteDescribe = suite.SuiteName

// Message prefixes the suite uses (conformance/suite): a skipped case's text
// starts with one of the first two, a harness failure's with the third.
const (
	PrefixNotApplicable = "not applicable: "
	PrefixNotVerifiable = "not verifiable: "
	PrefixHarnessError  = "harness error:"
)

// TimeoutMessage starts the message of a case that did not finish within
// the case timeout (profile case_timeout, --case-timeout).
const TimeoutMessage = "the target did not answer within the case timeout"

// LevelLabelPrefix starts a spec's level label ("level:core").
const LevelLabelPrefix = "level:"

// ruleLabel matches a CONTRACT rule ID label ("SU-2", "L-6", "H-1").
var ruleLabel = regexp.MustCompile(`^[A-Z]{1,2}-[0-9]+$`)

// ansiEscape matches terminal colour sequences, removed from messages so
// reports stay readable outside a terminal.
var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// RuleOfLabels returns the first label that is a rule ID (^[A-Z]{1,2}-[0-9]+$),
// or "".
func RuleOfLabels(labels []string) string {
	for _, l := range labels {
		if ruleLabel.MatchString(l) {
			return l
		}
	}
	return ""
}

// LevelOfLabels returns the level of the first "level:" label, lower case
// ("level:Core" -> "core"), or "".
func LevelOfLabels(labels []string) string {
	for _, l := range labels {
		if len(l) > len(LevelLabelPrefix) && strings.EqualFold(l[:len(LevelLabelPrefix)], LevelLabelPrefix) {
			return strings.ToLower(strings.TrimSpace(l[len(LevelLabelPrefix):]))
		}
	}
	return ""
}

// CasesFromReports converts Ginkgo suite reports (the content of a Ginkgo
// JSON report) into case results, in report order. Specs that did not run
// as a case (filtered out by the label filter, pending) are left out; see
// the package comment for the mapping. When the run was stopped early
// (interrupted, suite timeout, an aborted spec), a spec the label filter
// selected but that never ran is an error case ("harness error: did not
// run: ..."), so a stopped run never reports its remaining rules as passed.
func CasesFromReports(rs []types.Report) []reports.CaseResult {
	var out []reports.CaseResult
	for _, r := range rs {
		stopped := stopReason(r)
		var selected types.LabelFilter
		if stopped != "" {
			selected, _ = types.ParseLabelFilter(r.SuiteConfig.LabelFilter)
		}
		for _, sr := range r.SpecReports {
			if c, ok := CaseFromSpec(sr); ok {
				out = append(out, c)
				continue
			}
			if stopped != "" && selected != nil && didNotRun(sr) && selected(sr.Labels()) {
				labels := sr.Labels()
				out = append(out, reports.CaseResult{
					Rule:    RuleOfLabels(labels),
					Name:    caseName(sr),
					Level:   LevelOfLabels(labels),
					Labels:  labels,
					Outcome: reports.Error,
					Message: PrefixHarnessError + " did not run: " + stopped,
				})
			}
		}
	}
	return out
}

// stopReason says why a run ended early, or "" when it ran to its end.
func stopReason(r types.Report) string {
	reasons := append([]string(nil), r.SpecialSuiteFailureReasons...)
	for _, sr := range r.SpecReports {
		if sr.State.Is(types.SpecStateAborted) {
			reasons = append(reasons, "the suite was aborted by "+caseName(sr))
			break
		}
	}
	return strings.Join(reasons, "; ")
}

// didNotRun reports whether sr is an It spec Ginkgo skipped without a
// message (label filter, interrupt, timeout or abort; never a Skip call).
func didNotRun(sr types.SpecReport) bool {
	return sr.LeafNodeType.Is(types.NodeTypeIt) && sr.State.Is(types.SpecStateSkipped) &&
		strings.TrimSpace(sr.Failure.Message) == ""
}

// CaseFromSpec converts one Ginkgo SpecReport; ok is false for a spec that
// is not a case outcome: skipped without any message (filtered out by the
// label filter, or never reached), pending, a suite-level node that did not
// fail, a container. A skip whose message has neither the
// "not applicable: " nor the "not verifiable: " prefix is not verifiable.
func CaseFromSpec(sr types.SpecReport) (c reports.CaseResult, ok bool) {
	switch {
	case sr.LeafNodeType.Is(types.NodeTypeIt):
		return caseFromIt(sr)
	case sr.LeafNodeType.Is(types.NodeTypesForSuiteLevelNodes):
		return caseFromSuiteNode(sr)
	}
	return reports.CaseResult{}, false
}

func caseFromIt(sr types.SpecReport) (reports.CaseResult, bool) {
	labels := sr.Labels()
	c := reports.CaseResult{
		Rule:       RuleOfLabels(labels),
		Name:       caseName(sr),
		Level:      LevelOfLabels(labels),
		Labels:     labels,
		DurationMs: sr.RunTime.Milliseconds(),
	}
	msg := strings.TrimSpace(cleanText(sr.Failure.Message))
	switch {
	case sr.State.Is(types.SpecStatePassed):
		c.Outcome = reports.Passed
	case sr.State.Is(types.SpecStateSkipped):
		switch {
		case strings.HasPrefix(msg, PrefixNotApplicable):
			c.Outcome = reports.NotApplicable
		case strings.HasPrefix(msg, PrefixNotVerifiable):
			c.Outcome = reports.NotVerifiable
		case msg == "":
			return reports.CaseResult{}, false // filtered out by the label filter, or never reached
		default:
			// Skipped for another reason ("Spec skipped because a BeforeAll
			// node failed"): the rule was not checked, which is never passed
			// (as suite.OutcomeOf).
			c.Outcome = reports.NotVerifiable
			msg = PrefixNotVerifiable + msg
		}
		c.Message = msg
	case sr.State.Is(types.SpecStatePending):
		return reports.CaseResult{}, false
	case sr.State.Is(types.SpecStateFailed | types.SpecStatePanicked | types.SpecStateTimedout | types.SpecStateInterrupted):
		c.Outcome = reports.Failed
		if strings.HasPrefix(msg, PrefixHarnessError) {
			c.Outcome = reports.Error
		}
		c.Message = failureText(sr)
		if sr.State.Is(types.SpecStateTimedout) {
			// A hang is a failure of the rule the case checks (CONTRACT
			// "Outcomes of a check"); a case against an endpoint already
			// down is turned into an error by the run's guard.
			c.Outcome = reports.Failed
			c.Message = TimeoutMessage + "\n" + c.Message
		}
	default: // aborted (AbortSuite) or an invalid state: the run, not the target
		c.Outcome = reports.Error
		c.Message = failureText(sr)
		if !strings.HasPrefix(c.Message, PrefixHarnessError) {
			c.Message = fmt.Sprintf("%s spec %s: %s", PrefixHarnessError, sr.State, c.Message)
		}
	}
	return c, true
}

// caseFromSuiteNode records a failed BeforeSuite/AfterSuite/... as a
// rule-less error: every case depends on it, and the target is not shown at
// fault by it.
func caseFromSuiteNode(sr types.SpecReport) (reports.CaseResult, bool) {
	if !sr.State.Is(types.SpecStateFailureStates) {
		return reports.CaseResult{}, false
	}
	msg := failureText(sr)
	if !strings.HasPrefix(msg, PrefixHarnessError) {
		msg = fmt.Sprintf("%s %s %s: %s", PrefixHarnessError, sr.LeafNodeType, sr.State, msg)
	}
	return reports.CaseResult{
		Name:       "[" + sr.LeafNodeType.String() + "]",
		Labels:     sr.Labels(),
		Outcome:    reports.Error,
		Message:    msg,
		DurationMs: sr.RunTime.Milliseconds(),
	}, true
}

// caseName is the spec's full text without the suite's top-level container.
func caseName(sr types.SpecReport) string {
	var texts []string
	for i, t := range sr.ContainerHierarchyTexts {
		if i == 0 && t == SuiteDescribe {
			continue
		}
		if t != "" {
			texts = append(texts, t)
		}
	}
	if sr.LeafNodeText != "" {
		texts = append(texts, sr.LeafNodeText)
	}
	return strings.Join(texts, " ")
}

// failureText is the failure message, the panic if any, and where it
// happened ("at file.go:12"), with any follow-on failure.
func failureText(sr types.SpecReport) string {
	f := sr.Failure
	parts := []string{strings.TrimSpace(cleanText(f.Message))}
	if f.ForwardedPanic != "" {
		parts = append(parts, "panic: "+cleanText(f.ForwardedPanic))
	}
	if f.Location.FileName != "" {
		parts = append(parts, "at "+f.Location.String())
	}
	if af := f.AdditionalFailure; af != nil && af.Failure.Message != "" {
		parts = append(parts, fmt.Sprintf("then %s: %s", af.State, strings.TrimSpace(cleanText(af.Failure.Message))))
	}
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return fmt.Sprintf("spec %s without a message", sr.State)
	}
	return strings.Join(out, "\n")
}

func cleanText(s string) string {
	return ansiEscape.ReplaceAllString(s, "")
}
