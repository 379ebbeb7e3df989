package world

import (
	"github.com/baton-dev/baton/engine/handoff"
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

// LostEntry is an entry of a crashed producer instance and the number of
// receives that had got its data at the restart (check_crash_lost.go).
type LostEntry struct {
	Rec          *EntryRecord
	Consumptions int
}

// producerChaos is E's crash fault tick in the safety phase.
func (w *World) producerChaos(ev Event) {
	if w.Faults.Healed {
		return
	}
	if !w.Nodes.ProdDown && !w.Prod.Stopped && w.Faults.Buggify(SiteProducerCrash) {
		w.producerCrash(Event{Kind: evProducerCrash})
	}
	w.After(Between(w.Nodes.Rng, 100, 800), Event{Kind: evProducerChaos})
}

// producerCrash kills E's process; its payload names the slow write it interrupts
// ("" for a crash at a random time).
func (w *World) producerCrash(ev Event) {
	p := w.Prod
	if w.Nodes.ProdDown || p.Stopped {
		return
	}
	if id := producerCrashOf(ev).slowWrite; id != "" {
		if !w.Sd.slow[id] || p.Table.State(id) != handoff.EntryReserved {
			return // the write finished first, or this process is not the one that wrote
		}
	}
	if w.Tracing {
		w.Notef("producer %s crashed", Short(p.instanceID))
	}
	w.Sd.crashProducer() // its slow writes die in their fsync; unsynced temp files lost or left (shared_disk.go)
	for _, rec := range w.Ledger.All {
		if !rec.Terminal() && !rec.Published {
			rec.Abandoned = true // reserved, never visible
		}
	}
	for _, wr := range w.Writes {
		if wr.Pending() && w.Tracing {
			w.Notef("WRITE #%d of %s failed with the process", wr.Num, Short(wr.Entry))
		}
		wr.producerDone = true
	}
	w.closeProducerAgent() // its WRITEs in flight end cancelled, nothing lands (transport.go)
	for id, st := range w.Sources {
		if st == SourceLive || st == sourceQuarantined {
			w.Sources[id] = SourceFreed // the process's registered memory is gone; no WRITE reads it now
		}
	}
	w.Nodes.ProdDown = true
	w.Nodes.hookArrival = true
	w.Nodes.prodUpAt = w.Now + Between(w.Nodes.Rng, 1, max(1, w.Set.ProducerDownMsMax))
	w.schedule(w.Nodes.prodUpAt, Event{Kind: evProducerRestart})
}

// producerRestart boots E's next instance, whose StartProducer sweep removes
// the dead instance's directory (newProducerNode, shared_disk.go).
func (w *World) producerRestart(ev Event) {
	if !w.Nodes.ProdDown {
		return
	}
	old := w.Prod.instanceID
	for _, rec := range w.Ledger.All {
		switch {
		case !rec.Published:
		case !rec.Terminal():
			rec.vanished = true // gone with its instance: no client call ended it
			w.Nodes.Lost = append(w.Nodes.Lost, LostEntry{Rec: rec, Consumptions: len(rec.Consumptions)})
		default:
			// Its answers may still be on the wire, and the old instance's
			// drain is forgotten with it (the history lets it lapse).
			rec.vanished = true
		}
	}
	w.Prod = newProducerNode(w) // shareddir.StartProducer: its sweep removes the dead instance's directory
	w.Nodes.ProdDown = false
	w.Nodes.prodRestarts++
	// The new instance has no cleanup failure and no health history.
	w.Ledger.RemoveFailures, w.CleanupFailuresSeen = 0, 0
	w.ProdHealthSig, w.ProdCheapSig = HealthSig{}, CheapCheck{}
	if w.Tracing {
		w.Notef("producer %s restarted as %s", Short(old), Short(w.Prod.instanceID))
	}
}

// staleProducerEvent handles an event for E while it is down or one of a
// crashed process: requests are lost, E's own periodic work (collector,
// Shutdown) waits for the restart, the dead process's queued work is
// dropped. It reports whether it consumed ev.
func (w *World) staleProducerEvent(ev Event) bool {
	if w.Nodes.ProdDown {
		switch ev.Kind {
		case evPublishArrive, evReleaseArrive, EvTransferArrive, evProducerConsume:
			if w.Tracing {
				w.Notef("%s: producer down, connection refused", ev.Kind)
			}
			return true
		case evCollect, evShutdown:
			w.schedule(w.Nodes.prodUpAt, ev) // after the restart, which is due then
			return true
		case evEncodeDone, evRemoveDone, evDrainTick, EvWriteComplete, evWriteDeadline:
			if w.Tracing {
				w.Notef("%s of a crashed producer process dropped", ev.Kind)
			}
			return true
		}
	}
	stale := false
	switch ev.Kind {
	case evEncodeDone:
		stale = w.Prod.Table.State(encodeDoneOf(ev).entry) != handoff.EntryReserved
	case evRemoveDone:
		stale = w.Prod.Table.State(removeDoneOf(ev).entry) != handoff.EntryRemoving
	case evDrainTick:
		stale = !w.Prod.Health.Draining()
	case EvWriteLand:
		stale = w.Writes[WriteStepOf(ev).Write-1].orphan // failed with the crashed process
	}
	if stale {
		if w.Tracing {
			w.Notef("%s of a crashed producer process dropped", ev.Kind)
		}
	}
	return stale
}
