package reports

import "time"

// CaseResult is the outcome of one conformance case (one Ginkgo spec, one
// subtest).
type CaseResult struct {
	// Rule is the CONTRACT rule ID the case checks ("SU-2"); "" for a
	// harness-level node (a failed BeforeSuite), which then counts only
	// towards the overall verdict.
	Rule string `json:"rule" yaml:"rule"`
	// Name is the case's full name; it starts with the rule ID
	// ("SU-2 replay of a spent reference is rejected before any write").
	Name string `json:"name" yaml:"name"`
	// Level is the conformance level in lower case ("core", "lifecycle",
	// "faults"), from the case's "level:" label; "" when it has none.
	Level string `json:"level" yaml:"level"`
	// Labels are the case's Ginkgo labels (rule ID, "level:core", ...).
	Labels []string `json:"labels,omitempty" yaml:"labels,omitempty"`
	// Outcome of the case.
	Outcome Outcome `json:"outcome" yaml:"outcome"`
	// Message is the failure text (failed, error) or the skip reason (not
	// applicable, not verifiable), in the grpc-go style
	// `Consume(ref=3f2a..) = code OK, 12 tokens; want INVALID_ARGUMENT`;
	// "" for a passed case.
	Message string `json:"message,omitempty" yaml:"message,omitempty"`
	// DurationMs is the case's run time in milliseconds.
	DurationMs int64 `json:"duration_ms" yaml:"duration_ms"`
	// Transcript is the case's calls to the target in order (redacted,
	// bounded to TranscriptMaxCalls), kept for failed and error cases only.
	Transcript []Call `json:"transcript,omitempty" yaml:"transcript,omitempty"`
	// TranscriptDroppedCalls counts the calls left out of Transcript once it
	// was full.
	TranscriptDroppedCalls int `json:"transcript_dropped_calls,omitempty" yaml:"transcript_dropped_calls,omitempty"`
	// Backends are the backends the case handed an encoder output off over:
	// EncoderCacheRef.backend of each consume that answered OK ("shared_dir"),
	// sorted. A certificate covers only backends passed cases used.
	Backends []string `json:"backends,omitempty" yaml:"backends,omitempty"`
}

// RuleResult is the verdict on one rule at one level: the worst of its
// cases' outcomes (Worst), or not verifiable when no case checked it.
type RuleResult struct {
	// Rule is the CONTRACT rule ID ("SU-2").
	Rule string `json:"rule" yaml:"rule"`
	// Level is the conformance level the rule was checked at ("core"); ""
	// when neither the level table nor the cases name one.
	Level string `json:"level" yaml:"level"`
	// Outcome is the rule's verdict.
	Outcome Outcome `json:"outcome" yaml:"outcome"`
	// Cases is the number of cases that ran for the rule (0: not verifiable).
	Cases int `json:"cases" yaml:"cases"`
	// NotApplicableCases is how many of Cases were not applicable (a
	// passed rule's line counts them apart: "(1 case; 2 not applicable)").
	NotApplicableCases int `json:"not_applicable_cases,omitempty" yaml:"not_applicable_cases,omitempty"`
	// Message is the text of the first case whose outcome is the verdict
	// (the first failing case of a failed rule, the first skip reason of a
	// not-applicable one); "" for a passed rule.
	Message string `json:"message,omitempty" yaml:"message,omitempty"`
	// Requirement is the rule's sentence from the test list (the first
	// sentence of its CONTRACT.md entry); "" when the runner had none.
	Requirement string `json:"requirement,omitempty" yaml:"requirement,omitempty"`
	// Contract locates the rule's text: "CONTRACT.md#single-use-su" (the
	// GitHub anchor of the section that holds it).
	Contract string `json:"contract,omitempty" yaml:"contract,omitempty"`
}

// Results is one conformance run: what ran, against what, and the verdicts.
// Summarize fills Levels, Rules, Cases and Verdict; the runner fills the rest.
// Written as results.json by WriteJSON and, with the same keys, as
// results.yaml by WriteYAML; report.html (WriteHTML) and the certification
// bundle (WriteBundle) are rendered from it alone.
type Results struct {
	// Tool is the program that produced the results ("baton check").
	Tool string `json:"tool" yaml:"tool"`
	// BatonVersion is the version of that program ("(devel)" in a source build).
	BatonVersion string `json:"baton_version" yaml:"baton_version"`
	// BatonCommit is the VCS revision the program was built from (build
	// info vcs.revision, "-dirty" appended for a modified tree), or "unknown".
	BatonCommit string `json:"baton_commit" yaml:"baton_commit"`
	// SpecRevision names the contract the cases certify ("baton.encoder.v1").
	SpecRevision string `json:"spec_revision" yaml:"spec_revision"`
	// Target is the target profile's name.
	Target string `json:"target" yaml:"target"`
	// Implementation is the profile's vendor metadata; nil when it named none.
	Implementation *Implementation `json:"implementation,omitempty" yaml:"implementation,omitempty"`
	// Command is the command line of the run, shell-quoted ("baton check
	// --config target.yaml --certify ..."); "" when unknown.
	Command string `json:"command,omitempty" yaml:"command,omitempty"`
	// ConfigPath is the target profile file as given on the command line
	// ("" when the profile was built in memory, as by `baton demo`).
	ConfigPath string `json:"config_path,omitempty" yaml:"config_path,omitempty"`
	// Config is the target profile with secrets removed (RedactConfig), as
	// a generic YAML/JSON object.
	Config map[string]any `json:"config,omitempty" yaml:"config,omitempty"`
	// ClaimedLevel is the level the profile claims ("core"); the report
	// covers it and the levels below it.
	ClaimedLevel string `json:"claimed_level,omitempty" yaml:"claimed_level,omitempty"`
	// Topologies and Backends are what the profile declares ("E+PD",
	// "shared_dir").
	Topologies []string `json:"topologies,omitempty" yaml:"topologies,omitempty"`
	Backends   []string `json:"backends,omitempty" yaml:"backends,omitempty"` // the profile's declared backends
	// StartedAt is when the run started (its date).
	StartedAt time.Time `json:"started_at" yaml:"started_at"`
	// DurationMs is the run's wall time in milliseconds.
	DurationMs int64 `json:"duration_ms" yaml:"duration_ms"`
	// LabelFilter is the Ginkgo label filter of the run ("" = every case).
	LabelFilter string `json:"label_filter" yaml:"label_filter"`
	// Levels maps a level ("core") to its verdict: the worst of its rules'
	// verdicts, not-applicable rules ignored (Worst). Empty when the run
	// gives no level verdict (NoLevelVerdict).
	Levels map[string]Outcome `json:"levels" yaml:"levels"`
	// NoLevelVerdict says why the run gives no level verdict:
	// NoLevelVerdictFiltered for a run a label filter restricted (it checked
	// only some rules of its levels, so it claims none); "" otherwise.
	NoLevelVerdict string `json:"no_level_verdict,omitempty" yaml:"no_level_verdict,omitempty"`
	// Rules are the per-rule verdicts, by level (core, lifecycle, faults,
	// then others) and within a level in the level table's order.
	Rules []RuleResult `json:"rules" yaml:"rules"`
	// Cases are every case that ran, in the order given to Summarize.
	Cases []CaseResult `json:"cases" yaml:"cases"`
	// Verdict is the whole run's verdict: the worst over Rules and over
	// rule-less (harness-level) cases; not verifiable when nothing ran.
	Verdict Outcome `json:"verdict" yaml:"verdict"`
	// Certificate is the certification decision of a `--certify` run
	// (IssueCertificate); nil for an ordinary run.
	Certificate *Certificate `json:"certificate,omitempty" yaml:"certificate,omitempty"`
	// HandoffLatency holds the publish and consume latencies the run
	// observed, per topology (from the recorded calls; report.html plots
	// them).
	HandoffLatency []LatencySeries `json:"handoff_latency,omitempty" yaml:"handoff_latency,omitempty"`
	// GPU is the GPU inventory of the machine that ran the check (empty
	// until a GPU backend fills it).
	GPU []GPUDevice `json:"gpu" yaml:"gpu"`
	// Engines is what each endpoint said about itself at the probe, by
	// role (the cross-implementation matrix reads the producer's and the
	// consumer's engine names from it).
	Engines []EngineIdentity `json:"engines,omitempty" yaml:"engines,omitempty"`
}

// Implementation is the vendor's description of the engine under test, as
// the target profile's `implementation:` block gives it (free text).
type Implementation struct {
	// Vendor is the organization that ships the engine.
	Vendor string `json:"vendor" yaml:"vendor"`
	// Product is the engine's name.
	Product string `json:"product" yaml:"product"`
	// Version is the engine's version under test.
	Version string `json:"version" yaml:"version"`
	// Contact is who answers for the submission (e-mail or URL).
	Contact string `json:"contact" yaml:"contact"`
}

// IsZero reports whether every field is empty.
func (i Implementation) IsZero() bool { return i == Implementation{} }

// GPUDevice is one GPU of the machine that ran the check.
type GPUDevice struct {
	// Index is the device's ordinal (CUDA/NVML index).
	Index int `json:"index" yaml:"index"`
	// Name is the product name ("NVIDIA H200").
	Name string `json:"name" yaml:"name"`
	// UUID is the device's stable identity ("GPU-...").
	UUID string `json:"uuid,omitempty" yaml:"uuid,omitempty"`
	// MemoryBytes is the device's total memory in bytes.
	MemoryBytes uint64 `json:"memory_bytes,omitempty" yaml:"memory_bytes,omitempty"`
	// Driver is the driver version ("550.54.15").
	Driver string `json:"driver,omitempty" yaml:"driver,omitempty"`
}
