package checks

import "github.com/baton-dev/baton/sim/world"

// checkHistory, at the end of a run: the client-visible publish, consume
// and release operations, with their call and return ticks and unknown
// outcomes allowed, are linearizable per reference against the entry
// model of history.go (porcupine; etcd's robustness tests do the same for
// etcd's API). It catches what no single step shows: two clients both told
// OK for one reference (SU-1), a release answered ABORTED after a consume
// was answered OK (SU-3), a consume answered OK after a release was
// answered ABORTED (SU-2).
func checkHistory(w *world.World) error {
	if w.Bufs == nil {
		return asFailure(world.CheckHistory(w.History()))
	}
	// Run's pooled buffer (CheckHistory keeps nothing of ops).
	ops := w.AppendHistory(w.Bufs.Checked[:0])
	msg := world.CheckHistory(ops)
	clear(ops)
	w.Bufs.Checked = ops[:0]
	return asFailure(msg)
}
