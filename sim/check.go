package sim

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
		rule, msg := c.rule, ""
		if c.ruled != nil {
			rule, msg = c.ruled(w)
		} else {
			msg = c.check(w)
		}
		if msg != "" {
			w.failf(Correctness, rule, "%s", msg)
			return
		}
	}
}

// checker is one named check over the whole world; check returns "" when
// it holds. A check of several rules is ruled instead: it returns the rule
// it found broken with its message.
type checker struct {
	rule  string
	check func(w *World) string
	ruled func(w *World) (rule, msg string)
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
	{"C-3", checkUndeliveredReleased, nil},
	{"X-1", checkCleanupFailures, nil},
	{"Q-4", checkHealth, nil},
}

// checkEnd runs the end-of-run checks once the world converged.
func (w *World) checkEnd() {
	if w.opts.HistoryOnly {
		if msg := checkHistory(w); msg != "" {
			w.failf(Correctness, "history", "%s", msg)
		}
		return
	}
	if msg := checkDrained(w); msg != "" {
		w.failf(Correctness, "S-4", "%s", msg)
		return
	}
	if msg := checkKVSessionsEnd(w); msg != "" {
		w.failf(Correctness, "kv-session", "%s", msg)
		return
	}
	if msg := checkHandoffsEnded(w); msg != "" {
		w.failf(Liveness, "liveness", "%s", msg)
		return
	}
	if msg := checkHistory(w); msg != "" {
		w.failf(Correctness, "history", "%s", msg)
		return
	}
	for _, c := range endCheckers {
		if msg := c.check(w); msg != "" {
			w.failf(Correctness, c.rule, "%s", msg)
			return
		}
	}
}

// endCheckers run once at the end of a converged run, after the history
// check, in this order (appended by the files that define them).
var endCheckers []checker
