//go:build !invariants

package server

import (
	"testing"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/producer"
)

// TestInvariantsOffChecksNothing: without -tags invariants the checked
// tables are the core's own methods: a corrupted table is not looked at.
func TestInvariantsOffChecksNothing(t *testing.T) {
	if invariantsOn {
		t.Fatal("invariantsOn without -tags invariants")
	}
	tb := producer.New(handoff.ProducerConfig{})
	corruptInt64Field(t, tb.ProducerTable, "heldBytes", 1)
	if err := tb.Reserve(idA, 1); err != nil {
		t.Fatal(err)
	}
	if tb.CheckInvariants() == nil {
		t.Fatal("the corrupted table passes CheckInvariants: the test corrupts nothing")
	}
}
