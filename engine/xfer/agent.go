package xfer

import "context"

// Backend names, as they appear in EncoderCacheRef.backend (WIRE.md) and in
// an agent's metadata.
const (
	// BackendLoopback moves bytes between agents of one process (NewLoopback).
	BackendLoopback = "loopback"
	// BackendTCP moves bytes over TCP between processes (NewTCP).
	BackendTCP = "tcp"
)

// MaxSegments is the most descriptors one write or READ may carry
// (CreateWrite, CreateRead, and the tcp frame a target accepts). A bound of
// our own, not NIXL's.
const MaxSegments = 1024

// Agent is one NIXL-style transfer agent: it registers this process's memory,
// describes itself to peers (metadata), WRITEs from its registered memory
// into a peer's registered memory, and READs a peer's registered memory
// into its own. See the package doc for the lifecycle, the
// NIXL call behind each method and the error rules.
//
// All methods are safe for concurrent use. None blocks on the network: Post
// starts a write and returns; Status polls it.
type Agent interface {
	// Name is the agent's name as peers see it (LoadRemoteMetadata returns
	// it to them).
	Name() string

	// Backend is BackendLoopback or BackendTCP.
	Backend() string

	// RegisterMemory registers host memory regions (each at least one byte)
	// and returns one Descriptor per region, in order, carrying its address,
	// length and remote key. Peers may write into a region only while it is
	// registered. Errors: ErrInvalidParam (no regions, an empty region),
	// ErrNotAllowed (closed).
	RegisterMemory(regions [][]byte) (*Registration, error)

	// Deregister ends a registration. Refused with ErrNotAllowed, keeping the
	// registration, while a request created over any of its regions is not
	// yet released (so in particular while a write from it may be in
	// flight), or while a peer's write is landing in it. ErrNotFound if reg
	// is unknown or already deregistered; ErrInvalidParam if nil.
	Deregister(reg *Registration) error

	// Revoke ends a registration at once, even while a peer's transfer may
	// be landing in it (CONTRACT Q-6): from the call on, every transfer
	// that names its regions is refused (their remote keys are forgotten)
	// and the registration is gone from the agent's tables. The memory is
	// not the caller's yet: done is closed once no peer transfer lands in
	// or reads from the regions, no local request uses them, and every
	// connection that ever carried a transfer into them has closed (tcp:
	// the peer closed it, the peer's process ended, or it stayed idle for
	// TCPOptions.IdleTimeout). Only then may the caller free or reuse the
	// buffers. A NIXL binding revokes with deregisterMem plus
	// invalidateRemoteMD and closes done when the peer's endpoint is
	// disconnected. Errors: ErrInvalidParam for nil, ErrNotFound for an
	// unknown or already ended registration.
	Revoke(reg *Registration) (done <-chan struct{}, err error)

	// LocalMetadata is this agent's metadata: the bytes a peer passes to
	// LoadRemoteMetadata before writing to us (TransferEncoderCacheRequest.
	// consumer_agent). Call it after RegisterMemory (a NIXL binding's blob
	// lists the registered regions). ErrNotAllowed if closed.
	LocalMetadata() ([]byte, error)

	// LoadRemoteMetadata makes a peer known and returns its name, the
	// peer argument of CreateWrite. Loading metadata for a known name
	// replaces the entry; requests already created keep what they had.
	// The entry stays until InvalidateRemoteMetadata. The table is shared
	// by name across every caller, so metadata a request or another
	// untrusted party supplies must not go through it: its entries would
	// pile up (one per name), and metadata loaded under a name between
	// another caller's load and its CreateWrite would redirect that
	// caller's WRITE. Use CreateWriteTo and CreateReadFrom for those.
	// ErrInvalidParam for bytes that are not metadata of this agent's
	// backend (and, for loopback, of the same Registry; for tcp, with an
	// address not in its canonical form, CanonicalAddress).
	LoadRemoteMetadata(md []byte) (peer string, err error)

	// InvalidateRemoteMetadata forgets a peer. Requests already created
	// keep their copy. ErrNotFound if the peer is unknown.
	InvalidateRemoteMetadata(peer string) error

	// CreateWrite prepares a WRITE of local[i] into remote[i] of peer, for
	// every i. Local descriptors must lie inside this agent's registered
	// regions; remote descriptors are checked by the target (key and
	// bounds) when the write arrives, so a bad one fails the write with
	// ErrBackend after Post. Errors (definite: nothing was sent):
	// ErrInvalidParam, ErrMismatch (counts or lengths differ), ErrNotFound
	// (unknown peer, unregistered local range), ErrNotSupported (memory kind
	// other than host), ErrNotAllowed (closed).
	CreateWrite(local []Descriptor, peer string, remote []Descriptor) (*Request, error)

	// CreateRead prepares a READ of remote[i] of peer into local[i], for
	// every i: the initiator pulls bytes out of the peer's registered
	// memory into its own registered memory (NIXL_READ). Local
	// descriptors must lie inside this agent's registered regions (the
	// destinations; Deregister is refused until the request is released);
	// remote descriptors are checked by the target (key and bounds) when
	// the READ arrives, so a bad one fails the READ with ErrBackend after
	// Post, and the target's memory is never written. The errors, the
	// lifecycle (Post, Status, Wait, Release) and the meaning of an error
	// after Post are those of CreateWrite, except that the uncertainty is
	// about the LOCAL destinations: after a failed READ they hold none,
	// some or all of the bytes, and this agent stops writing into them once
	// Status no longer answers StatusInProgress.
	CreateRead(local []Descriptor, peer string, remote []Descriptor) (*Request, error)

	// CreateWriteTo is CreateWrite to the peer that md (the peer's
	// LocalMetadata) describes, rather than to a name loaded before: md
	// is decoded for this request alone and the request keeps its own
	// copy of the peer; the agent's table of loaded peers is neither read
	// nor changed. So each request writes only to the agent its own
	// metadata describes, whatever other callers load or create meanwhile
	// under the same name, and nothing of the peer outlives the request
	// (Release), however many distinct peers callers name. A server
	// takes this path for metadata a request carries (the engine's
	// producer: TransferEncoderCacheRequest.consumer_agent). Errors:
	// LoadRemoteMetadata's for md (ErrInvalidParam), then CreateWrite's.
	CreateWriteTo(local []Descriptor, md []byte, remote []Descriptor) (*Request, error)

	// CreateReadFrom is CreateRead from the peer that md describes, with
	// md for this request alone, as CreateWriteTo (the engine's decode
	// engine: the prefill engine's agent a KV session names). Errors:
	// LoadRemoteMetadata's for md, then CreateRead's.
	CreateReadFrom(local []Descriptor, md []byte, remote []Descriptor) (*Request, error)

	// Post starts the write. It returns StatusDone if the write completed
	// within the call, StatusInProgress if it continues (poll Status, or
	// wait on Request.Done). A request may be posted again once its previous
	// post has finished. ErrRepostActive if it is still in flight. Any other
	// error after Post is an UNCERTAIN outcome (CONTRACT ).
	Post(req *Request) (Status, error)

	// Status polls a posted request: StatusInProgress, StatusDone, or the
	// error that ended the write (sticky until the next Post; UNCERTAIN
	// outcome). ErrNotPosted if never posted; ErrInvalidParam if the handle
	// is released or foreign.
	Status(req *Request) (Status, error)

	// Release frees a request handle. Refused with ErrRepostActive while its
	// write may still be in flight; the handle is kept and must be released
	// later (or the buffers quarantined). ErrInvalidParam if already
	// released or foreign.
	Release(req *Request) error

	// Counters reports the agent's live tables, for leak checks and health
	// observables.
	Counters() Counters

	// Close ends every write in flight (they fail with ErrCanceled), stops
	// accepting peers' writes, and returns once no goroutine of the agent
	// touches registered memory any more. Afterwards Status, Release,
	// Deregister, InvalidateRemoteMetadata and Counters still work (so the
	// caller can empty its tables); RegisterMemory, LocalMetadata,
	// LoadRemoteMetadata, CreateWrite and Post answer ErrNotAllowed.
	// Closing twice is a no-op.
	Close() error
}

// Status is the state of a posted write, NIXL's non-error nixl_status_t values.
type Status int

const (
	// StatusDone [NIXL_SUCCESS, 0]: every byte landed in the peer's memory
	// and the peer acknowledged it.
	StatusDone Status = 0
	// StatusInProgress [NIXL_IN_PROG, 1]: the write is in flight.
	StatusInProgress Status = 1
)

// String names the status as NIXL does.
func (s Status) String() string {
	switch s {
	case StatusDone:
		return "NIXL_SUCCESS"
	case StatusInProgress:
		return "NIXL_IN_PROG"
	}
	return "Status(?)"
}

// Counters is a snapshot of an agent's tables. Every field is a count; all
// are zero for an agent that has released and deregistered everything and
// invalidated its peers.
type Counters struct {
	// Registrations not yet deregistered.
	Registrations int
	// Regions in those registrations.
	Regions int
	// Requests created and not yet released.
	Requests int
	// InFlight: requests posted whose write has not finished.
	InFlight int
	// InboundInFlight: peers' writes currently landing in this agent's
	// registered memory (accepted, not yet ended).
	InboundInFlight int
	// Peers whose metadata is loaded (LoadRemoteMetadata; the peers of
	// CreateWriteTo and CreateReadFrom live in their requests).
	Peers int
	// Revoked registrations whose Revoke is not yet done (a transfer or a
	// connection that carried one may still touch them).
	Revoked int
}

// Wait blocks until req's current post finishes or ctx ends, then returns
// a.Status(req). If ctx ends first it returns StatusInProgress and ctx.Err():
// the write is still in flight and its outcome unknown (CONTRACT Q-1, C-4);
// the caller must not release or reuse the buffers on that basis.
func Wait(ctx context.Context, a Agent, req *Request) (Status, error) {
	if req == nil {
		return a.Status(req)
	}
	select {
	case <-req.Done():
		return a.Status(req)
	case <-ctx.Done():
		return StatusInProgress, ctx.Err()
	}
}
