package checks

import (
	"errors"

	"github.com/baton-dev/baton/sim/world"
)

// asFailure turns a message kept as a string (a stored diagnosis, the
// history check's) into a checker's error: nil for "".
func asFailure(msg string) error {
	if msg == "" {
		return nil
	}
	return errors.New(msg)
}

// checkStep runs the per-step checkers, in this order, until one fails,
// and returns that one's rule: the lifecycle checkers, then SU-2 after a
// crash, L-2, the KV sessions, N-2, Q-6, and the media checkers (L-3 at
// admission, the content hashes at publication (H-4, H-1), then the
// answers (B-2)). Called directly, not through a table of funcs: this runs
// after every step, and nineteen indirect calls a step were a few percent
// of a run; most checkers' "nothing new since the last step" test is
// inline (a checker split in two: the test, then its scan), so a step with
// nothing new to judge costs no call for them.
func checkStep(w *world.World) (rule string, err error) {
	if err := checkCore(w); err != nil {
		return "core", err
	}
	if rule, err := checkAnswers(w); err != nil {
		return rule, err
	}
	// SU-1 checkSingleUse, SU-3 checkReleaseAnswers, SU-1 checkNoUseAfterRelease
	if rule, err := checkEntries(w); err != nil {
		return rule, err
	}
	if !noPendingWrites(w) {
		if err := checkReceiveBuffers(w); err != nil {
			return "Q-1", err
		}
		if err := checkSources(w); err != nil {
			return "Q-3", err
		}
	}
	if err := checkNoLockAcrossCalls(w); err != nil {
		return "Q-5", err
	}
	if err := checkNoRevival(w); err != nil {
		return "C-2", err
	}
	// C-3 a cancelled stream, C-7 a failed send
	if rule, err := checkUndeliveredReleased(w); err != nil {
		return rule, err
	}
	if err := checkCleanupFailures(w); err != nil {
		return "X-1", err
	}
	if err := checkHealth(w); err != nil {
		return "Q-4", err
	}
	if err := checkCrashLost(w); err != nil {
		return "SU-2", err
	}
	if err := checkDecodePreparation(w); err != nil {
		return "L-2", err
	}
	if err := checkKVSessions(w); err != nil {
		return "kv-session", err
	}
	if err := checkNoEncoderOnDecode(w); err != nil {
		return "N-2", err
	}
	if err := checkQuarantineProofs(w); err != nil {
		return "Q-6", err
	}
	if err := checkCarriersRetired(w); err != nil {
		return "Q-6", err
	}
	if err := checkModality(w); err != nil {
		return "L-3", err
	}
	if err := checkWireHash(w); err != nil {
		return "H-4", err
	}
	if err := checkContentHash(w); err != nil {
		return "H-1", err
	}
	if err := checkMediaAnswers(w); err != nil {
		return "B-2", err
	}
	return "", nil
}

// checkEnd runs the end-of-run checks once the world converged.
func checkEnd(w *world.World) {
	if w.Opts.HistoryOnly {
		if err := checkHistory(w); err != nil {
			w.Failf(world.Correctness, "history", "%s", err)
		}
		return
	}
	if err := checkDrained(w); err != nil {
		w.Failf(world.Correctness, "S-4", "%s", err)
		return
	}
	if err := checkKVSessionsEnd(w); err != nil {
		w.Failf(world.Correctness, "kv-session", "%s", err)
		return
	}
	if err := checkHandoffsEnded(w); err != nil {
		w.Failf(world.Liveness, "liveness", "%s", err)
		return
	}
	if err := checkHistory(w); err != nil {
		w.Failf(world.Correctness, "history", "%s", err)
		return
	}
	for _, c := range endCheckers {
		if err := c.Check(w); err != nil {
			w.Failf(world.Correctness, c.Rule, "%s", err)
			return
		}
	}
}

// endCheckers run once at the end of a converged run, after the history
// check, in this order: Q-6, then the media end checkers.
var endCheckers = []world.Checker{
	{Rule: "Q-6", Check: checkProofsHonoured},
}

// mediaEndCheckers judge, once the run converged, the wrong answers B-2
// left to them: reuse only among items without content hash (H-2) or only
// among images sent with one uuid (H-5). They wait for the end because the
// narrower diagnosis needs the whole run: a cache that also reuses answers
// across distinct hashed images is B-2's failure, found when it shows.
var mediaEndCheckers = []world.Checker{
	{Rule: "H-2", Check: checkMissingHashAnswers},
	{Rule: "H-5", Check: checkUUIDAnswers},
}

func init() {
	endCheckers = append(endCheckers, mediaEndCheckers...)
}

// Default returns the checkers every world runs (package sim installs
// them with world.SetChecks): checkStep after every step, checkEnd once
// the world converged.
func Default() world.Checks {
	return world.Checks{Step: []world.Checker{{Ruled: checkStep}}, End: checkEnd}
}
