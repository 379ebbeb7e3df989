package reports

// Exit codes of a conformance run (ExitCode), for scripts and CI.
const (
	// ExitPassed: every rule passed or is not applicable.
	ExitPassed = 0
	// ExitFailed: at least one rule failed (whatever else happened).
	ExitFailed = 1
	// ExitIncomplete: no rule failed, but some rule (or harness-level case)
	// ended in error or not verifiable, so the run certifies nothing at its
	// level (CONTRACT section 5).
	ExitIncomplete = 2
	// ExitSetup is reserved for the CLI: the target probe failed or the
	// configuration is bad, so no case ran. ExitCode never returns it.
	ExitSetup = 3
)

// ExitCode maps a run's overall verdict to a process exit code:
//
//	0 (ExitPassed)     every rule passed or is not applicable
//	1 (ExitFailed)     some rule failed
//	2 (ExitIncomplete) error or not verifiable, but no failure
//	3 (ExitSetup)      never returned here: the CLI's code for a failed
//	                   target probe or a bad configuration
//
// The verdict used is the worst of res.Verdict and every rule's outcome, so
// a hand-built Results whose Verdict was not recomputed still cannot exit 0
// over a failed rule. A run where nothing was checked (no verdict, or not
// verifiable) exits 2.
func ExitCode(res Results) int {
	v := res.Verdict
	for _, r := range res.Rules {
		v = Worst(v, r.Outcome)
	}
	switch v {
	case Passed, NotApplicable:
		return ExitPassed
	case Failed:
		return ExitFailed
	default:
		return ExitIncomplete
	}
}
