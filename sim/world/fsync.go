package world

// Slow fsync and the producer crash on the shared-directory publish path.
//
// The producer writes an entry with the real shareddir Dir.Write over the
// simulated disk (shared_disk.go): a temp file (.tmp-<entry>-<hex>),
// fsync, rename to the entry's name, directory fsync; the table commits
// the entry (CommitPublish) only after the Write, with the expiry computed
// from the clock reading taken before it (publishMs; the engine's publish
// reads its clock before the Write too). SiteSlowFsync makes that write
// take up to NodeSettings.FsyncMsMax: the encoder step's completion
// (encodeDone) is split in two, the checks first, then, once
// the fsync returned, the Write and the commit (the second encodeDone,
// marked encodeResumed). (The Write runs whole at the second step: the
// simulated disk's calls cannot block the world's one goroutine; nothing
// else looks at a young temp file in between.) Meanwhile the client may cancel its stream (the entry is
// released after the commit, C-7), the producer may begin its drain (which
// waits for the publish, S-2), the entry's TTL may pass (it is committed
// already expired and collected, X-2).
//
// SiteProducerCrash may crash E during such a write, before the fsync: the
// Write runs then up to its File.Sync and the process dies there; the
// unsynced temp file is lost or left behind as an orphan (sim/nodes/producer_crash.go,
// sharedDisk.crashProducer).

// publishMs is the tick the publish took its clock reading: before the
// write (the first encodeDone, or the start of a slow write).
func (w *World) publishMs(ev Event) int64 {
	if e := EncodeDoneOf(ev); e.resumed {
		return e.startedMs
	}
	return w.Now
}

// slowFsync starts a slow write of ev's entry when SiteSlowFsync fires: the
// temp file exists, the publish stays in flight (p.publishing), and the
// fsync's return is the resumed encodeDone. It reports whether it did.
func (w *World) slowFsync(ev Event) bool {
	e := EncodeDoneOf(ev)
	if e.resumed || !w.Faults.Buggify(SiteSlowFsync) {
		return false
	}
	id := e.Entry
	d := Between(w.Nodes.Rng, 1, max(1, w.Set.FsyncMsMax))
	w.Sd.Slow[id] = true
	w.Prod.Publishing++
	if w.Tracing {
		w.Notef("slow write of %s: temp file written, fsync takes %d ms", Short(id), d)
	}
	w.After(d, encodeDone{client: e.client, rpc: e.rpc, Entry: id, resumed: true, startedMs: w.Now}.event())
	if w.Faults.Buggify(SiteProducerCrash) {
		w.After(Between(w.Nodes.Rng, 0, d-1), producerCrash{SlowWrite: id}.event()) // before the fsync returns
	}
	return true
}

// fsyncWritten, at the resumed encodeDone of a slow write: the fsync
// returned; the Write (temp file, fsync, rename, directory fsync) runs.
// It reports whether ev was such a resumption (encodeDone then commits).
func (w *World) fsyncWritten(ev Event) bool {
	e := EncodeDoneOf(ev)
	if !e.resumed {
		return false
	}
	delete(w.Sd.Slow, e.Entry)
	w.Sd.publish(w.Ledger.Get(e.Entry))
	if w.Tracing {
		w.Notef("slow write of %s: fsync returned, renamed into place", Short(e.Entry))
	}
	return true
}
