package world

// checkHistory, at the end of a run: the client-visible publish, consume
// and release operations, with their call and return ticks and unknown
// outcomes allowed, are linearizable per reference against the entry
// model of history.go (porcupine; etcd's robustness tests do the same for
// etcd's API). It catches what no single step shows: two clients both told
// OK for one reference (SU-1), a release answered ABORTED after a consume
// was answered OK (SU-3), a consume answered OK after a release was
// answered ABORTED (SU-2).
func checkHistory(w *World) error {
	if w.bufs == nil {
		return asFailure(CheckHistory(w.History()))
	}
	// Run's pooled buffer (CheckHistory keeps nothing of ops).
	ops := w.appendHistory(w.bufs.checked[:0])
	msg := CheckHistory(ops)
	clear(ops)
	w.bufs.checked = ops[:0]
	return asFailure(msg)
}
