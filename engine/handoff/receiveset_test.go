package handoff

import (
	"fmt"
	"testing"
)

// TestReceiveSetSpill checks the receive set through its inline array, its
// spill into the map, and removals in both forms, against a map.
func TestReceiveSetSpill(t *testing.T) {
	for _, n := range []int{3, 4, 7} {
		testReceiveSet(t, n)
	}
}

func testReceiveSet(t *testing.T, n int) {
	c := NewConsumerReceives(ConsumerConfig{})
	want := map[string]int64{}
	check := func() {
		t.Helper()
		if c.Inflight() != len(want) {
			t.Fatalf("Inflight %d, want %d", c.Inflight(), len(want))
		}
		for id := range want {
			if r := c.receives.get(id); r == nil || r.payloadBytes != want[id] {
				t.Fatalf("get(%s) = %v", id, r)
			}
		}
		if err := c.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 2; round++ {
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("r%d-%d", round, i)
			if err := c.Preflight(id, int64(i+1)); err != nil {
				t.Fatal(err)
			}
			want[id] = int64(i + 1)
			check()
			if err := c.Preflight(id, 1); err == nil {
				t.Fatalf("duplicate %s admitted", id)
			}
		}
		for i := 0; i < n; i += 2 {
			id := fmt.Sprintf("r%d-%d", round, i)
			if err := c.Rejected(id); err != nil {
				t.Fatal(err)
			}
			delete(want, id)
			check()
			if c.receives.get(id) != nil {
				t.Fatalf("%s still in flight", id)
			}
		}
	}
	if ids := c.InflightIDs(); len(ids) != len(want) {
		t.Fatalf("InflightIDs %v", ids)
	}
}
