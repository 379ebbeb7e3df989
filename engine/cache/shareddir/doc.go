// Package shareddir is the I/O half of baton's shared-directory encoder-cache
// backend: a producer (encoder server) publishes each encoder output as a
// safetensors file in a directory shared with the consumers on the same host,
// and a consumer claims an entry itself by an atomic rename, reads it and
// deletes it (CONTRACT "How requests look", shared-directory paragraph).
//
// The decisions (the producer table, quotas, TTLs, the reference format and
// its HMAC) live in engine/handoff. This package only moves bytes: it writes,
// renames, reads and deletes files, and reports what happened with precise
// sentinel errors. It never reads the clock (times arrive as arguments in
// Unix milliseconds) and draws randomness only from the io.Reader it is given.
// All file access goes through the FS interface, so the simulator can hand it
// a simulated disk; OSFS is the real one.
//
// # Layout
//
//	<root>/                                   shared by all producers of the host; 0700 if baton creates it, else its mode is kept
//	<root>/<producerInstanceID>/              0700, one per producer instance (lowercase UUID)
//	    lock                                  0600, empty; flock(2)-held by the producer for its life
//	    hmac.key                              0600, 32 random bytes (the reference HMAC key)
//	    <entryID>.safetensors                 0600, a published entry (entryID: 32 lowercase hex)
//	    .tmp-<entryID>-<16 hex>               an entry being written (never claimable)
//	    .tmp-key-<16 hex>                     the key being written at OpenProducer
//	    .tmp-lock-<16 hex>                    the lock being created at OpenProducer (locked, then renamed to lock)
//	    .claimed-<entryID>-<16 hex>           an entry claimed by a consumer or released by the producer
//
// Every id is validated before any path is formed from it (ErrBadName, SU-5),
// so no input can name a file outside its producer's instance directory.
//
// # Dead producers
//
// A producer holds the flock of its lock file for its whole life, so the
// lock is free exactly when the process is gone. Dir.SweepDeadInstances
// (at start and periodically) removes every other instance directory whose
// lock it can take, and lock-less ones older than DeadInstanceGraceMs;
// never one whose lock is held (docs/implementing.md section 4.3).
//
// # Single use
//
// Both ways an entry can leave PUBLISHED begin with the same step, a rename of
// <entryID>.safetensors to a fresh .claimed- name: Claim (a consumer; the entry
// becomes CONSUMED) and Dir.Remove (the producer releasing or expiring it).
// rename(2) of one source succeeds for exactly one caller across all threads
// and processes; every other gets ENOENT. So exactly one of all concurrent
// Claims and Removes of an entry wins (SU-1), and a loser learns it: Claim
// returns ErrGone (SU-2), Remove returns removed=false (SU-3 ALREADY_FINISHED).
// The producer learns of a consumer's claim when it next looks (Dir.Exists,
// Dir.List) and feeds that to its table (handoff ObserveGone).
//
// # Errors and the gRPC codes the server maps them to
//
//	ErrGone            INVALID_ARGUMENT   SU-2  the entry is spent (consumed, released or expired)
//	ErrBadName         INVALID_ARGUMENT   SU-4/SU-5  an id that is not well formed
//	ErrUnknownProducer INVALID_ARGUMENT   SU-2/SU-5  no such producer instance on this host
//	ErrTooLarge        RESOURCE_EXHAUSTED L-5   the entry exceeds the consumer's receive bound
//	ErrBadSafetensors  INTERNAL                 a corrupt entry file or an unencodable tensor
//	ErrCleanup         NOT_READY / UNAVAILABLE X-1  a delete failed; Health must say NOT_READY
package shareddir
