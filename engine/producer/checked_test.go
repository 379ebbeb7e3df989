package producer

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/invariants"
)

// corruptHeldBytes adds delta to the core's unexported heldBytes: the only
// way a test outside package handoff can put the table into a state its
// transitions never produce.
func corruptHeldBytes(t *testing.T, tb *Table, delta int64) {
	t.Helper()
	f := reflect.ValueOf(tb.ProducerTable).Elem().FieldByName("heldBytes")
	if !f.IsValid() || f.Kind() != reflect.Int64 {
		t.Fatal("handoff.ProducerTable has no int64 field heldBytes (the core changed: update the test)")
	}
	f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	f.SetInt(f.Int() + delta)
}

// TestCheckedTransitionsReportViolations: every transition of Table runs
// the core's invariants after it when built with -tags invariants, and
// reports a violation by panicking with an *invariants.Violation that
// names the producer table and the transition (with its id); without the
// tag nothing is checked and the same calls return. Each transition runs
// on a table corrupted before it, so a wrapper that forgets its check
// fails here. (go test -tags invariants ./engine/producer/ runs the
// reporting half.)
func TestCheckedTransitionsReportViolations(t *testing.T) {
	m := handoff.Mutants{}
	for _, tc := range []struct {
		op   string // Violation.Op's prefix
		id   string // the id the op names ("" for none)
		prep func(tb *Table)
		call func(tb *Table)
	}{
		{"Reserve", idB, nil, func(tb *Table) { _ = tb.Reserve(idB, 10) }},
		{"CommitPublish", idA, func(tb *Table) { _ = tb.Reserve(idA, 100) }, func(tb *Table) { _ = tb.CommitPublish(idA, 1<<40) }},
		{"AbandonPublish", idA, func(tb *Table) { _ = tb.Reserve(idA, 100) }, func(tb *Table) { tb.AbandonPublish(idA) }},
		{"Release", idA, published, func(tb *Table) { tb.Release(idA) }},
		{"RemovalDone", idA, releasing, func(tb *Table) { tb.RemovalDone(idA, true) }},
		{"RemovalFailed", idA, releasing, func(tb *Table) { tb.RemovalFailed(idA) }},
		{"ObserveGone", idA, published, func(tb *Table) { tb.ObserveGone(idA) }},
		{"Expire", "", published, func(tb *Table) { tb.Expire(0) }},
		{"Collect", "", published, func(tb *Table) { tb.Collect(0, m) }},
		{"EncoderFailed", idA, func(tb *Table) { _ = tb.Reserve(idA, 100) }, func(tb *Table) { tb.EncoderFailed(idA, m) }},
		{"ExpireBeforeRelease", "", published, func(tb *Table) { tb.ExpireBeforeRelease(0, 1) }},
		{"Drain", "", published, func(tb *Table) { tb.Drain() }},
		{"ClaimForTransfer", idA, published, func(tb *Table) { _ = tb.ClaimForTransfer(idA) }},
		{"TransferDone", idA, claimed, func(tb *Table) { _ = tb.TransferDone(idA) }},
		{"TransferFailed", idA, claimed, func(tb *Table) { _ = tb.TransferFailed(idA) }},
		{"FailTransfer", idA, claimed, func(tb *Table) {
			_, _ = tb.FailTransfer(handoff.TransferFailure{EntryID: idA, HasSource: true, WriteEnded: true, Provable: true}, m)
		}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			tb := New(handoff.ProducerConfig{QuotaBytes: 1 << 20})
			if tc.prep != nil {
				tc.prep(tb)
			}
			if err := tb.CheckInvariants(); err != nil {
				t.Fatalf("table before the corruption: %v", err)
			}
			corruptHeldBytes(t, tb, 7)
			v := violationOf(func() { tc.call(tb) })
			if !invariants.On {
				if v != nil {
					t.Fatalf("%s panicked without -tags invariants: %v", tc.op, v)
				}
				return
			}
			want := tc.op
			if tc.id != "" {
				want += `("` + tc.id + `")`
			}
			switch {
			case v == nil:
				t.Fatalf("%s on a corrupted table returned; want a panic with *invariants.Violation (-tags invariants)", tc.op)
			case v.Table != "producer table" || v.Op != want || errors.Unwrap(v) == nil || !strings.Contains(v.Error(), "held bytes"):
				t.Errorf("violation %q (table %q, op %q); want the producer table, op %s and the held-bytes invariant", v, v.Table, v.Op, want)
			}
		})
	}
}

// violationOf runs f and returns the *invariants.Violation it panicked
// with, nil when it returned; it re-panics anything else.
func violationOf(f func()) (v *invariants.Violation) {
	defer func() {
		if r := recover(); r != nil {
			var ok bool
			if v, ok = r.(*invariants.Violation); !ok {
				panic(r)
			}
		}
	}()
	f()
	return nil
}

func published(tb *Table) { _ = tb.Reserve(idA, 100); _ = tb.CommitPublish(idA, 1<<40) }
func releasing(tb *Table) { published(tb); tb.Release(idA) }
func claimed(tb *Table)   { published(tb); _ = tb.ClaimForTransfer(idA) }
