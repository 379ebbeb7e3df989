package world

import (
	"fmt"
	"strings"
)

// maxDelayMs bounds a scenario's delay: 10^9 virtual ms (about 11 days),
// far beyond any run, and far from overflowing a tick.
const maxDelayMs = 1_000_000_000

// delay is the scenario command `delay kind=KIND ms=MS`: the earliest
// pending KIND event happens MS ms later (a slow syscall: a removal, a
// WRITE; a slow message).
func (sc *Scenario) delay(b *strings.Builder, args map[string]string, num func(string, int64) (int64, error)) error {
	k, ok := kindByName(args["kind"])
	if !ok {
		return fmt.Errorf("kind=%s: no such event kind", args["kind"])
	}
	ms, err := num("ms", -1)
	if err != nil || ms < 0 || ms > maxDelayMs {
		return fmt.Errorf("delay needs ms=N (0 <= N <= %d)", maxDelayMs)
	}
	i := sc.earliest(k)
	if i < 0 {
		return fmt.Errorf("no %s event pending", args["kind"])
	}
	ev := sc.removeAt(i)
	from := ev.Tick
	sc.W.Schedule(from+ms, ev)
	fmt.Fprintf(b, "%s delayed from t=%d to t=%d\n", ev.Kind, from, from+ms)
	return nil
}

// shutdown is the scenario command `shutdown`: Shutdown(its own id) on E
// (S-1), which starts its drain (S-2), now; while E is down it waits for
// the restart, as a seeded run's does (sim/nodes/producer_crash.go).
func (sc *Scenario) shutdown(b *strings.Builder) {
	sc.runNow(b, Event{Kind: EvShutdown})
}

// crashProducer is the scenario command `crash-producer`: E's process dies
// now (sim/nodes/producer_crash.go); its restart under a new instance id is due
// after NodeSettings.ProducerDownMsMax (1 ms in a scenario).
func (sc *Scenario) crashProducer(b *strings.Builder) {
	sc.runNow(b, Event{Kind: EvProducerCrash})
}

// runNow dispatches ev at the current tick, runs the checkers and prints
// its note.
func (sc *Scenario) runNow(b *strings.Builder, ev Event) {
	w := sc.W
	ev.Tick = w.Now
	w.note = ""
	w.Dispatch(ev)
	w.CheckStep()
	fmt.Fprintf(b, "t=%d %s", w.Now, ev.Kind)
	if w.note != "" {
		fmt.Fprintf(b, ": %s", w.note)
	}
	b.WriteString("\n")
}

// finish is the scenario command `finish [max=N]`: the end of a seeded
// run. Faults are healed and the liveness phase begins; once every client
// is done, every node shuts down (World.endCheck: Shutdown on E, each
// consumer drains, P releases its KV sessions, D drains); the world is
// stepped until it converged, then the end-of-run checks run (S-4, the KV
// sessions, every handoff ended, the history's linearizability, H-2,
// H-5). Only the steps with a note are printed.
func (sc *Scenario) finish(b *strings.Builder, num func(string, int64) (int64, error)) error {
	w := sc.W
	max, err := num("max", maxScenarioSteps)
	if err != nil {
		return err
	}
	if max > maxScenarioSteps {
		return fmt.Errorf("max=%d: at most %d steps a command", max, maxScenarioSteps)
	}
	w.Faults.Healed = true
	if w.phase == phaseSafety {
		w.phase = phaseLiveness
	}
	w.After(0, Event{Kind: evEndCheck})
	for i := int64(0); i < max && w.Fail == nil; i++ {
		ev, ok := w.Q.Pop()
		if !ok {
			return fmt.Errorf("no progress: the event queue is empty; %s", w.pending())
		}
		w.Now = ev.Tick
		w.Steps++
		w.note = ""
		done := w.Dispatch(ev)
		w.CheckStep()
		if w.note != "" {
			fmt.Fprintf(b, "t=%d %s: %s\n", w.Now, ev.Kind, w.note)
		}
		if done && w.Fail == nil {
			w.checkEnd()
			if w.Fail == nil {
				fmt.Fprintf(b, "converged at t=%d; end-of-run checks passed\n", w.Now)
			}
			return nil
		}
	}
	if w.Fail != nil {
		return nil // Do prints it
	}
	return fmt.Errorf("not converged after %d steps; %s", max, w.pending())
}
