//go:build invariants

package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/baton-dev/baton/engine/consumer"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/producer"
)

// mustPanicViolation runs f and returns the *InvariantViolation it panicked
// with; it fails the test when f returns or panics with something else.
func mustPanicViolation(t *testing.T, what string, f func()) (v *InvariantViolation) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatalf("%s on a corrupted table returned; want a panic (-tags invariants)", what)
		}
		var ok bool
		if v, ok = r.(*InvariantViolation); !ok {
			t.Fatalf("%s panicked with %T %v; want *InvariantViolation", what, r, r)
		}
	}()
	f()
	return nil
}

// TestInvariantsTagPanicsOnViolation: with -tags invariants a transition
// that leaves the producer table or the consumer receives violating their
// invariants panics, naming the transition and the broken invariant; one
// that leaves them intact does not.
func TestInvariantsTagPanicsOnViolation(t *testing.T) {
	if !invariantsOn {
		t.Fatal("built with -tags invariants but invariantsOn is false")
	}
	tb := producer.New(handoff.ProducerConfig{QuotaBytes: 1 << 20})
	if err := tb.Reserve(idA, 100); err != nil { // intact: no panic
		t.Fatal(err)
	}
	corruptInt64Field(t, tb.ProducerTable, "heldBytes", 1)
	v := mustPanicViolation(t, "CommitPublish", func() { _ = tb.CommitPublish(idA, 1<<40) })
	if v.Table != "producer table" || v.Op != `CommitPublish("`+idA+`")` || !strings.Contains(v.Error(), "held bytes 101, entries sum to 100") {
		t.Errorf("violation %+v: %v", v, v)
	}

	rc := consumer.New(handoff.ConsumerConfig{InflightQuotaBytes: 1 << 20})
	if err := rc.Preflight(idR, 10); err != nil {
		t.Fatal(err)
	}
	corruptInt64Field(t, rc.ConsumerReceives, "quarantineBytes", 5)
	v = mustPanicViolation(t, "Registered", func() { _ = rc.Registered(idR) })
	if v.Table != "consumer receives" || !strings.Contains(v.Error(), "quarantine counters") || errors.Unwrap(v) == nil {
		t.Errorf("violation %+v: %v", v, v)
	}
}

// TestInvariantsTagEnginePanics: the engine itself goes through the checked
// tables: its X-2 collector, run on a producer whose table was corrupted,
// panics at the Expire it makes under e.mu.
func TestInvariantsTagEnginePanics(t *testing.T) {
	e, err := New(Config{Role: RoleEncoder, Preset: "tiny", CacheDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	corruptInt64Field(t, e.table.ProducerTable, "heldBytes", 7)
	v := mustPanicViolation(t, "Engine.expire", e.expire)
	if v.Op != "Expire" {
		t.Errorf("violation at %s; want Expire", v.Op)
	}
	e.mu.Unlock() // the panic left e.mu held, as a crash would
}
