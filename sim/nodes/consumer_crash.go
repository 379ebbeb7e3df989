package nodes

import "github.com/baton-dev/baton/sim/world"

// A PD consumer's crash and restart: the fault tick in the safety phase
// (SiteConsumerCrash), the crash (the process and what it held go) and the
// supervisor's restart as a new incarnation.

// chaos is a consumer's fault tick in the safety phase: it may crash.
func chaos(w *world.World, ev world.Event) {
	if w.Faults.Healed {
		return
	}
	n := world.ConsumerStepOf(ev).Consumer
	c := w.Cons[n]
	if c.Up && w.Faults.Buggify(world.SiteConsumerCrash) {
		w.After(0, world.ConsumerStep{Consumer: n}.Event(world.EvCrash))
	}
	w.After(world.Between(w.ProcRNG, 50, 300), world.ConsumerStep{Consumer: n}.Event(world.EvChaos))
}

// crash kills a consumer: its receives, buffers and quarantine go with the
// process; clients waiting on it hit their deadlines.
func crash(w *world.World, ev world.Event) {
	n := world.ConsumerStepOf(ev).Consumer
	c := w.Cons[n]
	if !c.Up {
		return
	}
	c.Up = false
	w.Sd.Cons[c.Idx].Crash()
	if c.Agent != nil {
		world.Must(c.Agent.Close()) // its process is gone: a WRITE to it fails (transport.go)
	}
	if len(c.Recvs) > 0 {
		w.Reach(world.StCrashWithReceive)
	}
	if w.Tracing {
		w.Notef("PD%d incarnation %d crashed with %d receives in flight", c.Idx, c.Inc, len(c.Recvs))
	}
	w.After(world.Between(w.ProcRNG, 10, 300), world.ConsumerStep{Consumer: n, Inc: c.Inc}.Event(world.EvRestart))
}

// restart boots a new incarnation (a new process on the shared disk). A
// claimed file a past incarnation left is E's to collect (CollectOrphans),
// as in the engine.
func restart(w *world.World, ev world.Event) {
	st := world.ConsumerStepOf(ev)
	c := w.Cons[st.Consumer]
	if c.Up || c.Inc != st.Inc {
		return
	}
	c.Inc++
	c.Boot(w)
	if w.Tracing {
		w.Notef("PD%d restarted as incarnation %d", c.Idx, c.Inc)
	}
}
