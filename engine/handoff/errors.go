package handoff

import (
	"errors"
	"fmt"
)

// Code is a gRPC status code number. The core imports only the standard library,
// so it carries the numbers themselves; they equal google.golang.org/grpc/codes
// values one for one (OK=0 ... UNAVAILABLE=14), and engine/server converts with
// codes.Code(c).
type Code uint32

// The gRPC codes the contract uses (CONTRACT section 3).
const (
	CodeOK                 Code = 0
	CodeCancelled          Code = 1
	CodeInvalidArgument    Code = 3
	CodeDeadlineExceeded   Code = 4
	CodeResourceExhausted  Code = 8
	CodeFailedPrecondition Code = 9
	CodeAborted            Code = 10
	CodeUnimplemented      Code = 12
	CodeInternal           Code = 13
	CodeUnavailable        Code = 14
)

// Sentinel errors for every expected rejection. Each maps to exactly one rule
// ID and gRPC code in the table below (CONTRACT section 3); wrap them with %w
// to add detail and recover the rule with Classify.
var (
	// ErrWrongRole: a request sent to a role that does not serve it (L-4), FAILED_PRECONDITION.
	ErrWrongRole = errors.New("handoff: request not served by this role")
	// ErrMediaRejected: media over a bound, undecodable or a decompression bomb (L-6), INVALID_ARGUMENT.
	ErrMediaRejected = errors.New("handoff: media rejected")
	// ErrURLDisabled: a `url` media source while fetching is disabled (L-6), UNIMPLEMENTED.
	ErrURLDisabled = errors.New("handoff: url media sources are not fetched")
	// ErrModalityUnsupported: a video or audio item (L-3), UNIMPLEMENTED.
	ErrModalityUnsupported = errors.New("handoff: modality not supported")
	// ErrTooLarge: a reference's opaque state over 64 KiB or a decode preparation over 2 MiB (L-1), INVALID_ARGUMENT.
	ErrTooLarge = errors.New("handoff: over the size limit")
	// ErrMalformedReference: a reference that does not parse, has the wrong types,
	// nests too deep or does not verify (SU-4), INVALID_ARGUMENT.
	ErrMalformedReference = errors.New("handoff: malformed reference")
	// ErrForeignReference: a reference that addresses something outside the
	// producer's own cache: another instance, a path, a forged tag (SU-5), INVALID_ARGUMENT.
	ErrForeignReference = errors.New("handoff: reference outside the producer's cache")
	// ErrMalformedHash: a content hash that is not 64 lowercase hex digits (H-3), INVALID_ARGUMENT.
	ErrMalformedHash = errors.New("handoff: malformed content hash")
	// ErrBackendNotAccepted: a reference for a backend this consumer does not accept (N-1), FAILED_PRECONDITION.
	ErrBackendNotAccepted = errors.New("handoff: backend not accepted")
	// ErrUntrustedPeer: a reference, a KV session or a transfer request that
	// names an endpoint outside the engine's configured peers (trusted
	// producers on a consumer, trusted consumer agents on a producer):
	// refused before any connection is made (SE-3), FAILED_PRECONDITION.
	ErrUntrustedPeer = errors.New("handoff: endpoint is not a configured peer")
	// ErrSpentReference: a reference already consumed, released or expired (SU-2), INVALID_ARGUMENT.
	ErrSpentReference = errors.New("handoff: reference already spent")
	// ErrQuotaExceeded: the producer's published bytes or the consumer's in-flight
	// receive bytes would pass their bound (L-5), RESOURCE_EXHAUSTED (retryable).
	ErrQuotaExceeded = errors.New("handoff: byte quota exceeded")
	// ErrStorageFull: the producer's storage is out of space (ENOSPC while
	// writing an entry): the publish is refused whole, nothing is
	// published, and the engine stays READY (L-5: a bound on what the
	// producer holds), RESOURCE_EXHAUSTED (retryable).
	ErrStorageFull = errors.New("handoff: storage full")
	// ErrPeerUnreachable: the connection to the producer's control address
	// was refused or never established, so no request was sent: a
	// definite outcome, the buffers are released, the consumer stays
	// READY, UNAVAILABLE (retryable).
	ErrPeerUnreachable = errors.New("handoff: producer unreachable; nothing was sent")
	// ErrTransferUncertain: a transfer whose outcome this consumer cannot
	// know (the request may have reached the producer): its buffers are
	// quarantined until Q-6 ends it, UNAVAILABLE.
	ErrTransferUncertain = errors.New("handoff: transfer outcome uncertain")
	// ErrQuarantined: this side holds quarantined buffers and refuses new handoffs, UNAVAILABLE.
	ErrQuarantined = errors.New("handoff: buffers quarantined")
	// ErrCleanupFailed: an earlier release or deregistration failed, UNAVAILABLE.
	ErrCleanupFailed = errors.New("handoff: cleanup failed")
	// ErrDraining: shutdown has started (S-2), UNAVAILABLE.
	ErrDraining = errors.New("handoff: draining")
	// ErrShutdownIDMissing: Shutdown with an empty expected_instance_id (S-1), INVALID_ARGUMENT.
	ErrShutdownIDMissing = errors.New("handoff: expected_instance_id is empty")
	// ErrShutdownIDMismatch: Shutdown naming another instance (S-1), FAILED_PRECONDITION.
	ErrShutdownIDMismatch = errors.New("handoff: expected_instance_id names another instance")
	// ErrBadRequest: any other malformed field of a request, INVALID_ARGUMENT
	// (rule "L-4" is not claimed: the rule is the one given at the wrap site or "").
	ErrBadRequest = errors.New("handoff: invalid request")
)

// classification is one row of the rejection table.
type classification struct {
	err  error
	rule string
	code Code
}

// rejections is THE table mapping expected rejections to rule IDs and gRPC
// codes (ARCHITECTURE.md: one table). Order matters only for errors that wrap
// several sentinels: the first match wins.
var rejections = []classification{
	{ErrWrongRole, "L-4", CodeFailedPrecondition},
	{ErrURLDisabled, "L-6", CodeUnimplemented},
	{ErrMediaRejected, "L-6", CodeInvalidArgument},
	{ErrModalityUnsupported, "L-3", CodeUnimplemented},
	{ErrTooLarge, "L-1", CodeInvalidArgument},
	{ErrMalformedHash, "H-3", CodeInvalidArgument},
	{ErrForeignReference, "SU-5", CodeInvalidArgument},
	{ErrMalformedReference, "SU-4", CodeInvalidArgument},
	{ErrBackendNotAccepted, "N-1", CodeFailedPrecondition},
	{ErrUntrustedPeer, "SE-3", CodeFailedPrecondition},
	{ErrSpentReference, "SU-2", CodeInvalidArgument},
	{ErrQuotaExceeded, "L-5", CodeResourceExhausted},
	{ErrStorageFull, "L-5", CodeResourceExhausted},
	{ErrPeerUnreachable, "Q-2", CodeUnavailable},
	{ErrTransferUncertain, "Q-1", CodeUnavailable},
	{ErrQuarantined, "Q-4", CodeUnavailable},
	{ErrCleanupFailed, "X-1", CodeUnavailable},
	{ErrDraining, "S-2", CodeUnavailable},
	{ErrShutdownIDMissing, "S-1", CodeInvalidArgument},
	{ErrShutdownIDMismatch, "S-1", CodeFailedPrecondition},
	{ErrBadRequest, "", CodeInvalidArgument},
}

// Classify returns the rule ID and gRPC code of an expected rejection, or
// ("", CodeInternal) for an error that is not one (a bug or an I/O failure).
func Classify(err error) (rule string, code Code) {
	if err == nil {
		return "", CodeOK
	}
	for _, c := range rejections {
		if errors.Is(err, c.err) {
			return c.rule, c.code
		}
	}
	return "", CodeInternal
}

// Precedence is the order in which rules decide the code when several reject
// the same request (CONTRACT "How requests look, and which code wins"):
// the health refusals first (S-2 draining, X-1, Q-4), then the request's
// own checks. The server runs its checks in exactly this order.
var Precedence = []string{"S-2", "X-1", "Q-4", "L-4", "L-6", "L-1", "SU-4", "H-3", "N-1", "SE-3", "SU-5", "SU-2", "L-5"}

// rejectf wraps a sentinel with detail: the error reads "<sentinel>:
// <detail>" and unwraps to the sentinel, as fmt.Errorf("%w: %s") would,
// in two allocations instead of about five (the simulator's nodes refuse
// millions of requests).
func rejectf(sentinel error, format string, args ...any) error {
	var buf [128]byte
	b := append(buf[:0], sentinel.Error()...)
	b = append(b, ": "...)
	b = fmt.Appendf(b, format, args...)
	return &rejection{sentinel: sentinel, msg: string(b)}
}

// rejectD is rejectf with its detail already built (by strconv, not fmt:
// the rejections with numbers the simulator's nodes make often, Q-4 and
// L-5), in one allocation.
func rejectD(sentinel error, detail []byte) error {
	var buf [192]byte
	b := append(buf[:0], sentinel.Error()...)
	b = append(b, ": "...)
	b = append(b, detail...)
	return &rejection{sentinel: sentinel, msg: string(b)}
}

// rejectS is rejectf(sentinel, before+"%s"+after, s) in one allocation:
// the message is built when asked for (Error), as fs.PathError's is. With
// short, s reads as shortID(s). For the rejections the simulator's nodes
// make most (health, spent references, busy ids), whose messages it reads
// only when tracing.
func rejectS(sentinel error, before, s, after string, short bool) error {
	return &strRejection{sentinel: sentinel, before: before, s: s, after: after, short: short}
}

// strRejection is rejectS's error.
type strRejection struct {
	sentinel         error
	before, s, after string
	short            bool
}

func (r *strRejection) Error() string {
	s := r.s
	if r.short {
		s = shortID(s)
	}
	return r.sentinel.Error() + ": " + r.before + s + r.after
}
func (r *strRejection) Unwrap() error { return r.sentinel }

// rejection is rejectf's error.
type rejection struct {
	sentinel error
	msg      string
}

func (r *rejection) Error() string { return r.msg }
func (r *rejection) Unwrap() error { return r.sentinel }
