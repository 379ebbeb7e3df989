package world

// A network partition's state (issue #3 item 1): which consumer's link to
// E is cut, and until when. The fault's behaviour (when it strikes, what
// it drops) is sim/nodes' partition.go.

// Partitioned reports whether consumer c's link to E is cut now.
func (w *World) Partitioned(c int32) bool {
	return !w.Faults.Healed && int(c) < len(w.Nodes.CutUntil) && w.Now < w.Nodes.CutUntil[c]
}

// Partition cuts consumer c's link to E for ms virtual ms from now (the
// scenario command `partition`; seeded runs cut links at SitePartition).
func (w *World) Partition(c int, ms int64) {
	if w.Nodes.CutUntil == nil {
		w.Nodes.CutUntil = make([]int64, len(w.Cons))
	}
	w.Nodes.CutUntil[c] = max(w.Nodes.CutUntil[c], w.Now+ms)
	w.Nodes.hookSend, w.Nodes.HookArrival = true, true
	if w.Tracing {
		w.Notef("partition: PD%d cut off from E until t=%d", c, w.Nodes.CutUntil[c])
	}
}
