package memory

import (
	"errors"
	"testing"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/xfer"
)

// newAgents starts a producer and a consumer loopback agent of one registry.
func newAgents(t *testing.T) (xfer.Agent, xfer.Agent) {
	t.Helper()
	reg := xfer.NewRegistry()
	p, err := xfer.NewLoopback(reg, xfer.Options{Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := xfer.NewLoopback(reg, xfer.Options{Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); c.Close() })
	return p, c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRemoveKeepsEntryWhenDeregisterFails: a Remove whose Deregister is
// refused (a request still reads the entry) reports the error and keeps the
// entry, so once the request is released a retry releases it and nothing
// stays registered.
func TestRemoveKeepsEntryWhenDeregisterFails(t *testing.T) {
	p, c := newAgents(t)
	s, err := New(p)
	must(t, err)
	must(t, s.Write("e1", []shareddir.Tensor{{Data: make([]byte, 64)}}, nil))
	md, err := c.LocalMetadata()
	must(t, err)
	dst, err := c.RegisterMemory([][]byte{make([]byte, 64)})
	must(t, err)
	e, _ := s.items.Take("e1") // read the entry's registration, then put it back
	must(t, s.items.Put("e1", e, func() error { return nil }))
	req, err := p.CreateWriteTo(e.Reg.Descriptors, md, dst.Descriptors)
	must(t, err)
	if won, err := s.Remove("e1"); !won || !errors.Is(err, xfer.ErrNotAllowed) {
		t.Fatalf("Remove while a request reads the entry = %v, %v; want true, ErrNotAllowed", won, err)
	}
	if ok, _ := s.Exists("e1"); !ok {
		t.Fatal("entry gone from the store after a failed Remove: nothing can release its registration")
	}
	must(t, p.Release(req))
	if won, err := s.Remove("e1"); !won || err != nil {
		t.Errorf("Remove retried after the request was released = %v, %v; want true, nil", won, err)
	}
	must(t, s.Close())
	if n := p.Counters().Registrations; n != 0 {
		t.Errorf("%d registration(s) still held by the agent after the retried Remove and Close", n)
	}
}

// TestWriteRefusesDuplicateID: a second Write of an id in the store is
// refused and registers nothing; the first entry stays and is released by
// Close.
func TestWriteRefusesDuplicateID(t *testing.T) {
	p, _ := newAgents(t)
	s, err := New(p)
	must(t, err)
	must(t, s.Write("x", []shareddir.Tensor{{Data: make([]byte, 8)}}, nil))
	if err := s.Write("x", []shareddir.Tensor{{Data: make([]byte, 8)}}, nil); !errors.Is(err, ErrDuplicate) {
		t.Errorf("second Write of id x = %v; want ErrDuplicate", err)
	}
	if n := p.Counters().Registrations; n != 1 {
		t.Errorf("%d registrations after a refused duplicate Write; want 1", n)
	}
	must(t, s.Close())
	if n := p.Counters().Registrations; n != 0 {
		t.Errorf("duplicate Write: %d registration(s) leaked after Close", n)
	}
}
