package sim

// eventKind names what happens at an event; each kind has one handler.
type eventKind uint8

// Event kinds. Names in eventNames are what the trace and -v print.
const (
	evClientStart eventKind = iota + 1
	evClientDeadline
	evClientCancel
	evPublishArrive
	evEncodeDone
	evReadyArrive
	evPublishFailArrive
	evConsumeArrive
	evClaimRead
	evConsumeReplyArrive
	evReleaseArrive
	evReleaseReplyArrive
	evRemoveDone
	evTransferArrive
	evWriteLand
	evWriteComplete
	evWriteDeadline
	evTransferReply
	evTransferTimeout
	evCollect
	evChaos
	evCrash
	evRestart
	evShutdown
	evDrainTick
	evHeal
	evEndCheck
	numEventKinds
)

var eventNames = [numEventKinds]string{
	evClientStart: "client-start", evClientDeadline: "client-deadline", evClientCancel: "client-cancel",
	evPublishArrive: "publish-arrive", evEncodeDone: "encode-done", evReadyArrive: "ready-arrive",
	evPublishFailArrive: "publish-fail-arrive", evConsumeArrive: "consume-arrive", evClaimRead: "claim-read",
	evConsumeReplyArrive: "consume-reply-arrive", evReleaseArrive: "release-arrive",
	evReleaseReplyArrive: "release-reply-arrive", evRemoveDone: "remove-done",
	evTransferArrive: "transfer-arrive", evWriteLand: "write-land", evWriteComplete: "write-complete",
	evWriteDeadline: "write-deadline", evTransferReply: "transfer-reply", evTransferTimeout: "transfer-timeout",
	evCollect: "collect", evChaos: "chaos", evCrash: "crash", evRestart: "restart", evShutdown: "shutdown",
	evDrainTick: "drain-tick", evHeal: "heal", evEndCheck: "end-check",
}

func (k eventKind) String() string {
	if k > 0 && k < numEventKinds {
		return eventNames[k]
	}
	return "event?"
}

// event is one scheduled step. h is a handoff (client) index, c a consumer
// index, a and b kind-specific numbers (an RPC number, a receive number, a
// write number, an incarnation), s a kind-specific string (an entry id).
type event struct {
	tick int64
	seq  uint64
	kind eventKind
	h, c int32
	a, b int64
	s    string
}

// queue is a binary min-heap of events ordered by (tick, seq): equal ticks
// run in the order they were scheduled, so the order is a function of the
// seed alone.
type queue struct {
	items []event
	seq   uint64
}

func (q *queue) less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	if a.tick != b.tick {
		return a.tick < b.tick
	}
	return a.seq < b.seq
}

// push schedules ev (its seq is assigned here).
func (q *queue) push(ev event) {
	q.seq++
	ev.seq = q.seq
	q.items = append(q.items, ev)
	i := len(q.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.items[i], q.items[p] = q.items[p], q.items[i]
		i = p
	}
}

// pop removes and returns the earliest event; ok is false when empty.
func (q *queue) pop() (ev event, ok bool) {
	n := len(q.items)
	if n == 0 {
		return event{}, false
	}
	ev = q.items[0]
	q.items[0] = q.items[n-1]
	q.items[n-1] = event{}
	q.items = q.items[:n-1]
	n--
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && q.less(l, m) {
			m = l
		}
		if r < n && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q.items[i], q.items[m] = q.items[m], q.items[i]
		i = m
	}
	return ev, true
}

// len is the number of scheduled events.
func (q *queue) len() int { return len(q.items) }
