package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/xfer"
)

// memoryStore is the tcp backend's producer storage: each entry's tensors
// stay in this process's memory, registered with the transfer agent so a
// WRITE can stream them into a consumer's buffers (NIXL model). Entries
// whose transfer failed after removal while its WRITE may still read them
// are quarantined: kept registered and referenced until the WRITE has
// ended.
type memoryStore struct {
	agent  xfer.Agent
	hmac   []byte
	mu     sync.Mutex
	items  map[string]*memoryEntry
	jailed map[string]*memoryEntry // quarantined source buffers by entry id
}

type memoryEntry struct {
	tensors []shareddir.Tensor
	reg     *xfer.Registration
}

func newMemoryStore(agent xfer.Agent) (*memoryStore, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("server: reference key: %w", err)
	}
	return &memoryStore{agent: agent, hmac: key, items: map[string]*memoryEntry{}, jailed: map[string]*memoryEntry{}}, nil
}

func (s *memoryStore) backend() string { return BackendTCP }
func (s *memoryStore) key() []byte     { return s.hmac }

// keepsTensors: the tensors' bytes are registered as the WRITE's source.
func (s *memoryStore) keepsTensors() bool { return true }

func (s *memoryStore) write(id string, tensors []shareddir.Tensor, _ map[string]string) error {
	regions := make([][]byte, len(tensors))
	for i, t := range tensors {
		regions[i] = t.Data
	}
	reg, err := s.agent.RegisterMemory(regions)
	if err != nil {
		return fmt.Errorf("server: register source buffers: %w", err)
	}
	s.mu.Lock()
	s.items[id] = &memoryEntry{tensors: tensors, reg: reg}
	s.mu.Unlock()
	return nil
}

// take removes an entry from the store without deregistering it: the caller
// is about to WRITE from it (after ClaimForTransfer).
func (s *memoryStore) take(id string) (*memoryEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.items[id]
	delete(s.items, id)
	return m, ok
}

// free deregisters a taken entry's buffers once its WRITE completed.
func (s *memoryStore) free(m *memoryEntry) error {
	return s.agent.Deregister(m.reg)
}

// quarantine keeps a taken entry's buffers until unjail.
func (s *memoryStore) quarantine(id string, m *memoryEntry) {
	s.mu.Lock()
	s.jailed[id] = m
	s.mu.Unlock()
}

// unjail ends the quarantine of entry id's source; the caller frees it.
func (s *memoryStore) unjail(id string) {
	s.mu.Lock()
	delete(s.jailed, id)
	s.mu.Unlock()
}

// quarantinedSources returns how many taken entries' sources the store
// keeps quarantined and their bytes.
func (s *memoryStore) quarantinedSources() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, m := range s.jailed {
		for _, t := range m.tensors {
			n += int64(len(t.Data))
		}
	}
	return len(s.jailed), n
}

func (s *memoryStore) remove(id string) (bool, error) {
	m, ok := s.take(id)
	if !ok {
		return false, nil
	}
	if err := s.agent.Deregister(m.reg); err != nil {
		return true, fmt.Errorf("server: deregister entry %s: %w", id, err)
	}
	return true, nil
}

func (s *memoryStore) exists(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.items[id]
	return ok, nil
}

func (s *memoryStore) collect(int64) error { return nil }

func (s *memoryStore) close() error {
	s.mu.Lock()
	ids := make([]string, 0, len(s.items))
	for id := range s.items {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if _, err := s.remove(id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
