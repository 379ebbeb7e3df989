package sim

import (
	"testing"
	"time"
)

// TestQueueOrdersByTickThenSequence: pops come out by (tick, scheduling order).
func TestQueueOrdersByTickThenSequence(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := newRNG(seed, subWorkload)
	var q queue
	for i := 0; i < 2000; i++ {
		q.push(event{tick: r.Int64N(50), a: int64(i)})
		if r.IntN(4) == 0 {
			q.pop()
		}
	}
	var last event
	for i := 0; q.len() > 0; i++ {
		ev, _ := q.pop()
		if i > 0 && (ev.tick < last.tick || (ev.tick == last.tick && ev.seq < last.seq)) {
			t.Fatalf("pop %d: (%d, %d) after (%d, %d)", i, ev.tick, ev.seq, last.tick, last.seq)
		}
		last = ev
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop from an empty queue succeeded")
	}
}
