// Package memory is the tcp backend's producer store: each entry's tensors
// stay in this process's memory, registered with the transfer agent so a
// WRITE can stream them into a consumer's buffers (NIXL model, engine/xfer).
// Entries whose transfer failed after removal while its WRITE may still read
// them are quarantined: kept registered and referenced until the WRITE has
// ended (CONTRACT ).
package memory

import (
	"fmt"
	"sync"

	"github.com/baton-dev/baton/engine/cache"
	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/xfer"
)

// Store is a cache.Store and cache.Quarantining over registered host memory.
type Store struct {
	agent  xfer.Agent
	hmac   []byte
	items  *cache.Entries[*Entry]
	mu     sync.Mutex
	jailed map[string]*Entry // quarantined source buffers by entry id
}

// Entry is one published entry: its tensors and their registration with
// the agent (one region per tensor, in order).
type Entry struct {
	// Tensors are the entry's encoder outputs, one F32 [rows, cols] tensor
	// per item, in item order; their bytes are the WRITE's source.
	Tensors []shareddir.Tensor
	// Reg registers Tensors' bytes with the agent, one region per tensor in
	// order.
	Reg *xfer.Registration
}

var _ cache.Quarantining = (*Store)(nil)

// New returns an empty store whose entries agent registers, with a fresh
// 32-byte reference key (SU-5); the error is crypto/rand's.
func New(agent xfer.Agent) (*Store, error) {
	key, err := cache.NewKey("memory")
	if err != nil {
		return nil, err
	}
	deregister := func(m *Entry) error { return agent.Deregister(m.Reg) }
	return &Store{agent: agent, hmac: key, items: cache.NewEntries("memory", "deregister", deregister), jailed: map[string]*Entry{}}, nil
}

// Backend is cache.BackendTCP.
func (s *Store) Backend() string { return cache.BackendTCP }

// Key is the instance's reference key.
func (s *Store) Key() []byte { return s.hmac }

// KeepsTensors: the tensors' bytes are registered as the WRITE's source.
func (s *Store) KeepsTensors() bool { return true }

// Write registers the tensors' bytes (one region per tensor) under id;
// errors are the agent's RegisterMemory errors, and ErrDuplicate for an id
// already in the store (cache.ErrDuplicate).
func (s *Store) Write(id string, tensors []shareddir.Tensor, _ map[string]string) error {
	if s.items.Has(id) {
		return s.items.Duplicate(id)
	}
	regions := make([][]byte, len(tensors))
	for i, t := range tensors {
		regions[i] = t.Data
	}
	reg, err := s.agent.RegisterMemory(regions)
	if err != nil {
		return fmt.Errorf("memory: register source buffers: %w", err)
	}
	return s.items.Put(id, &Entry{Tensors: tensors, Reg: reg}, func() error { return s.agent.Deregister(reg) })
}

// ErrDuplicate answers a Write of an id already in the store.
var ErrDuplicate = cache.ErrDuplicate

// Take removes an entry from the store without deregistering it: the
// caller is about to WRITE from it (after handoff's ClaimForTransfer).
func (s *Store) Take(id string) (*Entry, bool) { return s.items.Take(id) }

// Free deregisters a taken entry's buffers once its WRITE completed (or a
// proof says none is in flight: Q-6); the error is the agent's Deregister
// error (xfer.ErrNotAllowed while a request still uses them).
func (s *Store) Free(m *Entry) error {
	return s.agent.Deregister(m.Reg)
}

// Quarantine keeps a taken entry's buffers until Unjail.
func (s *Store) Quarantine(id string, m *Entry) {
	s.mu.Lock()
	s.jailed[id] = m
	s.mu.Unlock()
}

// Unjail ends the quarantine of entry id's source; the caller frees it.
func (s *Store) Unjail(id string) {
	s.mu.Lock()
	delete(s.jailed, id)
	s.mu.Unlock()
}

// QuarantinedSources returns how many taken entries' sources the store
// keeps quarantined and their bytes.
func (s *Store) QuarantinedSources() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, m := range s.jailed {
		for _, t := range m.Tensors {
			n += int64(len(t.Data))
		}
	}
	return len(s.jailed), n
}

// Remove deregisters and forgets entry id; won is false when it was not
// (or no longer) in the store. When the Deregister fails (a cleanup
// failure, X-1: the caller reports it) the entry stays in the store, so a
// retry or Close can still release it.
func (s *Store) Remove(id string) (bool, error) { return s.items.Remove(id) }

// Exists reports whether id is in the store (not taken, not removed).
func (s *Store) Exists(id string) (bool, error) { return s.items.Has(id), nil }

// Collect does nothing: memory leaves no temp files.
func (s *Store) Collect(int64) error { return nil }

// Close removes every entry still in the store (S-4); quarantined sources
// stay registered (their WRITE may still read them).
func (s *Store) Close() error { return s.items.Close() }
