package cudaipc

import (
	"errors"
	"testing"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/xfer"
)

func newStore(t *testing.T) (*Store, *xfer.FakeIPC) {
	t.Helper()
	f := xfer.NewFakeIPC()
	s, err := New(f.Device(0))
	if err != nil {
		t.Fatal(err)
	}
	return s, f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func live(f *xfer.FakeIPC) int { _, n, _ := f.Counts(); return n }

var oneTensor = []shareddir.Tensor{{Data: make([]byte, 64)}}

// TestRemoveKeepsEntryWhenFreeFails: a Remove whose device Free fails
// reports the error and keeps the entry, so a retry (or Close) frees it.
func TestRemoveKeepsEntryWhenFreeFails(t *testing.T) {
	s, f := newStore(t)
	must(t, s.Write("e1", oneTensor, nil))
	f.SetFaults(false, false, true)
	if won, err := s.Remove("e1"); !won || err == nil {
		t.Fatalf("Remove with a failing Free = %v, %v; want true and an error", won, err)
	}
	if ok, _ := s.Exists("e1"); !ok {
		t.Fatal("entry gone from the store after a failed Remove: nothing can free its allocation")
	}
	f.SetFaults(false, false, false)
	if won, err := s.Remove("e1"); !won || err != nil {
		t.Errorf("Remove retried = %v, %v; want true, nil", won, err)
	}
	must(t, s.Close())
	if n := live(f); n != 0 {
		t.Errorf("%d allocation(s) still live after the retried Remove and Close", n)
	}
}

// TestWriteRefusesDuplicateID: a second Write of an id in the store is
// refused and leaves nothing allocated; Close frees the first.
func TestWriteRefusesDuplicateID(t *testing.T) {
	s, f := newStore(t)
	must(t, s.Write("x", oneTensor, nil))
	if err := s.Write("x", oneTensor, nil); !errors.Is(err, ErrDuplicate) {
		t.Errorf("second Write of id x = %v; want ErrDuplicate", err)
	}
	if n := live(f); n != 1 {
		t.Errorf("%d allocations after a refused duplicate Write; want 1", n)
	}
	must(t, s.Close())
	if n := live(f); n != 0 {
		t.Errorf("duplicate Write: %d allocation(s) leaked after Close", n)
	}
}

// TestLoanGivenBackAfterCloseIsFreed: a loan still out at Close counts as
// a quarantined source (its consumer may map it, Q-6) until its borrower
// gives it back; then its allocation is freed and the counts drop.
func TestLoanGivenBackAfterCloseIsFreed(t *testing.T) {
	s, f := newStore(t)
	must(t, s.Write("e1", oneTensor, nil))
	m, ok := s.Take("e1")
	if !ok {
		t.Fatal("Take of a written entry found nothing")
	}
	s.Lend("e1", m, "consumer:1")
	must(t, s.Close())
	if n, b := s.QuarantinedSources(); n != 1 || b != 64 {
		t.Errorf("QuarantinedSources after Close with a loan out = %d, %d; want 1, 64", n, b)
	}
	if n := s.Outstanding(); n != 1 {
		t.Errorf("Outstanding after Close with a loan out = %d; want 1", n)
	}
	if lent, returned, err := s.GiveBack("e1", "other:2"); !lent || returned || err != nil {
		t.Errorf("GiveBack by another peer after Close = %v, %v, %v; want true, false, nil", lent, returned, err)
	}
	if lent, returned, err := s.GiveBack("e1", "consumer:1"); !lent || !returned || err != nil {
		t.Errorf("GiveBack by the borrower after Close = %v, %v, %v; want true, true, nil", lent, returned, err)
	}
	if n := live(f); n != 0 {
		t.Errorf("%d allocation(s) live after the loan came back: the returned loan was never freed", n)
	}
	if n, b := s.QuarantinedSources(); n != 0 || b != 0 {
		t.Errorf("QuarantinedSources after the loan came back = %d, %d; want 0, 0", n, b)
	}
	if n := s.Outstanding(); n != 0 {
		t.Errorf("Outstanding after the loan came back = %d; want 0", n)
	}
}
