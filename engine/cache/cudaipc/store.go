// Package cudaipc is the cuda_ipc backend's producer store: each entry in
// one device allocation whose IPC handle is exported at publish; a claimed
// entry is lent until its consumer gives it back. A lent source is freed
// only when its loan comes back, never by a timer, since the consumer's
// process may still map it (CONTRACT Q-6); a source whose lend failed
// half-way is quarantined. The protocol is engine/xfer/cuda_ipc.go's.
package cudaipc

import (
	"errors"
	"fmt"
	"sync"

	"github.com/baton-dev/baton/engine/cache"
	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/xfer"
)

// Store is a cache.Store and cache.Quarantining over device allocations.
type Store struct {
	dev    xfer.IPCDevice
	hmac   []byte
	items  *cache.Entries[*Entry]
	mu     sync.Mutex
	lent   map[string]*Entry
	jailed []*Entry // quarantined sources
	// closed: Close ran; loans still out count as quarantined sources
	// from then on, until they come back.
	closed bool
}

// Entry is one published entry: its allocation and the loan (handle,
// bytes, one segment per tensor) a TransferEncoderCache answer carries.
type Entry struct {
	// Buf is the entry's device allocation, the items back to back.
	Buf xfer.DeviceBuffer
	// Loan is Buf's IPC handle, size in bytes and one segment per tensor,
	// as TransferEncoderCacheResponse.tensor_layout carries it.
	Loan xfer.IPCLoan
	// Borrower is the network peer of the TransferEncoderCache call that
	// was lent the allocation: only an Abort(encoder_cache) from that peer
	// gives the loan back (Lend, GiveBack).
	Borrower string
}

var _ cache.Quarantining = (*Store)(nil)

// New returns an empty store on dev with a fresh 32-byte reference key
// (SU-5); the error is crypto/rand's.
func New(dev xfer.IPCDevice) (*Store, error) {
	key, err := cache.NewKey("cudaipc")
	if err != nil {
		return nil, err
	}
	free := func(m *Entry) error { return dev.Free(m.Buf) }
	return &Store{dev: dev, hmac: key, items: cache.NewEntries("cudaipc", "free", free), lent: map[string]*Entry{}}, nil
}

// Device is the device the store allocates on.
func (s *Store) Device() xfer.IPCDevice { return s.dev }

// Backend is cache.BackendCUDAIPC.
func (s *Store) Backend() string { return cache.BackendCUDAIPC }

// Key is the instance's reference key.
func (s *Store) Key() []byte { return s.hmac }

// KeepsTensors: Write uploads the bytes at once.
func (s *Store) KeepsTensors() bool { return false }

// Write uploads the entry's tensors, item after item, into one device
// allocation and exports its IPC handle; on an error (allocation, upload,
// export: the device's; cache.ErrDuplicate for an id already in the
// store) nothing stays allocated.
func (s *Store) Write(id string, tensors []shareddir.Tensor, _ map[string]string) error {
	if s.items.Has(id) {
		return s.items.Duplicate(id)
	}
	total := 0
	segs := make([]xfer.IPCSegment, len(tensors))
	for i, t := range tensors {
		segs[i] = xfer.IPCSegment{Offset: uint64(total), Length: uint64(len(t.Data))}
		total += len(t.Data)
	}
	b, err := s.dev.Alloc(total)
	if err != nil {
		return fmt.Errorf("cudaipc: allocate %d bytes: %w", total, err)
	}
	for i, t := range tensors {
		if err = s.dev.Upload(b, int(segs[i].Offset), t.Data); err != nil {
			break
		}
	}
	var h [xfer.IPCHandleBytes]byte
	if err == nil {
		h, err = s.dev.Export(b)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("cudaipc: publish entry %s: %w", cache.Short(id), err), s.dev.Free(b))
	}
	return s.items.Put(id, &Entry{Buf: b, Loan: xfer.IPCLoan{Handle: h, Bytes: uint64(total), Segments: segs}}, func() error { return s.dev.Free(b) })
}

// ErrDuplicate answers a Write of an id already in the store.
var ErrDuplicate = cache.ErrDuplicate

// Take removes an entry from the store without freeing it: the caller is
// about to lend it (after handoff's ClaimForTransfer).
func (s *Store) Take(id string) (*Entry, bool) { return s.items.Take(id) }

// Lend records a taken entry as lent to borrower (the transfer call's peer).
func (s *Store) Lend(id string, m *Entry, borrower string) {
	s.mu.Lock()
	m.Borrower = borrower
	s.lent[id] = m
	s.mu.Unlock()
}

// GiveBack frees a lent source when caller is its borrower; lent is false
// when id is not lent, returned false when it is lent to another peer
// (anyone holding the reference may Abort it, but only the process that
// maps the allocation may say it no longer does: CONTRACT Q-6). err is the
// device's Free error (a cleanup failure, X-1). A loan that comes back
// after Close is freed too (it counted as quarantined until then).
func (s *Store) GiveBack(id, caller string) (lent, returned bool, err error) {
	s.mu.Lock()
	m, lent := s.lent[id]
	if lent && m.Borrower == caller {
		delete(s.lent, id)
		returned = true
	}
	s.mu.Unlock()
	if !returned {
		return lent, false, nil
	}
	return true, true, s.dev.Free(m.Buf)
}

// Free frees a taken entry's allocation (a lend that failed with a proof
// that no process maps it); the error is the device's.
func (s *Store) Free(m *Entry) error { return s.dev.Free(m.Buf) }

// Quarantine keeps a taken entry's allocation for the life of the process
// (Q-3 without a Q-6 proof).
func (s *Store) Quarantine(m *Entry) {
	s.mu.Lock()
	s.jailed = append(s.jailed, m)
	s.mu.Unlock()
}

// QuarantinedSources returns how many sources the store keeps quarantined
// and their bytes; after Close, loans still out count too.
func (s *Store) QuarantinedSources() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, m := range s.jailed {
		n += int64(m.Buf.Bytes())
	}
	count := len(s.jailed)
	if s.closed {
		for _, m := range s.lent {
			n += int64(m.Buf.Bytes())
		}
		count += len(s.lent)
	}
	return count, n
}

// Remove frees and forgets entry id; won is false when it was not (or no
// longer) in the store. When the device's Free fails (a cleanup failure,
// the caller reports it) the entry stays in the store, so a retry or
// Close can still free it.
func (s *Store) Remove(id string) (bool, error) { return s.items.Remove(id) }

// Exists reports whether id is in the store (not taken, not removed).
func (s *Store) Exists(id string) (bool, error) { return s.items.Has(id), nil }

// Collect does nothing: a loan is freed only when it comes back,
// never because time passed.
func (s *Store) Collect(int64) error { return nil }

// Close frees every entry (S-4). Loans still out stay: their consumer
// may map them, so they count as quarantined sources (Q-6: no proof yet)
// until they come back (GiveBack frees them then).
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return s.items.Close()
}

// Outstanding is the number of sources lent or quarantined: while any
// exists another process may map this device's memory.
func (s *Store) Outstanding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lent) + len(s.jailed)
}
