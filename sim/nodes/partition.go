package nodes

import "github.com/baton-dev/baton/sim/world"

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

// partitionTick is a consumer's partition fault tick in the safety phase.
func partitionTick(w *world.World, ev world.Event) {
	if w.Faults.Healed {
		return
	}
	n := world.ConsumerStepOf(ev).Consumer
	if !w.Partitioned(n) && w.Faults.Buggify(world.SitePartition) {
		w.Partition(int(n), world.Between(w.Nodes.Rng, 1, max(1, w.Set.PartitionMsMax)))
	}
	w.After(world.Between(w.Nodes.Rng, 1, max(1, w.Set.PartitionPeriodMs)), world.ConsumerStep{Consumer: n}.Event(world.EvPartitionTick))
}

// partitionDropsSend: a message between a cut-off consumer and E is lost
// when it is sent.
func partitionDropsSend(w *world.World, ev *world.Event) bool {
	if w.Nodes.CutUntil == nil {
		return false
	}
	switch ev.Kind {
	case world.EvTransferArrive, world.EvTransferReply:
		if n := world.TransferLink(*ev); w.Partitioned(n) {
			if w.Tracing {
				w.Notef("partition: %s between PD%d and E lost", ev.Kind, n)
			}
			return true
		}
	}
	return false
}

// partitionDropsArrival: a message between a cut-off consumer and E that
// was on the wire when the link was cut is lost when it would arrive; a
// WRITE into the consumer's memory fails instead of landing.
func partitionDropsArrival(w *world.World, ev world.Event) bool {
	switch ev.Kind {
	case world.EvTransferArrive, world.EvTransferReply:
		if n := world.TransferLink(ev); w.Partitioned(n) {
			if w.Tracing {
				w.Notef("partition: %s between PD%d and E lost on the wire", ev.Kind, n)
			}
			return true
		}
	case world.EvWriteLand:
		wr := w.Writes[world.WriteStepOf(ev).Write-1]
		if w.Partitioned(int32(wr.C)) && wr.Pending() {
			_ = deliverWrite(w, wr, true) // xfer's Cut: nothing lands (transport.go)
			if w.Tracing {
				w.Notef("partition: WRITE #%d of %s into PD%d failed: link cut", wr.Num, world.Short(wr.Entry), wr.C)
			}
			w.After(1, world.WriteStep{Write: wr.Num}.Event(world.EvWriteComplete))
			return true
		}
	}
	return false
}
