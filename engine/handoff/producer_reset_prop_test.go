package handoff

import (
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// tableView is everything a caller can read of a table without changing it.
type tableView struct {
	Published []string
	States    []EntryState
	Entries   int
	Transfers int
	Held      int64
	Pending   int
	Counters  ProducerCounters
	Releases  []ReleaseOutcome // Release's answer for ids not Published (no change)
}

func viewOf(t *ProducerTable, ids []string) tableView {
	v := tableView{Published: t.Published(), Entries: t.Entries(), Transfers: t.Transfers(),
		Held: t.HeldBytes(), Pending: t.PendingRemovals(), Counters: t.Counters()}
	for _, id := range ids {
		v.States = append(v.States, t.State(id))
	}
	return v
}

// applyOp applies op number k to t and returns its result as text.
func applyOp(t *ProducerTable, k int, id string, n int64) string {
	switch k {
	case 0:
		return fmt.Sprint(t.Reserve(id, n))
	case 1:
		return fmt.Sprint(t.CommitPublish(id, n))
	case 2:
		t.AbandonPublish(id)
	case 3:
		return fmt.Sprint(t.Release(id))
	case 4:
		return fmt.Sprint(t.RemovalDone(id, true))
	case 5:
		return fmt.Sprint(t.RemovalDone(id, false))
	case 6:
		t.RemovalFailed(id)
	case 7:
		t.ObserveGone(id)
	case 8:
		return fmt.Sprint(t.Expire(n))
	case 9:
		return fmt.Sprint(t.ClaimForTransfer(id))
	case 10:
		return fmt.Sprint(t.TransferDone(id))
	case 11:
		return fmt.Sprint(t.TransferFailed(id))
	case 12:
		return fmt.Sprint(t.Drain())
	case 13:
		return fmt.Sprint(t.EncoderFailed(id, Mutants{}))
	}
	return ""
}

// TestProducerTableResetProperty: random operations on a new table and on
// a table that was used (with random operations) and then Reset give the
// same answers and views; CheckInvariants holds after every operation; and
// whenever the view changes, Version moves (a caller skipping an unchanged
// version, as the simulator does, never misses a change).
func TestProducerTableResetProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ids := make([]string, 6)
		for i := range ids {
			ids[i] = fmt.Sprintf("%032x", i+1)
		}
		cfg := ProducerConfig{QuotaBytes: rapid.Int64Range(0, 400).Draw(rt, "quota"), DefaultTTLMs: 100, MaxTTLMs: 300}
		used := NewProducerTable(ProducerConfig{QuotaBytes: 1000})
		pre := rapid.IntRange(0, 60).Draw(rt, "pre")
		for i := 0; i < pre; i++ {
			applyOp(used, rapid.IntRange(0, 13).Draw(rt, "pk"), ids[rapid.IntRange(0, 5).Draw(rt, "pid")], rapid.Int64Range(1, 200).Draw(rt, "pn"))
		}
		used.Reset(cfg)
		fresh := NewProducerTable(cfg)
		steps := rapid.IntRange(1, 120).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			k := rapid.IntRange(0, 13).Draw(rt, "k")
			id := ids[rapid.IntRange(0, 5).Draw(rt, "id")]
			n := rapid.Int64Range(1, 200).Draw(rt, "n")
			before, ver := viewOf(used, ids), used.Version()
			a, b := applyOp(fresh, k, id, n), applyOp(used, k, id, n)
			if a != b {
				rt.Fatalf("step %d op %d(%s, %d): fresh %q, reset %q", i, k, id, n, a, b)
			}
			va, vb := viewOf(fresh, ids), viewOf(used, ids)
			if !reflect.DeepEqual(va, vb) {
				rt.Fatalf("step %d op %d: views differ\nfresh %+v\nreset %+v", i, k, va, vb)
			}
			if fresh.Version() != used.Version() {
				rt.Fatalf("step %d op %d: versions %d vs %d", i, k, fresh.Version(), used.Version())
			}
			if !reflect.DeepEqual(before, vb) && used.Version() == ver {
				rt.Fatalf("step %d op %d(%s): view changed, version did not\nbefore %+v\nafter  %+v", i, k, id, before, vb)
			}
			for _, tb := range []*ProducerTable{fresh, used} {
				if err := tb.CheckInvariants(); err != nil {
					rt.Fatalf("step %d op %d: %v", i, k, err)
				}
			}
			if rapid.IntRange(0, 30).Draw(rt, "midreset") == 0 {
				fresh = NewProducerTable(cfg)
				used.Reset(cfg)
			}
		}
	})
}
