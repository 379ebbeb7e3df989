package world

import (
	"reflect"
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
		q.push(Event{Tick: r.Int64N(50), a: int64(i)})
		if r.IntN(4) == 0 {
			q.Pop()
		}
	}
	var last Event
	for i := 0; q.len() > 0; i++ {
		ev, _ := q.Pop()
		if i > 0 && (ev.Tick < last.Tick || (ev.Tick == last.Tick && ev.seq < last.seq)) {
			t.Fatalf("pop %d: (%d, %d) after (%d, %d)", i, ev.Tick, ev.seq, last.Tick, last.seq)
		}
		last = ev
	}
	if _, ok := q.Pop(); ok {
		t.Fatal("pop from an empty queue succeeded")
	}
}

// TestQueueLayoutMatchesSwapSift: the heap's layout after any mix of push,
// pop and removeAt is the classic swap-based binary heap's, position by
// position (claimInsideClaim walks the heap in position order, so the
// layout is part of a run's determinism).
func TestQueueLayoutMatchesSwapSift(t *testing.T) {
	type key struct {
		tick int64
		seq  uint64
	}
	var ref []key
	refLess := func(i, j int) bool {
		if ref[i].tick != ref[j].tick {
			return ref[i].tick < ref[j].tick
		}
		return ref[i].seq < ref[j].seq
	}
	refUp := func(i int) {
		for i > 0 {
			p := (i - 1) / 2
			if !refLess(i, p) {
				break
			}
			ref[i], ref[p] = ref[p], ref[i]
			i = p
		}
	}
	refDown := func(i int) {
		n := len(ref)
		for {
			l, r, m := 2*i+1, 2*i+2, i
			if l < n && refLess(l, m) {
				m = l
			}
			if r < n && refLess(r, m) {
				m = r
			}
			if m == i {
				return
			}
			ref[i], ref[m] = ref[m], ref[i]
			i = m
		}
	}
	refRemoveAt := func(i int) {
		last := len(ref) - 1
		ref[i] = ref[last]
		ref = ref[:last]
		if i < last {
			refDown(i)
			refUp(i)
		}
	}
	r := newRNG(7, subWorkload)
	var q queue
	for step := 0; step < 200000; step++ {
		switch x := r.IntN(10); {
		case x < 5 || q.len() == 0:
			tick := r.Int64N(50)
			q.push(Event{Tick: tick})
			ref = append(ref, key{tick, q.seq})
			refUp(len(ref) - 1)
		case x < 8:
			q.Pop()
			refRemoveAt(0)
		default:
			i := r.IntN(q.len())
			q.removeAt(i)
			refRemoveAt(i)
		}
		if q.len() != len(ref) {
			t.Fatalf("step %d: len %d, reference %d", step, q.len(), len(ref))
		}
		for i := range ref {
			if ev := q.at(i); ev.Tick != ref[i].tick || ev.seq != ref[i].seq {
				t.Fatalf("step %d: position %d holds (%d,%d), reference (%d,%d)", step, i, ev.Tick, ev.seq, ref[i].tick, ref[i].seq)
			}
		}
	}
}

// TestEventSetCopiesEveryField guards Event.set, which copies an event
// field by field: a field added to Event must be added there too.
func TestEventSetCopiesEveryField(t *testing.T) {
	if n := reflect.TypeOf(Event{}).NumField(); n != 9 {
		t.Fatalf("Event has %d fields; Event.set copies 9: update it (and this test)", n)
	}
	ev := Event{Tick: 1, seq: 2, Kind: 3, f: 4, h: 5, c: 6, a: 7, b: 8, s: "x"}
	var got Event
	got.set(&ev)
	if got != ev {
		t.Fatalf("set copied %+v, want %+v", got, ev)
	}
}
