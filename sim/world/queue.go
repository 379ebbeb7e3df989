package world

// eventKind names what happens at an event; each kind has one handler.
type eventKind uint8

// Event kinds. Names in eventNames are what the trace and -v print.
const (
	EvClientStart eventKind = iota + 1 // a client starts: its publish call (ClientCall)
	EvClientDeadline
	EvClientCancel // a client cancels its current call (ClientCall)
	EvPublishArrive
	EvEncodeDone
	EvReadyArrive
	EvPublishFailArrive
	EvConsumeArrive // a consume reaches a consumer (consumeRequest)
	EvClaimRead     // a shared-directory Claim returned (RecvTimer)
	EvConsumeReplyArrive
	EvReleaseArrive
	EvReleaseReplyArrive
	EvRemoveDone
	EvTransferArrive
	EvWriteLand
	EvWriteComplete
	EvWriteDeadline
	EvTransferReply
	EvTransferTimeout // a consumer's transfer deadline passed (RecvTimer)
	EvCollect
	EvChaos
	EvCrash
	EvRestart
	EvShutdown
	EvDrainTick
	evHeal
	evEndCheck
	EvProducerConsume
	numEventKinds
)

var eventNames = [numEventKinds]string{
	EvClientStart: "client-start", EvClientDeadline: "client-deadline", EvClientCancel: "client-cancel",
	EvPublishArrive: "publish-arrive", EvEncodeDone: "encode-done", EvReadyArrive: "ready-arrive",
	EvPublishFailArrive: "publish-fail-arrive", EvConsumeArrive: "consume-arrive", EvClaimRead: "claim-read",
	EvConsumeReplyArrive: "consume-reply-arrive", EvReleaseArrive: "release-arrive",
	EvReleaseReplyArrive: "release-reply-arrive", EvRemoveDone: "remove-done",
	EvTransferArrive: "transfer-arrive", EvWriteLand: "write-land", EvWriteComplete: "write-complete",
	EvWriteDeadline: "write-deadline", EvTransferReply: "transfer-reply", EvTransferTimeout: "transfer-timeout",
	EvCollect: "collect", EvChaos: "chaos", EvCrash: "crash", EvRestart: "restart", EvShutdown: "shutdown",
	EvDrainTick: "drain-tick", evHeal: "heal", evEndCheck: "end-check", EvProducerConsume: "producer-consume",
}

func (k eventKind) String() string {
	if k > 0 && k < numEventKinds {
		return eventNames[k]
	}
	if n := nodeEventName(k); n != "" {
		return n
	}
	return "event?"
}

// Event is one scheduled step. Its slots h, c, a, b, f and s are
// kind-specific: h is mostly a handoff (client) index, c a consumer index,
// a and b numbers (an RPC number, a receive number, a write number, an
// incarnation, a result), s a string (an entry id), f the form of a
// presented reference. Outside this file only events.go touches them: each
// kind's named payload type there says what its slots mean.
type Event struct {
	Tick int64
	seq  uint64
	Kind eventKind
	f    uint8
	h, c int32
	a, b int64
	s    string
}

// queue is a binary min-heap of events ordered by (tick, seq): equal ticks
// run in the order they were scheduled, so the order is a function of the
// seed alone. The events live in a slab and the heap holds their keys with
// their slab indices, so sifting compares and moves small pointer-free
// entries without loading the events (no write barriers, no indirection
// on the hot path); freed slots are reused. The heap's layout, and so the
// order at() walks, is exactly that of the classic swap-based sift (the
// simulator's claim-inside-claim walks it), sifting only moves a hole.
type queue struct {
	heap []qent
	slab []Event
	free []int32
	seq  uint64
}

// qent is a heap entry: its event's key and slab index.
type qent struct {
	tick int64
	seq  uint64
	slot int32
}

func (a *qent) before(b *qent) bool {
	if a.tick != b.tick {
		return a.tick < b.tick
	}
	return a.seq < b.seq
}

func (q *queue) less(i, j int) bool { return q.heap[i].before(&q.heap[j]) }

// push schedules ev (its seq is assigned here).
func (q *queue) push(ev Event) {
	q.seq++
	ev.seq = q.seq
	var slot int32
	if n := len(q.free); n > 0 {
		slot = q.free[n-1]
		q.free = q.free[:n-1]
		q.slab[slot].set(&ev)
	} else if n := len(q.slab); n < cap(q.slab) {
		slot = int32(n)
		q.slab = q.slab[:n+1]
		q.slab[slot].set(&ev)
	} else {
		slot = int32(n)
		q.slab = append(q.slab, ev)
	}
	q.heap = append(q.heap, qent{tick: ev.Tick, seq: ev.seq, slot: slot})
	q.up(len(q.heap) - 1)
}

func (q *queue) up(i int) {
	h := q.heap
	x := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !x.before(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = x
}

// down sifts the entry at i down: at each level it takes the place of the
// earlier child when that child is earlier than it (keys are unique, so
// this is the swap-based sift's every step).
func (q *queue) down(i int) {
	h := q.heap
	n := len(h)
	x := h[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].before(&h[l]) {
			m = r
		}
		if !h[m].before(&x) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = x
}

// Pop removes and returns the earliest event; ok is false when empty.
func (q *queue) Pop() (ev Event, ok bool) {
	if len(q.heap) == 0 {
		return Event{}, false
	}
	return q.removeAt(0), true
}

// removeAt removes the event at heap position i (0 is the earliest).
func (q *queue) removeAt(i int) Event {
	slot := q.heap[i].slot
	ev := q.slab[slot]
	q.slab[slot].s = "" // drop the string reference (its only pointer; set overwrites the rest)
	q.free = append(q.free, slot)
	last := len(q.heap) - 1
	q.heap[i] = q.heap[last]
	q.heap = q.heap[:last]
	if i < last {
		q.down(i)
		q.up(i)
	}
	return ev
}

// set stores ev in the slab slot e field by field: a whole-struct store
// into the heap is a typed copy whose write barrier, while the GC marks,
// walks the struct; a field store pays one for its one pointer, s.
func (e *Event) set(ev *Event) {
	e.Tick, e.seq, e.Kind, e.f, e.h, e.c, e.a, e.b, e.s = ev.Tick, ev.seq, ev.Kind, ev.f, ev.h, ev.c, ev.a, ev.b, ev.s
}

// at returns the event at heap position i (0 is the earliest; the rest
// are in no particular order).
func (q *queue) at(i int) *Event { return &q.slab[q.heap[i].slot] }

// len is the number of scheduled events.
func (q *queue) len() int { return len(q.heap) }
