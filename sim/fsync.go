package sim

import (
	"strings"

	"github.com/baton-dev/baton/engine/handoff"
)

// Slow fsync and the producer crash on the shared-directory publish path.
//
// The producer writes an entry as engine/cache/shareddir/write.go does: a
// temp file (.tmp-<entry>), fsync, rename to the entry's name, directory
// fsync; the table commits the entry (CommitPublish) only after the rename,
// with the expiry computed before the write (engine/server/producer.go
// takes nowMs first). SiteSlowFsync makes that write take up to
// NodeSettings.FsyncMsMax: the encoder step's completion (encodeDone) is
// split in two, the checks and the temp file first, then, once the fsync
// returned, the rename and the commit (the second encodeDone, marked
// encodeResumed). Meanwhile the client may cancel its stream (the entry is
// released after the commit, C-7), the producer may begin its drain (which
// waits for the publish, S-2), the entry's TTL may pass (it is committed
// already expired and collected, X-2).
//
// SiteProducerCrash crashes E during such a write, before the fsync: the
// unsynced temp file is lost or left behind as an orphan. The producer
// restarts at once (a supervisor) with a new instance id and a fresh table
// and health; its recovery removes what the dead instance left in the
// shared directory (its entries and orphaned temp files: the dead
// instance's directory), so references to the old instance are refused
// (SU-2), never served; every entry of the old instance that had not ended
// is gone with it (ledger: vanished, or abandoned if never published), and
// every event of the old process still queued (its encoder steps, its
// removals, its drain) is dropped. Not modelled: a window in which E is
// down (the restart is immediate), a crash on the transfer backend (its
// registered sources and posted WRITEs would need the old process's
// memory to fail too), and the key file of the instance directory.

// encodeResumed marks (in field c) the second encodeDone of a slow write:
// the fsync returned; field b holds the tick the write began.
const encodeResumed int32 = 1

// tmpPath is where the producer writes entry id before its rename.
func tmpPath(id string) string { return "E/.tmp-" + id }

// publishMs is the tick the publish took its clock reading: before the
// write (the first encodeDone, or the start of a slow write).
func (w *World) publishMs(ev event) int64 {
	if ev.c == encodeResumed {
		return ev.b
	}
	return w.now
}

// slowFsync starts a slow write of ev's entry when SiteSlowFsync fires: the
// temp file exists, the publish stays in flight (p.publishing), and the
// fsync's return is the resumed encodeDone. It reports whether it did.
func (w *World) slowFsync(ev event) bool {
	if ev.c == encodeResumed || !w.faults.buggify(SiteSlowFsync) {
		return false
	}
	id := ev.s
	d := between(w.nodes.rng, 1, max(1, w.set.FsyncMsMax))
	w.files[tmpPath(id)] = fileInfo{entry: id}
	w.prod.publishing++
	w.notef("slow write of %s: temp file written, fsync takes %d ms", short(id), d)
	w.after(d, event{kind: evEncodeDone, h: ev.h, a: ev.a, s: id, c: encodeResumed, b: w.now})
	if w.faults.buggify(SiteProducerCrash) {
		w.after(between(w.nodes.rng, 0, d-1), event{kind: evProducerCrash, s: id})
	}
	return true
}

// fsyncWritten, at the resumed encodeDone of a slow write: the fsync
// returned; rename the temp file into place (and fsync the directory).
// It reports whether ev was such a resumption (encodeDone then commits).
func (w *World) fsyncWritten(ev event) bool {
	if ev.c != encodeResumed {
		return false
	}
	delete(w.files, tmpPath(ev.s))
	w.files[publishedPath(ev.s)] = fileInfo{entry: ev.s}
	w.notef("slow write of %s: fsync returned, renamed into place", short(ev.s))
	return true
}

// lostEntry is an entry of a crashed producer instance and the number of
// receives that had got its data at the crash (check_crash_lost.go).
type lostEntry struct {
	rec          *entryRecord
	consumptions int
}

// producerCrash: E's process dies during the slow write of ev.s, before
// its fsync, and restarts with a new instance id.
func (w *World) producerCrash(ev event) {
	id := ev.s
	if _, writing := w.files[tmpPath(id)]; !writing || w.prod.table.State(id) != handoff.EntryReserved || w.prod.stopped {
		return // the write finished first, or this instance is not the one that wrote
	}
	old := w.prod.instanceID
	if w.nodes.rng.IntN(2) == 0 {
		delete(w.files, tmpPath(id))
		w.notef("producer %s crashed before the fsync of %s: the temp file is lost", short(old), short(id))
	} else {
		w.notef("producer %s crashed before the fsync of %s: the temp file is left as an orphan", short(old), short(id))
	}
	for _, rec := range w.ledger.all {
		if rec.terminal() {
			// Its answers may still be on the wire; the old instance's
			// drain, if any, is forgotten with it (history: may lapse).
			rec.vanished = rec.vanished || rec.published
			continue
		}
		if rec.published {
			rec.vanished = true // gone with its instance: no client call ended it
			w.nodes.lost = append(w.nodes.lost, lostEntry{rec: rec, consumptions: len(rec.consumptions)})
		} else {
			rec.abandoned = true // reserved, never visible
		}
	}
	w.prod = newProducerNode(w)
	w.nodes.prodRestarts++
	w.nodes.hookArrival = true
	// The new instance has no cleanup failure and no health history.
	w.ledger.removeFailures, w.cleanupFailuresSeen = 0, 0
	w.prodHealthSig, w.prodCheapSig = healthSig{}, cheapCheck{}
	for _, path := range w.sortedFiles() {
		if strings.HasPrefix(path, "E/") {
			delete(w.files, path)
			w.notef("recovery removed %s of the dead instance", path)
		}
	}
	w.notef("producer restarted as %s", short(w.prod.instanceID))
}

// staleProducerEvent reports (and notes) an event of a crashed producer
// process: its encoder steps and writes, its removals, its drain ticks.
func (w *World) staleProducerEvent(ev event) bool {
	stale := false
	switch ev.kind {
	case evEncodeDone:
		stale = w.prod.table.State(ev.s) != handoff.EntryReserved
	case evRemoveDone:
		stale = w.prod.table.State(ev.s) != handoff.EntryRemoving
	case evDrainTick:
		stale = !w.prod.health.Draining()
	}
	if stale {
		w.notef("%s of a crashed producer instance dropped", ev.kind)
	}
	return stale
}
