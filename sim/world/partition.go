package world

// Network partition (issue #3 item 1): a consumer's link to E is cut for a
// window drawn from [1, NodeSettings.PartitionMsMax] ms. While it lasts,
// every message between that consumer and E is lost, in either direction:
// a TransferEncoderCache request (before it took effect), its reply (after
// it took effect: the uncertain outcome, Q-1), and the WRITE itself, which
// fails instead of landing (Q-3: the producer quarantines its source). A
// message already on the wire when the link is cut is lost on arrival. The
// heal of the liveness phase ends every partition. Only the transfer
// backend has messages between a consumer and E (the shared directory is
// one host's file system), so partitions are scheduled only there.

// partitioned reports whether consumer c's link to E is cut now.
func (w *World) partitioned(c int32) bool {
	return !w.faults.healed && int(c) < len(w.Nodes.cutUntil) && w.Now < w.Nodes.cutUntil[c]
}

// Partition cuts consumer c's link to E for ms virtual ms from now (the
// scenario command `partition`; seeded runs cut links at SitePartition).
func (w *World) Partition(c int, ms int64) {
	if w.Nodes.cutUntil == nil {
		w.Nodes.cutUntil = make([]int64, len(w.Cons))
	}
	w.Nodes.cutUntil[c] = max(w.Nodes.cutUntil[c], w.Now+ms)
	w.Nodes.hookSend, w.Nodes.hookArrival = true, true
	if w.tracing {
		w.notef("partition: PD%d cut off from E until t=%d", c, w.Nodes.cutUntil[c])
	}
}

// partitionTick is a consumer's partition fault tick in the safety phase.
func (w *World) partitionTick(ev Event) {
	if w.faults.healed {
		return
	}
	n := consumerStepOf(ev).consumer
	if !w.partitioned(n) && w.faults.buggify(SitePartition) {
		w.Partition(int(n), between(w.Nodes.rng, 1, max(1, w.Set.PartitionMsMax)))
	}
	w.after(between(w.Nodes.rng, 1, max(1, w.Set.PartitionPeriodMs)), consumerStep{consumer: n}.event(evPartitionTick))
}

// partitionDropsSend: a message between a cut-off consumer and E is lost
// when it is sent.
func (w *World) partitionDropsSend(ev *Event) bool {
	if w.Nodes.cutUntil == nil {
		return false
	}
	switch ev.Kind {
	case evTransferArrive, evTransferReply:
		if n := transferLink(*ev); w.partitioned(n) {
			if w.tracing {
				w.notef("partition: %s between PD%d and E lost", ev.Kind, n)
			}
			return true
		}
	}
	return false
}

// partitionDropsArrival: a message between a cut-off consumer and E that
// was on the wire when the link was cut is lost when it would arrive; a
// WRITE into the consumer's memory fails instead of landing.
func (w *World) partitionDropsArrival(ev Event) bool {
	switch ev.Kind {
	case evTransferArrive, evTransferReply:
		if n := transferLink(ev); w.partitioned(n) {
			if w.tracing {
				w.notef("partition: %s between PD%d and E lost on the wire", ev.Kind, n)
			}
			return true
		}
	case evWriteLand:
		wr := w.Writes[writeStepOf(ev).write-1]
		if w.partitioned(int32(wr.C)) && wr.Pending() {
			_ = w.deliverWrite(wr, true) // xfer's Cut: nothing lands (transport.go)
			if w.tracing {
				w.notef("partition: WRITE #%d of %s into PD%d failed: link cut", wr.Num, Short(wr.Entry), wr.C)
			}
			w.after(1, writeStep{write: wr.Num}.event(evWriteComplete))
			return true
		}
	}
	return false
}
