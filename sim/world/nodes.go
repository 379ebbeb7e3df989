package world

import (
	"fmt"
	"math/rand/v2"
)

// nodeWorld is the world's state for the network partition (partition.go),
// the slow fsync and the producer crash (sim/nodes/fsync.go) and the P and D nodes of
// E+P+D (prefill_decode.go). Its stream is subNodes; nothing in it draws
// from another subsystem's stream, so a seed whose node sites are all
// disabled and whose topology is E+PD runs as it did without them.
type nodeWorld struct {
	Rng *rand.Rand
	// hookSend: the send hook has work (E+P+D, or partitions); hookArrival:
	// the arrival hook has (partitions, or a producer crashed).
	hookSend, HookArrival bool

	// CutUntil is, per consumer, the tick its link to E heals (partition.go).
	CutUntil []int64

	// ProdDown: E's process crashed and is not restarted yet (until
	// prodUpAt); prodRestarts counts restarts; lost lists the entries of
	// crashed instances with their consumptions at the restart
	// (sim/nodes/producer_crash.go).
	ProdDown     bool
	ProdUpAt     int64
	ProdRestarts int
	Lost         []LostEntry

	// E+P+D (prefill_decode.go).
	Decoders []*DecoderNode
	Sessions []*KvSession // by number-1
	ByID     map[string]*KvSession
	Reqs     []*DecodeReq // by number-1
	// Prefills maps a consume call (client, rpc) answered OK by P to the
	// KV session of its PrefillReady.
	Prefills map[[2]int64]*KvSession
	// Decodes is each client's decode state, by client index.
	Decodes map[int]*ClientDecode
	// Touched are the sessions changed since the KV checker last looked;
	// decided the decode requests D decided since the L-2/H-3 checker looked.
	Touched []*KvSession
	Decided []*DecodeReq
	// sessionsBuf and reqsBuf are where Sessions and Reqs start
	// (AddSession, AddReq): appending from nil grew each a few times in a
	// run of E+P+D.
	sessionsBuf [4]*KvSession
	reqsBuf     [4]*DecodeReq
	// N2 is the first N-2 violation seen ("" when none).
	N2 string
	// Scripted: a scenario sends each decode itself (no client policy).
	Scripted bool
}

// AddSession appends s to Sessions.
func (n *nodeWorld) AddSession(s *KvSession) {
	if n.Sessions == nil {
		n.Sessions = n.sessionsBuf[:0]
	}
	n.Sessions = append(n.Sessions, s)
}

// AddReq appends r to Reqs.
func (n *nodeWorld) AddReq(r *DecodeReq) {
	if n.Reqs == nil {
		n.Reqs = n.reqsBuf[:0]
	}
	n.Reqs = append(n.Reqs, r)
}

// Event kinds of the nodes (queue.go's String and World.dispatch hand them here).
const (
	EvPartitionTick eventKind = 128 + iota
	EvProducerCrash
	EvProducerChaos
	EvProducerRestart
	EvDecodeArrive
	EvKVFetchArrive
	EvKVFetchReply
	EvDecodeFetchDeadline
	EvDecodeReplyArrive
	EvKVAbortArrive
	EvKVAbortReplyArrive
	EvKVExpire
	evNodeEnd
)

// evNodeFirst is the first node event kind.
const evNodeFirst = EvPartitionTick

var nodeEventNames = [...]string{
	EvPartitionTick - evNodeFirst: "partition-tick", EvProducerCrash - evNodeFirst: "producer-crash",
	EvProducerChaos - evNodeFirst: "producer-chaos", EvProducerRestart - evNodeFirst: "producer-restart",
	EvDecodeArrive - evNodeFirst: "decode-arrive", EvKVFetchArrive - evNodeFirst: "kv-fetch-arrive",
	EvKVFetchReply - evNodeFirst: "kv-fetch-reply", EvDecodeFetchDeadline - evNodeFirst: "decode-fetch-deadline",
	EvDecodeReplyArrive - evNodeFirst: "decode-reply-arrive", EvKVAbortArrive - evNodeFirst: "kv-abort-arrive",
	EvKVAbortReplyArrive - evNodeFirst: "kv-abort-reply-arrive", EvKVExpire - evNodeFirst: "kv-expire",
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
	w.Nodes.Rng = w.rngs[6].seed(w.seed, subNodes)
	w.Nodes.hookSend = w.Set.eppd() || (w.Faults.Enabled[SitePartition] && w.Set.Backend == BackendTransfer)
}

// StartNodes builds the D nodes and schedules the partition ticks (start).
func (w *World) StartNodes() {
	if w.Faults.Enabled[SitePartition] && w.Set.Backend == BackendTransfer {
		w.Nodes.CutUntil = make([]int64, len(w.Cons))
		w.Nodes.HookArrival = true
		for i := range w.Cons {
			w.Schedule(Between(w.Nodes.Rng, 1, max(1, w.Set.PartitionPeriodMs)), ConsumerStep{Consumer: int32(i)}.Event(EvPartitionTick))
		}
	}
	if w.Faults.Enabled[SiteProducerCrash] {
		w.Schedule(Between(w.Nodes.Rng, 100, 800), Event{Kind: EvProducerChaos})
	}
	if w.Set.eppd() {
		w.behaviour.StartEPPD(w)
	}
}

// dispatchNode runs a node event's handler from the installed behaviour's
// table (sim/nodes; a D-side one runs under the N-2 guard there).
func (w *World) dispatchNode(ev Event) bool {
	if h := w.behaviour.Handlers[ev.Kind]; h != nil {
		h(w, ev)
		return false
	}
	panic(fmt.Sprintf("sim: unknown node event kind %d", ev.Kind))
}

// sendHook runs before w.send delivers ev; true means ev is lost (a partition).
func (w *World) sendHook(ev *Event) bool {
	if rep := ConsumeReplyOf(*ev); ev.Kind == EvConsumeReplyArrive && rep.Result == ResOK && rep.Consumer >= 0 && w.Set.eppd() { // c < 0: E answered (L-4 broken), no P holds a session
		w.behaviour.PrefillReady(w, ev)
	}
	return w.behaviour.DropsSend(w, ev)
}

// arrivalHook runs before an event's handler; true means it was consumed
// here (a message lost to a partition, a stale event of a crashed producer).
func (w *World) arrivalHook(ev Event) bool {
	if (w.Nodes.ProdDown || w.Nodes.ProdRestarts > 0) && w.behaviour.StaleProducerEvent(w, ev) {
		return true
	}
	return w.Nodes.CutUntil != nil && w.behaviour.DropsArrival(w, ev)
}

// drainNodes: the shutdown phase began (endCheck): P releases its KV
// sessions and D drains (S-2).
func (w *World) drainNodes() {
	if w.Set.eppd() {
		w.behaviour.DrainEPPD(w)
	}
}

// consumerDrained: consumer p, draining, has no request in flight any more
// (endCheck). A P releases the KV sessions its prefills made since its
// drain began, after its in-flight requests ended (the engine's Drain
// releases them after its requests ended too), so a consume that was in
// flight when the drain began (a slow WRITE) and ended OK later leaves no
// session behind (S-2, S-4). Found by the simulator (seed 285515).
func (w *World) consumerDrained(p int) {
	if w.Set.eppd() {
		w.behaviour.DrainKVSessions(w, p)
	}
}

// nodesBusy reports whether a node still has work in flight (endCheck).
func (w *World) nodesBusy() bool {
	for _, r := range w.Nodes.Reqs {
		if r.Arrived && !r.Done {
			return true
		}
	}
	return false
}

// LostEntry is an entry of a crashed producer instance and the number of
// receives that had got its data at the restart (check_crash_lost.go).
type LostEntry struct {
	Rec          *EntryRecord
	Consumptions int
}
