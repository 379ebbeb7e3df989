package nodes

// Slow fsync and the producer crash on the shared-directory publish path.
//
// The producer writes an entry with the real shareddir Dir.Write over the
// simulated disk (sim/world/shared_disk.go): a temp file (.tmp-<entry>-<hex>),
// fsync, rename to the entry's name, directory fsync; the table commits
// the entry (CommitPublish) only after the Write, with the expiry computed
// from the clock reading taken before it (publishMs in producer.go; the engine's publish
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
// unsynced temp file is lost or left behind as an orphan (producer_crash.go,
// sharedDisk.crashProducer).

import "github.com/baton-dev/baton/sim/world"

// slowFsync starts a slow write of ev's entry when world.SiteSlowFsync fires: the
// temp file exists, the publish stays in flight (p.publishing), and the
// fsync's return is the resumed encodeDone. It reports whether it did.
func slowFsync(w *world.World, ev world.Event) bool {
	e := world.EncodeDoneOf(ev)
	if e.Resumed || !w.Faults.Buggify(world.SiteSlowFsync) {
		return false
	}
	id := e.Entry
	d := world.Between(w.Nodes.Rng, 1, max(1, w.Set.FsyncMsMax))
	w.Sd.Slow[id] = true
	w.Prod.Publishing++
	if w.Tracing {
		w.Notef("slow write of %s: temp file written, fsync takes %d ms", world.Short(id), d)
	}
	w.After(d, world.EncodeDone{Client: e.Client, Rpc: e.Rpc, Entry: id, Resumed: true, StartedMs: w.Now}.Event())
	if w.Faults.Buggify(world.SiteProducerCrash) {
		w.After(world.Between(w.Nodes.Rng, 0, d-1), world.ProducerCrash{SlowWrite: id}.Event()) // before the fsync returns
	}
	return true
}

// fsyncWritten, at the resumed encodeDone of a slow write: the fsync
// returned; the Write (temp file, fsync, rename, directory fsync) runs.
// It reports whether ev was such a resumption (encodeDone then commits).
func fsyncWritten(w *world.World, ev world.Event) bool {
	e := world.EncodeDoneOf(ev)
	if !e.Resumed {
		return false
	}
	delete(w.Sd.Slow, e.Entry)
	w.Sd.Publish(w.Ledger.Get(e.Entry))
	if w.Tracing {
		w.Notef("slow write of %s: fsync returned, renamed into place", world.Short(e.Entry))
	}
	return true
}
