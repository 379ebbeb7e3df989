package cache_test

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/baton-dev/baton/engine/cache"
	"github.com/baton-dev/baton/engine/cache/cudaipc"
	"github.com/baton-dev/baton/engine/cache/memory"
	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/xfer"
)

// stores returns one store per backend, each on a fresh medium.
func stores(t *testing.T) map[string]cache.Store {
	t.Helper()
	agent, err := xfer.NewLoopback(xfer.NewRegistry(), xfer.Options{Name: "producer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Close() })
	mem, err := memory.New(agent)
	if err != nil {
		t.Fatal(err)
	}
	ipc, err := cudaipc.New(xfer.NewFakeIPC().Device(0))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := shareddir.OpenProducer(shareddir.OSFS{}, t.TempDir(), "11111111-2222-4333-8444-555555555555", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]cache.Store{
		cache.BackendTCP:       mem,
		cache.BackendCUDAIPC:   ipc,
		cache.BackendSharedDir: shareddir.Store{Dir: dir},
	}
}

// TestStoresOneLifecycle runs the same write, exists, remove, close on every
// backend's store: the producer driver relies on these answers whatever the
// backend (a second Remove is not won: the consumer's claim or an earlier
// removal took it).
func TestStoresOneLifecycle(t *testing.T) {
	for backend, s := range stores(t) {
		t.Run(backend, func(t *testing.T) {
			if s.Backend() != backend {
				t.Fatalf("Backend() = %q, want %q", s.Backend(), backend)
			}
			if len(s.Key()) < 32 {
				t.Fatalf("Key() is %d bytes; a reference key is at least 32 (SU-5)", len(s.Key()))
			}
			data := bytes.Repeat([]byte{7}, 64)
			id := "0123456789abcdef0123456789abcdef"
			if err := s.Write(id, []shareddir.Tensor{{Name: "item0", DType: "U8", Shape: []int{64}, Data: data}}, map[string]string{}); err != nil {
				t.Fatal(err)
			}
			if ok, err := s.Exists(id); !ok || err != nil {
				t.Fatalf("Exists after Write = %v, %v", ok, err)
			}
			if won, err := s.Remove(id); !won || err != nil {
				t.Fatalf("Remove = %v, %v; want won", won, err)
			}
			if won, err := s.Remove(id); won || err != nil {
				t.Fatalf("second Remove = %v, %v; want not won, no error", won, err)
			}
			if ok, _ := s.Exists(id); ok {
				t.Fatal("Exists after Remove")
			}
			if err := s.Collect(0); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestQuarantiningStoresCountTheirSources: a taken entry quarantined after
// a failed transfer is counted with its bytes until freed.
func TestQuarantiningStoresCountTheirSources(t *testing.T) {
	s := stores(t)
	mem := s[cache.BackendTCP].(*memory.Store)
	data := make([]byte, 48)
	if err := mem.Write("a", []shareddir.Tensor{{Name: "item0", DType: "U8", Shape: []int{48}, Data: data}}, nil); err != nil {
		t.Fatal(err)
	}
	m, ok := mem.Take("a")
	if !ok {
		t.Fatal("Take after Write: not there")
	}
	mem.Quarantine("a", m)
	if n, b := mem.QuarantinedSources(); n != 1 || b != 48 {
		t.Fatalf("QuarantinedSources = %d, %d; want 1, 48", n, b)
	}
	mem.Unjail("a")
	if err := mem.Free(m); err != nil {
		t.Fatal(err)
	}
	if n, _ := mem.QuarantinedSources(); n != 0 {
		t.Fatalf("after Unjail %d quarantined", n)
	}

	ipc := s[cache.BackendCUDAIPC].(*cudaipc.Store)
	if err := ipc.Write("b", []shareddir.Tensor{{Name: "item0", DType: "U8", Shape: []int{16}, Data: make([]byte, 16)}}, nil); err != nil {
		t.Fatal(err)
	}
	e, _ := ipc.Take("b")
	ipc.Lend("b", e, "peer-1")
	if lent, returned, err := ipc.GiveBack("b", "peer-2"); !lent || returned || err != nil {
		t.Fatalf("GiveBack by another peer = %v, %v, %v; want lent, not returned (Q-6)", lent, returned, err)
	}
	if ipc.Outstanding() != 1 {
		t.Fatalf("Outstanding = %d, want 1", ipc.Outstanding())
	}
	if err := ipc.Close(); err != nil {
		t.Fatal(err)
	}
	if n, b := ipc.QuarantinedSources(); n != 1 || b != 16 {
		t.Fatalf("after Close with a loan out: QuarantinedSources = %d, %d; want 1, 16", n, b)
	}
}
