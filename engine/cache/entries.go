package cache

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
)

// ErrDuplicate answers a Write of an id already in a store: entry ids are
// 128-bit random (CONTRACT SU-6), so a duplicate is the caller's bug, and
// overwriting would leak the first entry's resources.
var ErrDuplicate = errors.New("entry id already in the store")

// NewKey returns a fresh 32-byte reference key for a store (SU-5); the
// error is crypto/rand's, prefixed with who.
func NewKey(who string) ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("%s: reference key: %w", who, err)
	}
	return key, nil
}

// Entries is the id-keyed table of the entries a store holds in this
// process (engine/cache/memory, engine/cache/cudaipc): Put, Take, Remove
// and Close under one lock, with free giving back an entry's resources
// (a deregistration, a device free). Safe for several goroutines.
type Entries[E any] struct {
	// who prefixes errors ("memory", "cudaipc"); freeing names what free
	// does ("deregister", "free").
	who, freeing string
	free         func(E) error
	mu           sync.Mutex
	items        map[string]E
}

// NewEntries returns an empty table whose Remove and Close give an
// entry's resources back with free.
func NewEntries[E any](who, freeing string, free func(E) error) *Entries[E] {
	return &Entries[E]{who: who, freeing: freeing, free: free, items: map[string]E{}}
}

// Put adds entry e under id. An id already there is ErrDuplicate, joined
// with undo's error: undo gives back what the caller allocated for e (the
// table keeps the first entry).
func (t *Entries[E]) Put(id string, e E, undo func() error) error {
	t.mu.Lock()
	if _, dup := t.items[id]; dup {
		t.mu.Unlock()
		return errors.Join(t.Duplicate(id), undo())
	}
	t.items[id] = e
	t.mu.Unlock()
	return nil
}

// Duplicate is the error of a Write of id already in the table
// (ErrDuplicate). A store checks with Has before it allocates; Put checks
// again for a concurrent Write of the same id.
func (t *Entries[E]) Duplicate(id string) error {
	return fmt.Errorf("%s: write entry %s: %w", t.who, Short(id), ErrDuplicate)
}

// Has reports whether id is in the table (not taken, not removed).
func (t *Entries[E]) Has(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.items[id]
	return ok
}

// Take removes entry id from the table without freeing it: the caller is
// about to transfer or lend it (after handoff's ClaimForTransfer).
func (t *Entries[E]) Take(id string) (E, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.items[id]
	delete(t.items, id)
	return e, ok
}

// Remove frees and forgets entry id; won is false when it was not (or no
// longer) in the table. When free fails (a cleanup failure, CONTRACT X-1:
// the caller reports it) the entry stays, so a retry or Close can still
// free it.
func (t *Entries[E]) Remove(id string) (won bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.items[id]
	if !ok {
		return false, nil
	}
	if err := t.free(e); err != nil {
		return true, fmt.Errorf("%s: %s entry %s: %w", t.who, t.freeing, Short(id), err)
	}
	delete(t.items, id)
	return true, nil
}

// Close removes every entry still in the table (S-4); the errors of the
// removals that failed are joined.
func (t *Entries[E]) Close() error {
	t.mu.Lock()
	ids := make([]string, 0, len(t.items))
	for id := range t.items {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if _, err := t.Remove(id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
