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

// lostEntry is an entry of a crashed producer instance and the number of
// receives that had got its data at the restart (check_crash_lost.go).
type lostEntry struct {
	rec          *entryRecord
	consumptions int
}

// producerChaos is E's crash fault tick in the safety phase.
func (w *World) producerChaos(ev event) {
	if w.faults.healed {
		return
	}
	if !w.nodes.prodDown && !w.prod.stopped && w.faults.buggify(SiteProducerCrash) {
		w.producerCrash(event{kind: evProducerCrash})
	}
	w.after(between(w.nodes.rng, 100, 800), event{kind: evProducerChaos})
}

// producerCrash kills E's process; its payload names the slow write it interrupts
// ("" for a crash at a random time).
func (w *World) producerCrash(ev event) {
	p := w.prod
	if w.nodes.prodDown || p.stopped {
		return
	}
	if id := producerCrashOf(ev).slowWrite; id != "" {
		if !w.sd.slow[id] || p.table.State(id) != handoff.EntryReserved {
			return // the write finished first, or this process is not the one that wrote
		}
	}
	if w.tracing {
		w.notef("producer %s crashed", short(p.instanceID))
	}
	w.sd.crashProducer() // its slow writes die in their fsync; unsynced temp files lost or left (shared_disk.go)
	for _, rec := range w.ledger.all {
		if !rec.terminal() && !rec.published {
			rec.abandoned = true // reserved, never visible
		}
	}
	for _, wr := range w.writes {
		if wr.pending() && w.tracing {
			w.notef("WRITE #%d of %s failed with the process", wr.num, short(wr.entry))
		}
		wr.producerDone = true
	}
	w.closeProducerAgent() // its WRITEs in flight end cancelled, nothing lands (transport.go)
	for id, st := range w.sources {
		if st == sourceLive || st == sourceQuarantined {
			w.sources[id] = sourceFreed // the process's registered memory is gone; no WRITE reads it now
		}
	}
	w.nodes.prodDown = true
	w.nodes.hookArrival = true
	w.nodes.prodUpAt = w.now + between(w.nodes.rng, 1, max(1, w.set.ProducerDownMsMax))
	w.schedule(w.nodes.prodUpAt, event{kind: evProducerRestart})
}

// producerRestart boots E's next instance, whose StartProducer sweep removes
// the dead instance's directory (newProducerNode, shared_disk.go).
func (w *World) producerRestart(ev event) {
	if !w.nodes.prodDown {
		return
	}
	old := w.prod.instanceID
	for _, rec := range w.ledger.all {
		switch {
		case !rec.published:
		case !rec.terminal():
			rec.vanished = true // gone with its instance: no client call ended it
			w.nodes.lost = append(w.nodes.lost, lostEntry{rec: rec, consumptions: len(rec.consumptions)})
		default:
			// Its answers may still be on the wire, and the old instance's
			// drain is forgotten with it (the history lets it lapse).
			rec.vanished = true
		}
	}
	w.prod = newProducerNode(w) // shareddir.StartProducer: its sweep removes the dead instance's directory
	w.nodes.prodDown = false
	w.nodes.prodRestarts++
	// The new instance has no cleanup failure and no health history.
	w.ledger.removeFailures, w.cleanupFailuresSeen = 0, 0
	w.prodHealthSig, w.prodCheapSig = healthSig{}, cheapCheck{}
	if w.tracing {
		w.notef("producer %s restarted as %s", short(old), short(w.prod.instanceID))
	}
}

// staleProducerEvent handles an event for E while it is down or one of a
// crashed process: requests are lost, E's own periodic work (collector,
// Shutdown) waits for the restart, the dead process's queued work is
// dropped. It reports whether it consumed ev.
func (w *World) staleProducerEvent(ev event) bool {
	if w.nodes.prodDown {
		switch ev.kind {
		case evPublishArrive, evReleaseArrive, evTransferArrive, evProducerConsume:
			if w.tracing {
				w.notef("%s: producer down, connection refused", ev.kind)
			}
			return true
		case evCollect, evShutdown:
			w.schedule(w.nodes.prodUpAt, ev) // after the restart, which is due then
			return true
		case evEncodeDone, evRemoveDone, evDrainTick, evWriteComplete, evWriteDeadline:
			if w.tracing {
				w.notef("%s of a crashed producer process dropped", ev.kind)
			}
			return true
		}
	}
	stale := false
	switch ev.kind {
	case evEncodeDone:
		stale = w.prod.table.State(encodeDoneOf(ev).entry) != handoff.EntryReserved
	case evRemoveDone:
		stale = w.prod.table.State(removeDoneOf(ev).entry) != handoff.EntryRemoving
	case evDrainTick:
		stale = !w.prod.health.Draining()
	case evWriteLand:
		stale = w.writes[writeStepOf(ev).write-1].orphan // failed with the crashed process
	}
	if stale {
		if w.tracing {
			w.notef("%s of a crashed producer process dropped", ev.kind)
		}
	}
	return stale
}
