package world

// Checker is one named check over the whole world; Check returns nil when
// it holds, else an error whose text is the failure line's message. A
// check of several rules is Ruled instead: it returns the rule it found
// broken with its error.
type Checker struct {
	Rule  string
	Check func(w *World) error
	Ruled func(w *World) (rule string, err error)
}

// Checks are the checkers a world runs: Step after every step, in order
// (the first failure ends the run with its rule), and End once the world
// converged (it fails the run itself, with Failf, naming the verdict and
// rule). The world cannot import them (package sim/checks imports this
// one); package sim installs sim/checks' with SetChecks.
type Checks struct {
	Step []Checker
	End  func(w *World)
}

// installed are the checkers a world built now gets.
var installed Checks

// SetChecks sets the checkers every world built afterwards runs. Package
// sim calls it once, at its initialization, with checks.Default(); a world
// built before any call panics.
func SetChecks(c Checks) { installed = c }

// CheckStep runs every per-step checker after a step; the first failure
// ends the run.
func (w *World) CheckStep() {
	if w.Fail != nil || w.Opts.HistoryOnly {
		return
	}
	w.Judged.PendingFresh = false
	w.runStepCheckers()
	w.Judged.PendingFresh = false
}

// runStepCheckers runs the step checkers in order until one fails.
func (w *World) runStepCheckers() {
	steps := w.checks.Step
	for i := range steps {
		c := &steps[i]
		if c.Ruled != nil {
			if rule, err := c.Ruled(w); err != nil {
				w.Failf(Correctness, rule, "%s", err)
				return
			}
		} else if err := c.Check(w); err != nil {
			w.Failf(Correctness, c.Rule, "%s", err)
			return
		}
	}
}

// checkEnd runs the end-of-run checks once the world converged.
func (w *World) checkEnd() { w.checks.End(w) }
