package world

import "errors"

// checkStep runs every per-step checker (one per check_*.go file) after a
// step; the first failure ends the run.
func (w *World) checkStep() {
	if w.fail != nil || w.opts.HistoryOnly {
		return
	}
	w.judged.pendingFresh = false
	w.runStepCheckers()
	w.judged.pendingFresh = false
}

// runStepCheckers runs stepCheckers in order until one fails.
func (w *World) runStepCheckers() {
	for i := range stepCheckers {
		c := &stepCheckers[i]
		rule, err := c.rule, error(nil)
		if c.ruled != nil {
			rule, err = c.ruled(w)
		} else {
			err = c.check(w)
		}
		if err != nil {
			w.failf(Correctness, rule, "%s", err)
			return
		}
	}
}

// checker is one named check over the whole world; check returns nil when
// it holds, else an error whose text is the failure line's message. A
// check of several rules is ruled instead: it returns the rule it found
// broken with its error.
type checker struct {
	rule  string
	check func(w *World) error
	ruled func(w *World) (rule string, err error)
}

// asFailure turns a message kept as a string (a stored diagnosis, the
// history check's) into a checker's error: nil for "".
func asFailure(msg string) error {
	if msg == "" {
		return nil
	}
	return errors.New(msg)
}

// stepCheckers run after every step, in this order.
var stepCheckers = []checker{
	{rule: "core", check: checkCore},
	{ruled: checkAnswers},
	{ruled: checkEntries}, // SU-1 checkSingleUse, SU-3 checkReleaseAnswers, SU-1 checkNoUseAfterRelease
	{"Q-1", checkReceiveBuffers, nil},
	{"Q-3", checkSources, nil},
	{"Q-5", checkNoLockAcrossCalls, nil},
	{"C-2", checkNoRevival, nil},
	{ruled: checkUndeliveredReleased}, // C-3 a cancelled stream, C-7 a failed send
	{"X-1", checkCleanupFailures, nil},
	{"Q-4", checkHealth, nil},
}

// checkEnd runs the end-of-run checks once the world converged.
func (w *World) checkEnd() {
	if w.opts.HistoryOnly {
		if err := checkHistory(w); err != nil {
			w.failf(Correctness, "history", "%s", err)
		}
		return
	}
	if err := checkDrained(w); err != nil {
		w.failf(Correctness, "S-4", "%s", err)
		return
	}
	if err := checkKVSessionsEnd(w); err != nil {
		w.failf(Correctness, "kv-session", "%s", err)
		return
	}
	if err := checkHandoffsEnded(w); err != nil {
		w.failf(Liveness, "liveness", "%s", err)
		return
	}
	if err := checkHistory(w); err != nil {
		w.failf(Correctness, "history", "%s", err)
		return
	}
	for _, c := range endCheckers {
		if err := c.check(w); err != nil {
			w.failf(Correctness, c.rule, "%s", err)
			return
		}
	}
}

// endCheckers run once at the end of a converged run, after the history
// check, in this order (appended by the files that define them).
var endCheckers []checker
