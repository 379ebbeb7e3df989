package xfer

import "fmt"

// MemoryKind is where a region lives, MemoryRegion.memory_kind in WIRE.md.
type MemoryKind string

const (
	// MemoryHost is process memory (NIXL DRAM_SEG). Both backends move it.
	MemoryHost MemoryKind = "host"
	// MemoryCUDA is device memory (NIXL VRAM_SEG). Neither loopback nor tcp
	// moves it (ErrNotSupported).
	MemoryCUDA MemoryKind = "cuda"
)

// maxRemoteKeyBytes bounds Descriptor.RemoteKey on every input path.
const maxRemoteKeyBytes = 64

// remoteKeyBytes is the length of the keys this package issues: 128 random
// bits, so a peer cannot guess a region it was not told about.
const remoteKeyBytes = 16

// Descriptor names a byte range of registered memory, the fields of WIRE.md's
// MemoryRegion. A consumer sends its descriptors to the producer inside
// TransferEncoderCacheRequest.targets; the producer passes them as the remote
// side of CreateWrite unchanged.
type Descriptor struct {
	// Address is the first byte, in the owning agent's address space. For
	// loopback and tcp it is a synthetic address the agent issued at
	// RegisterMemory (never a Go pointer); for a NIXL binding, a virtual
	// address.
	Address uint64
	// Length in bytes, at least 1.
	Length uint64
	// DeviceID is the device (0 for host memory).
	DeviceID uint32
	// MemoryKind is MemoryHost for loopback and tcp.
	MemoryKind MemoryKind
	// RemoteKey authorises writes into the registered region that contains
	// the range: 16 random bytes issued at RegisterMemory; the target
	// refuses a write whose key does not match the region holding Address.
	// At most 64 bytes on input.
	RemoteKey []byte
}

// Sub returns the descriptor of length bytes starting offset bytes into d,
// with d's device, kind and key. ErrInvalidParam if the range is empty or
// not inside d.
func (d Descriptor) Sub(offset, length uint64) (Descriptor, error) {
	if length == 0 || offset > d.Length || length > d.Length-offset {
		return Descriptor{}, fmt.Errorf("xfer: sub-range [%d, +%d) of a %d-byte descriptor: %w", offset, length, d.Length, ErrInvalidParam)
	}
	s := d
	s.Address = d.Address + offset
	s.Length = length
	s.RemoteKey = append([]byte(nil), d.RemoteKey...)
	return s, nil
}

// Registration is the handle of one RegisterMemory call.
type Registration struct {
	// Descriptors has one entry per registered region, in the order given,
	// each covering the whole region. Copies: changing them changes nothing
	// in the agent.
	Descriptors []Descriptor

	id    uint64
	owner *core
	idx   int // in owner.regs while live; guarded by the owner's mutex
	// regions are the registered buffers, one per descriptor, while the
	// registration is live (nil once deregistered or revoked); guarded by
	// the owner's mutex.
	regions []*region
}

// Request is the handle of one WRITE created by CreateWrite, or one READ
// created by CreateRead (NIXL's nixlXferReqH). Opaque; use it with the
// agent that created it.
type Request struct {
	id    uint64
	owner *core
	idx   int // in owner.reqs until released; guarded by the owner's mutex

	// Immutable after CreateWrite or CreateRead.
	peer    peerInfo
	read    bool         // a READ (remote -> local) rather than a WRITE
	srcs    [][]byte     // local bytes, one per segment (a READ's destinations)
	remote  []Descriptor // targets, one per segment
	regions []*region    // distinct local regions the request reads
	total   uint64       // bytes per post
	// one backs srcs, remote, regions and the remote key's copy of a
	// one-segment request (the usual one) in the request's own allocation.
	one struct {
		src    [1][]byte
		remote [1]Descriptor
		region [1]*region
		key    [remoteKeyBytes]byte
	}

	// Guarded by owner.mu.
	state    reqState
	err      error
	done     chan struct{} // closed when the current post finishes; nil in flight until Done asks
	cancel   func()        // ends the current post's write (nil: a held post, or not yet set)
	released bool
}

type reqState int

const (
	reqCreated reqState = iota
	reqInFlight
	reqDone
	reqFailed
)

// Done returns a channel closed when the request's current post has finished
// (Status no longer StatusInProgress). For a request never posted it is
// already closed (Status answers ErrNotPosted). A new Post gets a new channel.
func (r *Request) Done() <-chan struct{} {
	if r == nil || r.owner == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	r.owner.mu.Lock()
	defer r.owner.mu.Unlock()
	if r.done == nil { // in flight, and nobody asked before (Post)
		r.done = make(chan struct{})
	}
	return r.done
}
