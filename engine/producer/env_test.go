package producer

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/consumer"
	"github.com/baton-dev/baton/engine/handoff"
)

// Entry ids of the tests (32 lowercase hex digits, as the engine's).
const (
	idA = "0123456789abcdef0123456789abcdef"
	idB = "fedcba9876543210fedcba9876543210"
)

// fakeEnv is the engine around the driver: a lock that knows whether it
// is held, and a record of every consequence the driver asked for.
type fakeEnv struct {
	mu     sync.Mutex
	held   bool
	m      handoff.Mutants
	failOn map[string]error // RemovalEndedLocked turns a success into this error (the cleanup_fail hook)

	rec sync.Mutex // guards the records below
	t   *testing.T
	// cleanupFailures are FailCleanup's "what: err".
	cleanupFailures []string
	// refused are CoreRefused's non-nil ops.
	refused []string
	// quarantines are EnterQuarantine's calls, with their proofs.
	quarantines []enteredQuarantine
	// removalsEnded are RemovalEndedLocked's ids, in order; started the
	// sum of RemovalsStartedLocked's n.
	removalsEnded []string
	started       int
	// ended is RemovalEndLocked's channel, closed by nobody: a release
	// that waits on it waits for good (the tests never make one wait).
	ended chan struct{}
}

type enteredQuarantine struct {
	q      *consumer.Quarantine
	proofs []<-chan struct{}
}

func newEnv(t *testing.T) *fakeEnv { return &fakeEnv{t: t} }

func (e *fakeEnv) Lock()   { e.mu.Lock(); e.held = true }
func (e *fakeEnv) Unlock() { e.held = false; e.mu.Unlock() }

func (e *fakeEnv) FailCleanup(what string, err error) {
	if e.held {
		e.t.Errorf("FailCleanup(%s) called with the lock held; want without (Env's contract)", what)
	}
	e.rec.Lock()
	defer e.rec.Unlock()
	e.cleanupFailures = append(e.cleanupFailures, fmt.Sprintf("%s: %v", what, err))
}

func (e *fakeEnv) CoreRefused(op string, err error) {
	if err == nil {
		return
	}
	e.rec.Lock()
	defer e.rec.Unlock()
	e.refused = append(e.refused, op)
}

func (e *fakeEnv) EnterQuarantine(q *consumer.Quarantine, proofs []<-chan struct{}) {
	if e.held {
		e.t.Errorf("EnterQuarantine(%s) called with the lock held; want without (Env's contract)", q.ID)
	}
	e.rec.Lock()
	defer e.rec.Unlock()
	e.quarantines = append(e.quarantines, enteredQuarantine{q: q, proofs: proofs})
}

func (e *fakeEnv) Decisions() handoff.Mutants { return e.m }

func (e *fakeEnv) RemovalEndedLocked(id string, err error) error {
	if !e.held {
		e.t.Errorf("RemovalEndedLocked(%s) called without the lock", id)
	}
	e.rec.Lock()
	defer e.rec.Unlock()
	e.removalsEnded = append(e.removalsEnded, id)
	if err == nil && e.failOn[id] != nil {
		return e.failOn[id]
	}
	return err
}

func (e *fakeEnv) RemovalsStartedLocked(n int) {
	if !e.held {
		e.t.Errorf("RemovalsStartedLocked(%d) called without the lock", n)
	}
	e.started += n
}

func (e *fakeEnv) RemovalEndLocked() (<-chan struct{}, func(string)) {
	if !e.held {
		e.t.Errorf("RemovalEndLocked called without the lock")
	}
	if e.ended == nil {
		e.ended = make(chan struct{})
	}
	return e.ended, nil
}

// fakeEntries is a cache.Store over a map, whose calls can fail on demand.
type fakeEntries struct {
	mu         sync.Mutex
	items      map[string]bool
	removeErr  map[string]error
	collectErr error
	closeErr   error
	collected  []int64
	closed     bool
}

func newEntries(ids ...string) *fakeEntries {
	s := &fakeEntries{items: map[string]bool{}, removeErr: map[string]error{}}
	for _, id := range ids {
		s.items[id] = true
	}
	return s
}

func (s *fakeEntries) Backend() string    { return "fake" }
func (s *fakeEntries) Key() []byte        { return []byte("key") }
func (s *fakeEntries) KeepsTensors() bool { return false }
func (s *fakeEntries) Write(id string, _ []shareddir.Tensor, _ map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items[id] = true
	return nil
}

func (s *fakeEntries) Remove(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.removeErr[id]; err != nil {
		return true, err
	}
	won := s.items[id]
	delete(s.items, id)
	return won, nil
}

func (s *fakeEntries) Exists(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.items[id], nil
}

func (s *fakeEntries) Collect(nowMs int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.collected = append(s.collected, nowMs)
	return s.collectErr
}

func (s *fakeEntries) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.closeErr
}

// held returns the ids still in the store, sorted.
func (s *fakeEntries) held() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.items {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// discard is a logger that writes nothing.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// publish reserves and commits entries of 100 bytes each, expiring at
// expiresMs.
func publish(t *testing.T, tb *Table, expiresMs int64, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := tb.Reserve(id, 100); err != nil {
			t.Fatal(err)
		}
		if err := tb.CommitPublish(id, expiresMs); err != nil {
			t.Fatal(err)
		}
	}
}

var errDisk = errors.New("disk on fire")
