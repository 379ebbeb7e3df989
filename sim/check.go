package sim

// checkStep runs every per-step checker (one per check_*.go file) after a
// step; the first failure ends the run.
func (w *World) checkStep() {
	if w.fail != nil || w.opts.HistoryOnly {
		return
	}
	for _, c := range stepCheckers {
		if msg := c.check(w); msg != "" {
			w.failf(Correctness, c.rule, "%s", msg)
			return
		}
	}
}

// checker is one named check over the whole world; check returns "" when it holds.
type checker struct {
	rule  string
	check func(w *World) string
}

// stepCheckers run after every step, in this order.
var stepCheckers = []checker{
	{"core", checkCore},
	{"SU-1", checkSingleUse},
	{"SU-3", checkReleaseAnswers},
	{"SU-1", checkNoUseAfterRelease},
	{"Q-1", checkReceiveBuffers},
	{"Q-3", checkSources},
	{"Q-5", checkNoLockAcrossCalls},
	{"C-2", checkNoRevival},
	{"C-3", checkUndeliveredReleased},
	{"X-1", checkCleanupFailures},
	{"Q-4", checkHealth},
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
	}
}
