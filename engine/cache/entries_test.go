package cache

import (
	"errors"
	"testing"
)

// TestEntriesDuplicateKeepsFirstAndUndoes: a Put of an id already there is
// ErrDuplicate joined with undo's error, undo runs, and the first entry
// stays; a failed free keeps the entry for a retry, and Close frees
// what is left.
func TestEntriesDuplicateKeepsFirstAndUndoes(t *testing.T) {
	failing := map[int]bool{}
	var freed []int
	tb := NewEntries("test", "free", func(e int) error {
		if failing[e] {
			return errors.New("busy")
		}
		freed = append(freed, e)
		return nil
	})
	if err := tb.Put("a", 1, func() error { t.Fatal("undo of a first Put"); return nil }); err != nil {
		t.Fatalf("Put(a) = %v", err)
	}
	undone := errors.New("undone")
	err := tb.Put("a", 2, func() error { return undone })
	if !errors.Is(err, ErrDuplicate) || !errors.Is(err, undone) {
		t.Fatalf("second Put(a) = %v; want ErrDuplicate joined with undo's error", err)
	}
	if e, ok := tb.Take("a"); !ok || e != 1 {
		t.Fatalf("Take(a) = %v, %v; want the first entry 1", e, ok)
	}
	if tb.Has("a") {
		t.Fatal("Has(a) after Take; want false")
	}
	if err := tb.Put("b", 3, nil); err != nil {
		t.Fatal(err)
	}
	failing[3] = true
	if won, err := tb.Remove("b"); !won || err == nil {
		t.Fatalf("Remove(b) with a failing free = %v, %v; want true and the error", won, err)
	}
	if !tb.Has("b") {
		t.Fatal("entry b gone after a failed free: nothing could free it again")
	}
	failing[3] = false
	if err := tb.Close(); err != nil || tb.Has("b") || len(freed) != 1 || freed[0] != 3 {
		t.Fatalf("Close = %v, Has(b) %v, freed %v; want nil, false, [3]", err, tb.Has("b"), freed)
	}
	if won, err := tb.Remove("zz"); won || err != nil {
		t.Fatalf("Remove(unknown) = %v, %v; want false, nil", won, err)
	}
}
