package shareddir

import "errors"

// Sentinel errors. Every error this package returns for an expected rejection
// wraps exactly one of these with %w (plus detail), so callers test with
// errors.Is. A Claim may return ErrCleanup joined with ErrBadSafetensors; the
// server checks ErrCleanup first because it changes Health.
var (
	// ErrGone: the entry file is not there: it was consumed by another
	// consumer, released by the producer, or expired and collected. Returned
	// by Claim. The server answers INVALID_ARGUMENT before any byte is
	// written (CONTRACT SU-2); the consumer stays healthy.
	ErrGone = errors.New("shareddir: entry is spent (consumed, released or expired)")

	// ErrBadName: a producer instance id that is not a lowercase UUID
	// (8-4-4-4-12 hex) or an entry id that is not exactly 32 lowercase hex
	// digits (128 bits, SU-5). Checked before any file is touched, so no path
	// is ever formed from it. The server answers INVALID_ARGUMENT (SU-4,
	// SU-5); nothing is consumed or released.
	ErrBadName = errors.New("shareddir: malformed producer instance id or entry id")

	// ErrTooLarge: the entry file is larger than the consumer's maxBytes.
	// Checked on the open file before the claiming rename, so the entry is
	// NOT consumed. The server answers RESOURCE_EXHAUSTED (L-5, retryable).
	ErrTooLarge = errors.New("shareddir: entry exceeds the receive bound")

	// ErrUnknownProducer: the producer instance directory or its hmac.key is
	// missing (the producer never existed on this host, or shut down and
	// removed everything, S-4), or the key file is not a 0600 regular file of
	// 32 bytes. The server answers INVALID_ARGUMENT (a reference from a
	// producer that shut down is spent, SU-2; one that never existed cannot
	// address anything, SU-5).
	ErrUnknownProducer = errors.New("shareddir: unknown producer instance")

	// ErrBadSafetensors: bytes that are not a valid safetensors file as this
	// package defines it (see DecodeSafetensors), or tensors that cannot be
	// encoded. From Claim the entry is already spent (claimed and deleted)
	// and the server answers INTERNAL; the consumer stays healthy unless
	// ErrCleanup is joined with it.
	ErrBadSafetensors = errors.New("shareddir: malformed safetensors")

	// ErrCleanup: deleting a file failed with an error other than "not
	// found" (a claimed file, a released entry, an orphan, a temp file or the
	// instance directory at Close). Never swallowed (CONTRACT X-1): the
	// server marks Health NOT_READY with the reason and answers later
	// Generate requests UNAVAILABLE.
	ErrCleanup = errors.New("shareddir: cleanup failed")

	// ErrLocked: FS.TryLock found the lock held by another descriptor: the
	// producer instance that owns it is alive, so its directory is never
	// touched (SweepDeadInstances).
	ErrLocked = errors.New("shareddir: lock held by a live owner")
)
