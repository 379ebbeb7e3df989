package nodes

import (
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/world"
)

// Producer crash and restart (issue #3 item 1: "Processes: crash, restart
// with orphan recovery"; "crash losing unsynced data").
//
// SiteProducerCrash kills E's process at a random time of the safety phase
// (a chaos tick every few hundred ms) or in the middle of a slow
// shared-directory write, before its fsync (fsync.go). What the process
// held goes with it:
//
//   - unsynced data: each temp file of a write in progress is lost, or left
//     behind as an orphan;
//   - its table, health, reservations (never published: abandoned), the
//     registered memory of its transfer sources, and the WRITEs it posted:
//     they fail (the queue pair is torn down), so nothing lands after the
//     crash and the consumers' outcomes are uncertain;
//   - every queued event of the process (encoder steps, writes, removals,
//     drain ticks) is dropped; while it is down, requests to E are lost
//     (the clients' and consumers' deadlines end them), its collector and
//     a pending Shutdown wait for the restart.
//
// After a drawn down time (NodeSettings.ProducerDownMsMax) a supervisor
// restarts it with a new instance id, a fresh table and health. On the
// shared directory the new instance starts with shareddir.StartProducer
// (OpenProducer, then Dir.SweepDeadInstances), the engine's start too, the
// real code over the simulated disk (shared_disk.go). The dead process's flock went with it (simfs), so the
// sweep removes the dead instance's directory: its entries and orphaned
// temp and claimed files. From then on a reference to the old instance is
// refused (shareddir.Claim: ErrUnknownProducer, SU-2; a before-write
// rejection on the transfer backend), never served: every entry of the old
// instance that had not ended by then is gone (ledger: vanished), and
// check_crash_lost.go checks that no receive gets one later. A consumer may
// still claim an entry while E is down: its file is durable and intact, so
// that is a consumption like any other (SU-1 holds).

// producerChaos is E's crash fault tick in the safety phase.
func producerChaos(w *world.World, ev world.Event) {
	if w.Faults.Healed {
		return
	}
	if !w.Nodes.ProdDown && !w.Prod.Stopped && w.Faults.Buggify(world.SiteProducerCrash) {
		crashProducer(w, world.Event{Kind: world.EvProducerCrash})
	}
	w.After(world.Between(w.Nodes.Rng, 100, 800), world.Event{Kind: world.EvProducerChaos})
}

// crashProducer kills E's process; its payload names the slow write it interrupts
// ("" for a crash at a random time).
func crashProducer(w *world.World, ev world.Event) {
	p := w.Prod
	if w.Nodes.ProdDown || p.Stopped {
		return
	}
	if id := world.ProducerCrashOf(ev).SlowWrite; id != "" {
		if !w.Sd.Slow[id] || p.Table.State(id) != handoff.EntryReserved {
			return // the write finished first, or this process is not the one that wrote
		}
	}
	if w.Tracing {
		w.Notef("producer %s crashed", world.Short(p.InstanceID))
	}
	w.Sd.CrashProducer() // its slow writes die in their fsync; unsynced temp files lost or left (shared_disk.go)
	for _, rec := range w.Ledger.All {
		if !rec.Terminal() && !rec.Published {
			rec.Abandoned = true // reserved, never visible
			w.Ledger.Touch(rec)
		}
	}
	for _, wr := range w.Writes {
		if wr.Pending() && w.Tracing {
			w.Notef("WRITE #%d of %s failed with the process", wr.Num, world.Short(wr.Entry))
		}
		wr.ProducerDone = true
	}
	closeProducerAgent(w) // its WRITEs in flight end cancelled, nothing lands (transport.go)
	for id, st := range w.Sources {
		if st == world.SourceLive || st == world.SourceQuarantined {
			w.Sources[id] = world.SourceFreed // the process's registered memory is gone; no WRITE reads it now
		}
	}
	w.Nodes.ProdDown = true
	w.Nodes.HookArrival = true
	w.Nodes.ProdUpAt = w.Now + world.Between(w.Nodes.Rng, 1, max(1, w.Set.ProducerDownMsMax))
	w.Schedule(w.Nodes.ProdUpAt, world.Event{Kind: world.EvProducerRestart})
}

// producerRestart boots E's next instance, whose StartProducer sweep removes
// the dead instance's directory (newProducerNode, shared_disk.go).
func producerRestart(w *world.World, ev world.Event) {
	if !w.Nodes.ProdDown {
		return
	}
	old := w.Prod.InstanceID
	for _, rec := range w.Ledger.All {
		switch {
		case !rec.Published:
		case !rec.Terminal():
			rec.Vanished = true // gone with its instance: no client call ended it
			w.Nodes.Lost = append(w.Nodes.Lost, world.LostEntry{Rec: rec, Consumptions: len(rec.Consumptions)})
		default:
			// Its answers may still be on the wire, and the old instance's
			// drain is forgotten with it (the history lets it lapse).
			rec.Vanished = true
		}
	}
	w.Prod = world.NewProducerNode(w) // shareddir.StartProducer: its sweep removes the dead instance's directory
	w.Nodes.ProdDown = false
	w.Nodes.ProdRestarts++
	// The new instance has no cleanup failure and no health history.
	w.Ledger.RemoveFailures, w.CleanupFailuresSeen = 0, 0
	w.ProdHealthSig, w.ProdCheapSig = world.HealthSig{}, world.CheapCheck{}
	if w.Tracing {
		w.Notef("producer %s restarted as %s", world.Short(old), world.Short(w.Prod.InstanceID))
	}
}

// staleProducerEvent handles an event for E while it is down or one of a
// crashed process: requests are lost, E's own periodic work (collector,
// Shutdown) waits for the restart, the dead process's queued work is
// dropped. It reports whether it consumed ev.
func staleProducerEvent(w *world.World, ev world.Event) bool {
	if w.Nodes.ProdDown {
		switch ev.Kind {
		case world.EvPublishArrive, world.EvReleaseArrive, world.EvTransferArrive, world.EvProducerConsume:
			if w.Tracing {
				w.Notef("%s: producer down, connection refused", ev.Kind)
			}
			return true
		case world.EvCollect, world.EvShutdown:
			w.Schedule(w.Nodes.ProdUpAt, ev) // after the restart, which is due then
			return true
		case world.EvEncodeDone, world.EvRemoveDone, world.EvDrainTick, world.EvWriteComplete, world.EvWriteDeadline:
			if w.Tracing {
				w.Notef("%s of a crashed producer process dropped", ev.Kind)
			}
			return true
		}
	}
	stale := false
	switch ev.Kind {
	case world.EvEncodeDone:
		stale = w.Prod.Table.State(world.EncodeDoneOf(ev).Entry) != handoff.EntryReserved
	case world.EvRemoveDone:
		stale = w.Prod.Table.State(world.RemoveDoneOf(ev).Entry) != handoff.EntryRemoving
	case world.EvDrainTick:
		stale = !w.Prod.Health.Draining()
	case world.EvWriteLand:
		stale = w.Writes[world.WriteStepOf(ev).Write-1].Orphan // failed with the crashed process
	}
	if stale {
		if w.Tracing {
			w.Notef("%s of a crashed producer process dropped", ev.Kind)
		}
	}
	return stale
}
