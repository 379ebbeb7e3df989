package reports

import "time"

// CaseResult is the outcome of one conformance case (one Ginkgo spec, one
// subtest).
type CaseResult struct {
	// Rule is the CONTRACT rule ID the case checks ("SU-2"); "" for a
	// harness-level node (a failed BeforeSuite), which then counts only
	// towards the overall verdict.
	Rule string `json:"rule"`
	// Name is the case's full name; it starts with the rule ID
	// ("SU-2 replay of a spent reference is rejected before any write").
	Name string `json:"name"`
	// Level is the conformance level in lower case ("core", "lifecycle",
	// "faults"), from the case's "level:" label; "" when it has none.
	Level string `json:"level"`
	// Labels are the case's Ginkgo labels (rule ID, "level:core", ...).
	Labels []string `json:"labels,omitempty"`
	// Outcome of the case.
	Outcome Outcome `json:"outcome"`
	// Message is the failure text (failed, error) or the skip reason (not
	// applicable, not verifiable), in the grpc-go style
	// `Consume(ref=3f2a..) = code OK, 12 tokens; want INVALID_ARGUMENT`;
	// "" for a passed case.
	Message string `json:"message,omitempty"`
	// DurationMs is the case's run time in milliseconds.
	DurationMs int64 `json:"duration_ms"`
}

// RuleResult is the verdict on one rule at one level: the worst of its
// cases' outcomes (Worst), or not verifiable when no case checked it.
type RuleResult struct {
	// Rule is the CONTRACT rule ID ("SU-2").
	Rule string `json:"rule"`
	// Level is the conformance level the rule was checked at ("core"); ""
	// when neither the level table nor the cases name one.
	Level string `json:"level"`
	// Outcome is the rule's verdict.
	Outcome Outcome `json:"outcome"`
	// Cases is the number of cases that ran for the rule (0: not verifiable).
	Cases int `json:"cases"`
	// Message is the text of the first case whose outcome is the verdict
	// (the first failing case of a failed rule, the first skip reason of a
	// not-applicable one); "" for a passed rule.
	Message string `json:"message,omitempty"`
}

// Results is one conformance run: what ran, against what, and the verdicts.
// Summarize fills Levels, Rules, Cases and Verdict; the runner fills the rest.
// Written as results.json by WriteJSON.
type Results struct {
	// Tool is the program that produced the results ("baton check").
	Tool string `json:"tool"`
	// BatonVersion is the version of that program ("(devel)" in a source build).
	BatonVersion string `json:"baton_version"`
	// SpecRevision names the contract the cases certify ("baton.encoder.v1").
	SpecRevision string `json:"spec_revision"`
	// Target is the target profile's name.
	Target string `json:"target"`
	// StartedAt is when the run started.
	StartedAt time.Time `json:"started_at"`
	// DurationMs is the run's wall time in milliseconds.
	DurationMs int64 `json:"duration_ms"`
	// LabelFilter is the Ginkgo label filter of the run ("" = every case).
	LabelFilter string `json:"label_filter"`
	// Levels maps a level ("core") to its verdict: the worst of its rules'
	// verdicts, not-applicable rules ignored (Worst).
	Levels map[string]Outcome `json:"levels"`
	// Rules are the per-rule verdicts, by level (core, lifecycle, faults,
	// then others) and within a level in the level table's order.
	Rules []RuleResult `json:"rules"`
	// Cases are every case that ran, in the order given to Summarize.
	Cases []CaseResult `json:"cases"`
	// Verdict is the whole run's verdict: the worst over Rules and over
	// rule-less (harness-level) cases; not verifiable when nothing ran.
	Verdict Outcome `json:"verdict"`
}
