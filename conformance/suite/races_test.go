package suite

import (
	"testing"
	"time"
)

// TestC7RacedPublishesCountsOnlyLateUndelivered: the burst excuses an
// entry only for an undelivered publish cancelled in the later part of the
// fastest publish's time; early cancellations and delivered publishes
// excuse nothing, so an engine that keeps every cancelled publish fails.
func TestC7RacedPublishesCountsOnlyLateUndelivered(t *testing.T) {
	fastest := 200 * time.Millisecond
	delays := []time.Duration{0, 50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond, 160 * time.Millisecond}
	undelivered := []bool{true, true, true, true, false, true}
	if got := c7RacedPublishes(delays, undelivered, fastest); got != 2 {
		t.Fatalf("c7RacedPublishes(%v, %v, %v) = %d; want 2 (100 ms and 160 ms: late and undelivered)", delays, undelivered, fastest, got)
	}
	if got := c7RacedPublishes(delays[:3], undelivered[:3], fastest); got != 0 {
		t.Fatalf("c7RacedPublishes(early cancellations only) = %d; want 0: an entry left by an early cancellation is never excused", got)
	}
}
