package world

import (
	"fmt"
	"math/rand/v2"
)

// nodeWorld is the world's state for the network partition (partition.go),
// the slow fsync and the producer crash (fsync.go) and the P and D nodes of
// E+P+D (prefill_decode.go). Its stream is subNodes; nothing in it draws
// from another subsystem's stream, so a seed whose node sites are all
// disabled and whose topology is E+PD runs as it did without them.
type nodeWorld struct {
	rng *rand.Rand
	// hookSend: the send hook has work (E+P+D, or partitions); hookArrival:
	// the arrival hook has (partitions, or a producer crashed).
	hookSend, hookArrival bool

	// cutUntil is, per consumer, the tick its link to E heals (partition.go).
	cutUntil []int64

	// prodDown: E's process crashed and is not restarted yet (until
	// prodUpAt); prodRestarts counts restarts; lost lists the entries of
	// crashed instances with their consumptions at the restart
	// (producer_crash.go).
	prodDown     bool
	prodUpAt     int64
	prodRestarts int
	lost         []lostEntry

	// E+P+D (prefill_decode.go).
	decoders []*decoderNode
	sessions []*kvSession // by number-1
	byID     map[string]*kvSession
	reqs     []*decodeReq // by number-1
	// prefills maps a consume call (client, rpc) answered OK by P to the
	// KV session of its PrefillReady.
	prefills map[[2]int64]*kvSession
	// decodes is each client's decode state, by client index.
	decodes map[int]*clientDecode
	// touched are the sessions changed since the KV checker last looked;
	// decided the decode requests D decided since the L-2/H-3 checker looked.
	touched []*kvSession
	decided []*decodeReq
	// n2 is the first N-2 violation seen ("" when none).
	n2 string
	// scripted: a scenario sends each decode itself (no client policy).
	scripted bool
}

// Event kinds of the nodes (queue.go's String and World.dispatch hand them here).
const (
	evPartitionTick eventKind = 128 + iota
	evProducerCrash
	evProducerChaos
	evProducerRestart
	evDecodeArrive
	evKVFetchArrive
	evKVFetchReply
	evDecodeFetchDeadline
	evDecodeReplyArrive
	evKVAbortArrive
	evKVAbortReplyArrive
	evKVExpire
	evNodeEnd
)

// evNodeFirst is the first node event kind.
const evNodeFirst = evPartitionTick

var nodeEventNames = [...]string{
	evPartitionTick - evNodeFirst: "partition-tick", evProducerCrash - evNodeFirst: "producer-crash",
	evProducerChaos - evNodeFirst: "producer-chaos", evProducerRestart - evNodeFirst: "producer-restart",
	evDecodeArrive - evNodeFirst: "decode-arrive", evKVFetchArrive - evNodeFirst: "kv-fetch-arrive",
	evKVFetchReply - evNodeFirst: "kv-fetch-reply", evDecodeFetchDeadline - evNodeFirst: "decode-fetch-deadline",
	evDecodeReplyArrive - evNodeFirst: "decode-reply-arrive", evKVAbortArrive - evNodeFirst: "kv-abort-arrive",
	evKVAbortReplyArrive - evNodeFirst: "kv-abort-reply-arrive", evKVExpire - evNodeFirst: "kv-expire",
}

// nodeEventName names a node event kind ("" for another kind).
func nodeEventName(k eventKind) string {
	if k >= evNodeFirst && k < evNodeEnd {
		return nodeEventNames[k-evNodeFirst]
	}
	return ""
}

// initNodes sets up the node state of a new world (newWorld).
func (w *World) initNodes() {
	w.nodes.rng = w.rngs[6].seed(w.seed, subNodes)
	w.nodes.hookSend = w.set.eppd() || (w.faults.enabled[SitePartition] && w.set.Backend == BackendTransfer)
}

// startNodes builds the D nodes and schedules the partition ticks (start).
func (w *World) startNodes() {
	if w.faults.enabled[SitePartition] && w.set.Backend == BackendTransfer {
		w.nodes.cutUntil = make([]int64, len(w.cons))
		w.nodes.hookArrival = true
		for i := range w.cons {
			w.schedule(between(w.nodes.rng, 1, max(1, w.set.PartitionPeriodMs)), consumerStep{consumer: int32(i)}.event(evPartitionTick))
		}
	}
	if w.faults.enabled[SiteProducerCrash] {
		w.schedule(between(w.nodes.rng, 100, 800), event{kind: evProducerChaos})
	}
	if w.set.eppd() {
		w.startEPPD()
	}
}

// dispatchNode runs a node event's handler; a D-side one under the N-2 guard.
func (w *World) dispatchNode(ev event) bool {
	switch ev.kind {
	case evPartitionTick:
		w.partitionTick(ev)
	case evProducerCrash:
		w.producerCrash(ev)
	case evProducerChaos:
		w.producerChaos(ev)
	case evProducerRestart:
		w.producerRestart(ev)
	case evDecodeArrive, evKVFetchReply, evDecodeFetchDeadline:
		w.onDecoder(ev)
	case evKVFetchArrive:
		w.kvFetchArrive(ev)
	case evDecodeReplyArrive, evKVAbortReplyArrive:
		w.decodeReplyArrive(ev)
	case evKVAbortArrive:
		w.kvAbortArrive(ev)
	case evKVExpire:
		w.kvExpire(ev)
	default:
		panic(fmt.Sprintf("sim: unknown node event kind %d", ev.kind))
	}
	return false
}

// sendHook runs before w.send delivers ev; true means ev is lost (a partition).
func (w *World) sendHook(ev *event) bool {
	if rep := consumeReplyOf(*ev); ev.kind == evConsumeReplyArrive && rep.result == resOK && rep.consumer >= 0 && w.set.eppd() { // c < 0: E answered (L-4 broken), no P holds a session
		w.prefillReady(ev)
	}
	return w.partitionDropsSend(ev)
}

// arrivalHook runs before an event's handler; true means it was consumed
// here (a message lost to a partition, a stale event of a crashed producer).
func (w *World) arrivalHook(ev event) bool {
	if (w.nodes.prodDown || w.nodes.prodRestarts > 0) && w.staleProducerEvent(ev) {
		return true
	}
	return w.nodes.cutUntil != nil && w.partitionDropsArrival(ev)
}

// drainNodes: the shutdown phase began (endCheck): P releases its KV
// sessions and D drains (S-2).
func (w *World) drainNodes() {
	if w.set.eppd() {
		w.drainEPPD()
	}
}

// consumerDrained: consumer p, draining, has no request in flight any more
// (endCheck). A P releases the KV sessions its prefills made since its
// drain began, after its in-flight requests ended (the engine's Drain
// releases them after its requests ended too), so a consume that was in
// flight when the drain began (a slow WRITE) and ended OK later leaves no
// session behind (S-2, S-4). Found by the simulator (seed 285515).
func (w *World) consumerDrained(p int) {
	if w.set.eppd() {
		w.drainKVSessions(p)
	}
}

// nodesBusy reports whether a node still has work in flight (endCheck).
func (w *World) nodesBusy() bool {
	for _, r := range w.nodes.reqs {
		if r.arrived && !r.done {
			return true
		}
	}
	return false
}
