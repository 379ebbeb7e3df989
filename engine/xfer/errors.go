package xfer

import "errors"

// Sentinel errors, one per NIXL status code (nixl_status_t in NIXL's
// nixl_types.h; the number in brackets is the C++ value). Every error this
// package returns wraps exactly one of them with %w. They are for logs,
// metrics and tests. A caller may DECIDE on nothing finer than the rules in
// the package doc ("How errors collapse"): a binding to NIXL's C API
// (nixl_capi) folds almost all of them into one code, so behaviour that
// depends on, say, ErrMismatch versus ErrNotFound would not survive a switch
// to the real library.
var (
	// ErrNotPosted [NIXL_ERR_NOT_POSTED, -1]: Status of a request that was
	// created but never posted.
	ErrNotPosted = errors.New("xfer: request not posted")

	// ErrInvalidParam [NIXL_ERR_INVALID_PARAM, -2]: a malformed argument: an
	// empty descriptor list, a zero-length region or descriptor, an address
	// range that wraps around 2^64, a remote key that is not 1..64 bytes,
	// more than MaxSegments descriptors, a request or registration handle
	// that is nil, released or belongs to another agent, malformed metadata
	// bytes (LoadRemoteMetadata), or metadata of another backend or another
	// loopback registry.
	ErrInvalidParam = errors.New("xfer: invalid parameter")

	// ErrBackend [NIXL_ERR_BACKEND, -3]: the transfer failed in the backend:
	// the target refused the write (whatever its reason: unknown remote key,
	// range outside the registered region, wrong agent), a malformed reply,
	// or a timeout (TCPOptions.WriteTimeout). After Post it means the outcome
	// is UNCERTAIN: some, none or all bytes may have landed (CONTRACT Q-1).
	ErrBackend = errors.New("xfer: backend error")

	// ErrNotFound [NIXL_ERR_NOT_FOUND, -4]: a name or handle the agent does
	// not know: a peer whose metadata was never loaded (or was invalidated),
	// a local descriptor that is not inside one of this agent's registered
	// regions, a registration already deregistered.
	ErrNotFound = errors.New("xfer: not found")

	// ErrMismatch [NIXL_ERR_MISMATCH, -5]: the local and remote descriptor
	// lists of CreateWrite differ in count or in the length of a pair.
	ErrMismatch = errors.New("xfer: descriptor mismatch")

	// ErrNotAllowed [NIXL_ERR_NOT_ALLOWED, -6]: the operation is refused in
	// the current state: Deregister of a registration that a live request
	// uses or that a remote write is landing in; RegisterMemory,
	// LocalMetadata, LoadRemoteMetadata, CreateWrite or Post on a closed
	// agent. A refused registration is kept and stays valid.
	ErrNotAllowed = errors.New("xfer: not allowed")

	// ErrRepostActive [NIXL_ERR_REPOST_ACTIVE, -7]: Post of a request whose
	// previous post is still in flight, or Release of a request whose write
	// may still be in flight (neither backend can recall bytes already on the
	// way, so an in-flight write is never aborted by Release). The request
	// handle is kept and stays valid; retry Release once Status is no longer
	// StatusInProgress.
	ErrRepostActive = errors.New("xfer: transfer still in flight")

	// ErrNotSupported [NIXL_ERR_NOT_SUPPORTED, -9]: a memory kind this
	// backend cannot move (MemoryCUDA on loopback and tcp).
	ErrNotSupported = errors.New("xfer: not supported by this backend")

	// ErrRemoteDisconnect [NIXL_ERR_REMOTE_DISCONNECT, -10]: the connection
	// to the peer could not be made or broke during the write, or the
	// acknowledgement never arrived. After Post the outcome is UNCERTAIN
	// (CONTRACT Q-1): bytes may have landed, up to all of them.
	ErrRemoteDisconnect = errors.New("xfer: remote disconnected")

	// ErrCanceled [NIXL_ERR_CANCELED, -11]: the write was cut short by this
	// side: the agent was closed, or a test's Hang fault was cancelled. The
	// outcome is UNCERTAIN.
	ErrCanceled = errors.New("xfer: transfer canceled")
)
