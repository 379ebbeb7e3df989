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

// stepCheckers run after every step, in this order: the lifecycle
// checkers, then SU-2 after a crash, L-2, the KV sessions, N-2, Q-6, and
// the media checkers.
var stepCheckers = []world.Checker{
	{Rule: "core", Check: checkCore},
	{Ruled: checkAnswers},
	{Ruled: checkEntries}, // SU-1 checkSingleUse, SU-3 checkReleaseAnswers, SU-1 checkNoUseAfterRelease
	{Rule: "Q-1", Check: checkReceiveBuffers},
	{Rule: "Q-3", Check: checkSources},
	{Rule: "Q-5", Check: checkNoLockAcrossCalls},
	{Rule: "C-2", Check: checkNoRevival},
	{Ruled: checkUndeliveredReleased}, // C-3 a cancelled stream, C-7 a failed send
	{Rule: "X-1", Check: checkCleanupFailures},
	{Rule: "Q-4", Check: checkHealth},
	{Rule: "SU-2", Check: checkCrashLost},
	{Rule: "L-2", Check: checkDecodePreparation},
	{Rule: "kv-session", Check: checkKVSessions},
	{Rule: "N-2", Check: checkNoEncoderOnDecode},
	{Rule: "Q-6", Check: checkQuarantineProofs},
	{Rule: "Q-6", Check: checkCarriersRetired},
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

// mediaCheckers are the media model's per-step checkers, after the
// lifecycle ones: L-3 at admission, the content hashes at publication
// (H-4, H-1), then the answers (B-2).
var mediaCheckers = []world.Checker{
	{Rule: "L-3", Check: checkModality},
	{Rule: "H-4", Check: checkWireHash},
	{Rule: "H-1", Check: checkContentHash},
	{Rule: "B-2", Check: checkMediaAnswers},
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
	stepCheckers = append(stepCheckers, mediaCheckers...)
	endCheckers = append(endCheckers, mediaEndCheckers...)
}

// Default returns the checkers every world runs (package sim installs
// them with world.SetChecks): stepCheckers after every step, checkEnd once
// the world converged.
func Default() world.Checks { return world.Checks{Step: stepCheckers, End: checkEnd} }
