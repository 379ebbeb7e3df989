// Package check runs baton's conformance suite (conformance/suite, the
// baton.encoder.v1 Ginkgo specs) in-process against one target.Target and
// turns Ginkgo's report into baton's verdicts (package reports): per rule,
// per level and overall, in results.json, results.yaml, junit.xml,
// report.html and one terminal line per rule. It is what `baton check
// --config target.yaml` calls.
//
// Before a run, NewPlan decides from the cases' labels and the profile
// alone which cases would be not applicable or not verifiable (`baton check
// --dry-run`), and Plan.CertifyProblems whether a certification run
// (`--certify`) can verify every rule of the claimed level; Run refuses one
// that cannot (ErrCannotCertify). Only the cases of the claimed levels run
// (ClaimedFilter). During a run a Recorder wraps every engine of the target
// and records each call per case (redacted: opaque state and media only as
// sizes and hash prefixes), which gives the failed cases' transcripts and
// the handoff latency plots of report.html.
//
// The driver, as the CLI runs it:
//
//	tg, err := target.Dial(cfg)          // lazy gRPC connections
//	if err := check.Probe(ctx, tg); err != nil {
//		return 3                           // not a baton.encoder.v1 target, or unreachable
//	}
//	res, err := check.Run(ctx, tg, check.Options{LabelFilter: "SU-2 || L-6", ReportDir: "report", Out: os.Stdout})
//	if err != nil {
//		return 3
//	}
//	return reports.ExitCode(res)         // 0 passed, 1 failed, 2 error / not verifiable
//
// Probe is also the preflight: before any case it checks that the
// endpoints are what the profile says (roles, backends, preset, model,
// declared topologies, observables and test hooks honoured, consumers that
// see the producer's shared directory); a mismatch is ErrProfileMismatch,
// one line naming the profile field and both values (exit 3), never a rule
// failure.
//
// During a run a guard probes every endpoint after each case
// (availability.go): an endpoint that went down, started draining or
// became NOT_READY during a case that does not declare it
// (suite.Case.MayTakeDown) fails that case's rule ("the target went down
// during this case"), and until it answers READY again (recovered, or
// restarted through a target.Restarter) every later case's calls to it are
// answered UNAVAILABLE by the harness and such a case is an error ("target
// unavailable since <case>"), never failed. A case that does not finish
// within the case timeout is failed for its rule. A run filtered by a
// label filter reports the rules it ran but no level verdict.
//
// Ginkgo allows one RunSpecs per process, so Run runs once per process
// (ErrAlreadyRan after); anything that needs several runs (the mutant
// table) starts several processes (ARCHITECTURE.md "Conformance for any
// implementation").
//
// How a Ginkgo spec becomes a case (CasesFromReports): the rule is the first
// label shaped like a rule ID (^[A-Z]{1,2}-[0-9]+$), the level the "level:"
// label; passed -> passed; failed, panicked, timed out, interrupted ->
// failed, unless the failure text starts with "harness error:" -> error;
// aborted -> error; skipped with "not applicable: " / "not verifiable: " ->
// that outcome, skipped with any other text -> not verifiable (never
// passed); skipped without text (filtered out by the label filter) and
// pending specs are left out, except that a selected spec that never ran
// because the run stopped early is an error. A failed suite-level node
// (BeforeSuite, AfterSuite, ...) becomes a rule-less error case.
package check
