package nodes

import (
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/world"
)

// The producer's life outside its requests: its collector's passes
// Shutdown (S-1) and the drain it starts (S-2, S-4).

// collect is one pass of the producer's collector: files vanish (fault),
// claims are observed, expired entries are removed; on the shared
// directory, orphans are collected and dead instances swept by
// shareddir's Dir.Collect, which the engine's collector calls too.
func collect(w *world.World, ev world.Event) {
	p := w.Prod
	if p.Stopped {
		return
	}
	if w.Set.Backend == world.BackendSharedDir {
		for _, id := range p.Published() { // (a vanished file leaves the table as it is)
			if w.Faults.Buggify(world.SiteVanish) {
				rec := w.Ledger.Get(id)
				w.Sd.Disk.Vanish(world.EntryPath(rec.Instance, id))
				rec.Vanished = true
				if w.Tracing {
					w.Notef("X-2 file of %s vanished", world.Short(id))
				}
			}
		}
	}
	observeClaims(w)
	for _, id := range p.Table.Collect(w.Now, w.Decisions) { // X-2 (handoff.Mutants.NoExpiryCollection)
		startRemoval(w, id, handoff.CauseExpiry, -1, 0)
	}
	w.Sd.Collect()
	w.After(w.Set.CollectPeriodMs, world.Event{Kind: world.EvCollect})
}

// shutdown: Shutdown(expected_instance_id) on E (S-1), then the drain (S-2).
// a=1 marks the fault-injected Shutdown, which first tries the two wrong ids.
func shutdown(w *world.World, ev world.Event) {
	p := w.Prod
	if p.Stopped {
		return
	}
	if world.ShutdownCallOf(ev).Injected {
		if _, err := w.DecideShutdown(""); err == nil {
			w.Failf(world.Correctness, "S-1", "Shutdown with an empty expected_instance_id was accepted")
		}
		if _, err := w.DecideShutdown(w.NewInstanceID()); err == nil {
			w.Failf(world.Correctness, "S-1", "Shutdown naming another instance was accepted")
		}
	}
	was := p.Health.Draining()
	st, err := w.DecideShutdown(p.InstanceID)
	if err != nil || (was && st != handoff.ShutdownAlreadyShuttingDown) || (!was && st != handoff.ShutdownAccepted) {
		w.Failf(world.Correctness, "S-1", "Shutdown(own id) after draining=%v = %v, %v", was, st, err)
		return
	}
	if w.Tracing {
		w.Notef("shutdown %v", st)
	}
	if !was && (p.Publishing > 0 || p.Table.Transfers() > 0) {
		w.Reach(world.StShutdownWithHandoff)
	}
	if !was {
		w.Hist.DrainMs = w.Now
		w.After(0, world.Event{Kind: world.EvDrainTick})
	}
}

// drainTick: release every unconsumed entry (S-2); stop once nothing is
// live, no removal is pending and no publish or transfer is in flight (S-4).
func drainTick(w *world.World, ev world.Event) {
	p := w.Prod
	if p.Stopped {
		return
	}
	observeClaims(w)
	for _, id := range p.Table.Drain() {
		startRemoval(w, id, handoff.CauseDrain, -1, 0)
	}
	if !p.Table.DrainDone(p.Cleanups, p.Publishing, w.Decisions) { // the S-2 mutant leaves the removals it started running
		w.After(10, world.Event{Kind: world.EvDrainTick})
		return
	}
	stopProducer(w)
}
