package handoff

import "fmt"

// This file holds the core's decisions about the end of a transfer, on
// both sides, and about a failed cleanup: the driver (engine/server, the
// simulator) reports what it knows as plain data, the core applies its own
// transition and returns what to do, and the driver only carries it out
// (ARCHITECTURE.md "The core": events in, actions out). The same broken
// decisions that the conformance mutants and the simulator's mutants make
// are switches here (Mutants), so one broken decision runs in both.

// Mutants switches the core's decisions to a deliberately broken one, each
// breaking one rule. The zero value is the contract's engine. The real
// engine's test hooks (engine/server Hooks) and the simulator's mutants
// (sim.Mutant) set these switches; neither writes the broken decision
// itself.
type Mutants struct {
	// ReleaseOnUncertain releases the receive buffers of a transfer whose
	// outcome is uncertain (a deadline, UNAVAILABLE, a lost reply) as if
	// the producer had rejected it before writing, instead of quarantining
	// them (breaks Q-1; conformance q1-release-on-any-error, sim
	// consumer-frees-on-transfer-error). A plain INVALID_ARGUMENT is left
	// to the Q-2 decision (PlainInvalidArgumentDefinite), so the two
	// mutants break one rule each.
	ReleaseOnUncertain bool
	// PlainInvalidArgumentDefinite takes a non-OK INVALID_ARGUMENT without
	// the before-write trailer for a definite rejection (breaks Q-2;
	// conformance q2-plain-invalid-argument-is-definite, sim
	// plain-invalid-argument-definite).
	PlainInvalidArgumentDefinite bool
	// RefusedConnectionUncertain counts a call whose connection was
	// refused or never established (nothing sent) as uncertain, with no
	// proof that could ever end the quarantine (breaks Q-2 and SE-4;
	// conformance q2-refused-connection-uncertain, no sim counterpart:
	// the simulator sends no request over a refused connection).
	RefusedConnectionUncertain bool
	// FreeSourceOnTransferFailure frees a transfer's source after a failure
	// past the claim instead of quarantining it while the WRITE may still
	// read it (breaks Q-3; conformance q3-free-source-on-failure, sim
	// producer-frees-source-on-failure).
	FreeSourceOnTransferFailure bool
	// InvalidArgumentAfterRemoval answers INVALID_ARGUMENT (no trailer)
	// for a transfer that failed after the entry left the table (breaks
	// Q-3; conformance q3-invalid-argument-after-removal, sim
	// invalid-argument-after-removal).
	InvalidArgumentAfterRemoval bool
	// FreeOnCancel releases the buffers of a receive whose client cancelled
	// while its transfer is in flight, without waiting for the outcome
	// (breaks C-4; conformance c4-free-on-cancel, sim free-on-cancel).
	FreeOnCancel bool
	// CancelCancelsTransfer lets a client's cancellation cancel the
	// consumer's TransferEncoderCache call (CancelReachesCall answers
	// true): the call's outcome is then uncertain and the consumer
	// quarantines, so a client that abandons its transfers takes the
	// consumer out of READY (breaks SE-4, and C-4's wait for the outcome;
	// conformance se4-cancel-cancels-transfer, sim cancel-cancels-transfer).
	CancelCancelsTransfer bool
	// SwallowCleanupFailure forgets a failed cleanup: Health stays READY
	// and new handoffs are admitted (breaks X-1; conformance
	// x1-cleanup-failure-swallowed, sim cleanup-failure-swallowed).
	SwallowCleanupFailure bool
	// NeverEndQuarantine keeps every quarantine for the life of the
	// process even once the backend proved that nothing can touch its
	// memory any more (breaks Q-6; conformance q6-quarantine-never-ends,
	// sim quarantine-never-ends): EndsOnProof answers false.
	NeverEndQuarantine bool
	// KeepCarrierOpen keeps the control connections that may have carried
	// a transfer with an uncertain outcome open and in use instead of
	// retiring them (ReceiveDecision.RetireCarriers is false), so a
	// quarantine whose proof needs them closed lasts for as long as the
	// producer lives and keeps them healthy (breaks Q-6; conformance
	// q6-keep-carrier-open, sim keep-carrier-open).
	KeepCarrierOpen bool

	// The switches below break the consumer's admission of a reference
	// (AdmitConsume, ReadOpaqueState), the producer's answers (Shutdown,
	// Abort(encoder_cache)) and its collector (Collect).

	// NoReferenceLimit puts no bound on a consumed reference's opaque
	// state and reads an oversize one leniently, as a JSON decoder does,
	// skipping the whitespace around it (breaks L-1; conformance
	// l1-no-reference-limit, sim no-reference-limit).
	NoReferenceLimit bool
	// RejectedReferenceClaims claims the entry a rejected reference names
	// (a malformed one, SU-4, or one whose tag does not verify, SU-5) and
	// throws it away, so the valid reference it imitates is spent (breaks
	// SU-4; conformance su4-malformed-consumes, sim
	// rejected-reference-claims). ConsumeAdmission.Discard carries it out.
	RejectedReferenceClaims bool
	// UnsignedReferences skips the SU-5 tag check of a shared-directory
	// reference, so a forged one consumes the entry it names (breaks SU-5;
	// conformance su5-unsigned-references, sim unsigned-references).
	UnsignedReferences bool
	// AnyBackend accepts a reference for any backend (breaks N-1;
	// conformance n1-any-backend, sim any-backend).
	AnyBackend bool
	// ShutdownIgnoresID accepts any non-empty expected_instance_id as this
	// instance's (breaks S-1; conformance s1-shutdown-ignores-id, sim
	// shutdown-ignores-id).
	ShutdownIgnoresID bool
	// ReleaseAlwaysAborted answers Abort(encoder_cache) ABORTED every time,
	// also for an entry already consumed, released or expired (breaks
	// SU-3; conformance su3-release-always-aborted, sim
	// release-always-aborted).
	ReleaseAlwaysAborted bool
	// NoExpiryCollection makes the producer's collector expire nothing
	// (ProducerTable.Collect): entries past their TTL stay (breaks X-2;
	// conformance x2-no-expiry-collection, sim no-expiry-collection).
	// Abort(encoder_cache) still finds them expired (ExpireBeforeRelease).
	NoExpiryCollection bool
	// RoleUnchecked serves a request its role does not serve instead of
	// rejecting it with FAILED_PRECONDITION (AdmitRole; breaks L-4;
	// conformance l4-role-unchecked, sim role-unchecked).
	RoleUnchecked bool
	// EntryIDFromContent derives a publish's entry id from its content
	// instead of 128 random bits (EntryID), so a second publish of the
	// same media collides with the first entry (breaks SU-6; conformance
	// su6-entry-id-from-content, sim entry-id-from-content).
	EntryIDFromContent bool
	// KeepReservationOnEncoderFailure keeps the reserved bytes and table
	// entry of a publish whose encoder step failed (no AbandonPublish;
	// ProducerTable.EncoderFailed; breaks C-6; conformance
	// c6-encoder-failure-keeps-reservation, sim
	// encoder-failure-keeps-reservation).
	KeepReservationOnEncoderFailure bool
	// VideoAsImage serves video and audio items as images instead of
	// rejecting them with UNIMPLEMENTED (AdmitModality; breaks L-3;
	// conformance l3-video-as-image, sim video-as-image).
	VideoAsImage bool
	// DrainBeforeCleanup ends the producer's drain once nothing is
	// published or being published, with the removals it started still
	// running (ProducerTable.DrainDone; breaks S-2; conformance
	// s2-shutdown-before-cleanup, sim shutdown-before-cleanup).
	DrainBeforeCleanup bool

	// The switches below break the end of a publish (DecidePublishStep,
	// DecideReadySent): whether a cancelled publish is abandoned (C-1) or
	// written, and whether an entry whose EncoderReady never reached its
	// client is released (C-7) or kept.

	// ReviveLateCompletion ignores the cancellation of a publish whose
	// encoder step was pending: the step's late completion is written,
	// committed and answered on the stream nobody listens to (breaks C-2;
	// conformance c2-late-completion-revives, sim late-completion-revives).
	ReviveLateCompletion bool
	// KeepOutputAfterCancel ignores the cancellation of a publish once its
	// encoder output is ready: the entry is written, and kept when its
	// EncoderReady cannot reach the client (cancelled, or the send failed)
	// instead of released (breaks C-3, C-7 on the stream; conformance
	// c3-keep-output-after-cancel, sim keep-output-after-cancel).
	KeepOutputAfterCancel bool
}

// BufferAction is what the driver does with memory a transfer used.
type BufferAction int

// Buffer actions.
const (
	// ReleaseBuffers: the outcome is known and nothing can write (or read)
	// the memory any more: deregister and free it (a failure there is X-1).
	ReleaseBuffers BufferAction = iota + 1
	// QuarantineBuffers: a write may still land: keep the memory,
	// never free or reuse it; revoke its registration and end the
	// quarantine only once the backend proves no write can land,
	// or never when ReceiveDecision.NoProof.
	QuarantineBuffers
)

var bufferActionNames = map[BufferAction]string{ReleaseBuffers: "release-buffers", QuarantineBuffers: "quarantine-buffers"}

func (a BufferAction) String() string {
	if n, ok := bufferActionNames[a]; ok {
		return n
	}
	return fmt.Sprintf("BufferAction(%d)", int(a))
}

// ConsumerReply is what the consumer answers its client after a receive
// ended.
type ConsumerReply int

// Consumer replies.
const (
	// ReplyData: the data arrived; use it and answer from it.
	ReplyData ConsumerReply = iota + 1
	// ReplyRefusal: relay the producer's definite rejection with the rule it
	// named (SU-2, SU-4, SU-5, H-3, SE-3, L-4, ...; UNAVAILABLE for a
	// producer draining or NOT_READY); the consumer stays READY.
	ReplyRefusal
	// ReplyUnreachable: the producer could not be asked (nothing sent):
	// UNAVAILABLE, retryable, ErrPeerUnreachable; the consumer stays READY.
	ReplyUnreachable
	// ReplyUncertain: UNAVAILABLE with ErrTransferUncertain.
	ReplyUncertain
	// ReplyFailed: the receive failed after the producer answered OK, and
	// nothing touches the buffers any more (UNAVAILABLE; no quarantine).
	ReplyFailed
	// ReplyCancelled: the client cancelled (only the FreeOnCancel mutant
	// ends a receive on it).
	ReplyCancelled
)

var consumerReplyNames = map[ConsumerReply]string{ReplyData: "data", ReplyRefusal: "refusal", ReplyUnreachable: "unreachable", ReplyUncertain: "uncertain", ReplyFailed: "failed", ReplyCancelled: "cancelled"}

func (r ConsumerReply) String() string {
	if n, ok := consumerReplyNames[r]; ok {
		return n
	}
	return fmt.Sprintf("ConsumerReply(%d)", int(r))
}

// HealthChange is a change of Health the driver applies: Health.Fail(Check,
// Reason), then tells its watchers (SE-5).
type HealthChange struct {
	Check  string
	Reason string
}

// TransferEnded is the consumer's event for a TransferEncoderCache call
// that returned (or whose deadline passed). The status is given as plain
// fields, so the core needs no gRPC.
type TransferEnded struct {
	// ReceiveID is the receive (in REQUESTED, or earlier if nothing was sent).
	ReceiveID string
	// StatusOK: the call answered OK.
	StatusOK bool
	// Complete: with StatusOK, the reply accounts for every byte of the
	// receive (bytes_written equals the receive's payload bytes).
	Complete bool
	// BeforeWrite: a non-OK status carrying the trailer
	// `baton-transfer-rejected: before-write`.
	BeforeWrite bool
	// InvalidArgument: the status code is INVALID_ARGUMENT. The contract
	// reads only BeforeWrite; the PlainInvalidArgumentDefinite mutant reads it.
	InvalidArgument bool
	// Unsent: the connection to the producer's control address was refused
	// or never established, so the request was never sent.
	Unsent bool
	// Reason is the Health reason recorded if the receive is quarantined
	// e.g. "Q-1 receive <id> quarantined: deadline passed".
	Reason string
}

// ReceiveDecision is the core's decision for the end of a receive. The
// driver carries it out in this order: Buffers (quarantine BEFORE
// replying), Health, then Reply.
type ReceiveDecision struct {
	// Outcome is the state the receive ended in: ReceiveSucceeded,
	// ReceiveRejected or ReceiveUncertain (already applied to the table).
	Outcome ReceiveState
	// Buffers says whether to release or quarantine the receive buffers.
	Buffers BufferAction
	// NoProof: with QuarantineBuffers, nothing can ever prove the
	// quarantine over; it lasts for the life of the process.
	NoProof bool
	// RetireCarriers: with QuarantineBuffers, the consumer retires the
	// control connections that may have carried the request (its
	// producer client): nothing new goes over them and they close with
	// their last use, which is the part of the Q-6 proof that is the
	// consumer's own to bring about; a live producer keeps an idle healthy
	// connection open for ever. A transport whose proof needs no
	// connection closed (cuda_ipc's loan) has nothing to retire. False
	// only under the KeepCarrierOpen mutant.
	RetireCarriers bool
	// Health is the change to apply (nil: none): NOT_READY on check
	// CheckQuarantine while buffers are quarantined.
	Health *HealthChange
	// Reply is the answer to the consumer's client.
	Reply ConsumerReply
	// Rule is the rule that decided: "Q-1", "Q-2", "Q-6", "C-4" (the
	// FreeOnCancel mutant) or "" (success).
	Rule string
}

// decideTransferEnded is the pure decision behind EndTransfer.
func decideTransferEnded(ev TransferEnded, m Mutants) ReceiveDecision {
	switch {
	case ev.StatusOK && ev.Complete:
		return ReceiveDecision{Outcome: ReceiveSucceeded, Buffers: ReleaseBuffers, Reply: ReplyData}
	case !ev.StatusOK && (ev.BeforeWrite || (m.PlainInvalidArgumentDefinite && ev.InvalidArgument)):
		return ReceiveDecision{Outcome: ReceiveRejected, Buffers: ReleaseBuffers, Reply: ReplyRefusal, Rule: "Q-2"}
	case !ev.StatusOK && ev.Unsent && !m.RefusedConnectionUncertain:
		return ReceiveDecision{Outcome: ReceiveRejected, Buffers: ReleaseBuffers, Reply: ReplyUnreachable, Rule: "Q-2"}
	case m.ReleaseOnUncertain && !ev.InvalidArgument:
		return ReceiveDecision{Outcome: ReceiveRejected, Buffers: ReleaseBuffers, Reply: ReplyRefusal, Rule: "Q-1"}
	}
	return ReceiveDecision{Outcome: ReceiveUncertain, Buffers: QuarantineBuffers,
		NoProof:        ev.Unsent, // only the RefusedConnectionUncertain mutant gets here with Unsent
		RetireCarriers: !m.KeepCarrierOpen,
		Health:         &HealthChange{Check: CheckQuarantine, Reason: ev.Reason}, Reply: ReplyUncertain, Rule: "Q-1"}
}

// EndTransfer decides how a receive whose TransferEncoderCache call ended
// ends, and applies it (Succeeded, Rejected or Uncertain):
//
//   - OK and complete: SUCCEEDED, release the buffers, use the data;
//   - a definite pre-write rejection (a non-OK status with the
//     before-write trailer, Q-2): REJECTED, release, relay the refusal;
//   - nothing sent (the connection refused or never established, Q-2):
//     REJECTED, release, UNAVAILABLE (ErrPeerUnreachable), stay READY;
//   - anything else, an OK reply short of bytes included:
//     UNCERTAIN, quarantine the buffers until Q-6 ends it, retire the
//     control connections that may have carried the request (the part of
//     the Q-6 proof the consumer brings about itself), Health NOT_READY
//     UNAVAILABLE (ErrTransferUncertain).
//
// A receive that was never REQUESTED sent nothing: an uncertain outcome
// ends it REJECTED and releases its buffers. The Mutants switches replace
// these decisions by broken ones. Error: the receive is not in flight (a
// driver bug); the decision is returned all the same.
func (c *ConsumerReceives) EndTransfer(ev TransferEnded, m Mutants) (ReceiveDecision, error) {
	return c.apply(ev.ReceiveID, decideTransferEnded(ev, m))
}

// ClientCancelled decides what a consumer does when the client of a
// receive whose transfer is in flight cancels (CONTRACT C-4): nothing; the
// receive keeps its buffers and waits (bounded by its own deadline) for
// the transfer's outcome, so ended is false and the table is unchanged.
// Under the FreeOnCancel mutant it ends the receive REJECTED at once:
// ended is true and d says to release the buffers and answer
// ReplyCancelled. Error (the mutant's path only): the receive is not in
// flight; the correct path looks at nothing and cannot fail.
func (c *ConsumerReceives) ClientCancelled(id string, m Mutants) (d ReceiveDecision, ended bool, err error) {
	if !m.FreeOnCancel {
		return ReceiveDecision{}, false, nil
	}
	d, err = c.apply(id, ReceiveDecision{Outcome: ReceiveRejected, Buffers: ReleaseBuffers, Reply: ReplyCancelled, Rule: "C-4"})
	return d, true, err
}

// CancelReachesCall decides whether a client's cancellation of a consume
// reaches the consumer's TransferEncoderCache call for it (CONTRACT C-4,
// SE-4: never; the consumer's call runs on a context of its own, bounded
// by its own deadline, and the consumer waits for the outcome). The
// FreeOnCancel and CancelCancelsTransfer mutants answer true: the call is
// cancelled with the client, its outcome is uncertain, and EndTransfer
// then decides as for any uncertain outcome (Q-1: quarantine).
func CancelReachesCall(m Mutants) bool { return m.FreeOnCancel || m.CancelCancelsTransfer }

// CopyEnded is the consumer's event for a receive that ends on its own
// side after the producer answered OK: a cuda_ipc receive, whose producer
// lends its memory and never writes the consumer's, ends once the
// consumer's own copy ended.
type CopyEnded struct {
	// ReceiveID is the receive (REQUESTED).
	ReceiveID string
	// OK: the data is in the receive buffer.
	OK bool
	// Quiesced: with !OK, nothing touches the buffer any more (nothing was
	// mapped or copied, or the device synchronized after the failed copy,
	// False: a copy may still run into it.
	Quiesced bool
	// Reason is the Health reason recorded if the buffer is quarantined.
	Reason string
}

// EndCopy decides how a receive whose own copy ended ends, and applies it:
// OK: SUCCEEDED, release, use the data; a failure with nothing touching the
// buffer any more: REJECTED, release, ReplyFailed (no quarantine, Q-6); a
// failure with a copy perhaps still running: UNCERTAIN, quarantine for the
// life of the process (no proof can come, Q-1, Q-6), Health NOT_READY
// ReplyUncertain. Error: the receive is not in flight.
func (c *ConsumerReceives) EndCopy(ev CopyEnded) (ReceiveDecision, error) {
	d := ReceiveDecision{Outcome: ReceiveSucceeded, Buffers: ReleaseBuffers, Reply: ReplyData}
	switch {
	case ev.OK:
	case ev.Quiesced:
		d = ReceiveDecision{Outcome: ReceiveRejected, Buffers: ReleaseBuffers, Reply: ReplyFailed, Rule: "Q-6"}
	default:
		d = ReceiveDecision{Outcome: ReceiveUncertain, Buffers: QuarantineBuffers, NoProof: true,
			Health: &HealthChange{Check: CheckQuarantine, Reason: ev.Reason}, Reply: ReplyUncertain, Rule: "Q-1"}
	}
	return c.apply(ev.ReceiveID, d)
}

// apply ends receive id as d says; an uncertain end of a receive that
// sent nothing becomes REJECTED with its buffers released (finish).
func (c *ConsumerReceives) apply(id string, d ReceiveDecision) (ReceiveDecision, error) {
	var err error
	switch d.Outcome {
	case ReceiveSucceeded:
		err = c.Succeeded(id)
	case ReceiveRejected:
		err = c.Rejected(id)
	case ReceiveUncertain:
		err = c.Uncertain(id)
		if err == nil && !c.Quarantined(id) {
			d.Outcome, d.Buffers, d.NoProof, d.RetireCarriers, d.Health = ReceiveRejected, ReleaseBuffers, false, false, nil
		}
	}
	if err != nil {
		return d, fmt.Errorf("handoff: end of receive %s (%s): %w", id, d.Buffers, err)
	}
	return d, nil
}

// SourceAction is what the producer does with a transfer's source after the
// transfer failed past the claim.
type SourceAction int

// Source actions.
const (
	// SourceNone: the driver holds no source (its storage was missing).
	SourceNone SourceAction = iota + 1
	// FreeSource: nothing reads the source any more: free it.
	FreeSource
	// QuarantineSourceUntilWriteEnds: keep the source until the transport
	// reports the WRITE terminal and it was released, then free it.
	QuarantineSourceUntilWriteEnds
	// QuarantineSourceForever: keep the source for the life of the process:
	// nothing can prove it unread (Q-6, last sentence).
	QuarantineSourceForever
)

var sourceActionNames = map[SourceAction]string{SourceNone: "none", FreeSource: "free-source", QuarantineSourceUntilWriteEnds: "quarantine-source-until-write-ends", QuarantineSourceForever: "quarantine-source-forever"}

func (a SourceAction) String() string {
	if n, ok := sourceActionNames[a]; ok {
		return n
	}
	return fmt.Sprintf("SourceAction(%d)", int(a))
}

// TransferFailure is the producer's event for a transfer that failed after
// its entry left the table (ClaimForTransfer): the WRITE may have been
// posted and may have landed.
type TransferFailure struct {
	// EntryID is the entry (in transfer).
	EntryID string
	// HasSource: the driver holds the entry's source memory (false: its
	// storage was missing, nothing to free or keep).
	HasSource bool
	// WriteEnded: the WRITE request is terminal and was released (or was
	// never created): nothing reads the source any more, if the transport
	// can prove it (Provable).
	WriteEnded bool
	// Provable: the transport explains the failure and can prove the
	// WRITE's end (Q-6; the engine's xfer requests and the simulator's).
	// False for a failure it cannot explain (the baton.transfer_fail test
	// hook) or a backend without such proofs: the source is kept for the
	// life of the process.
	Provable bool
	// Reason is the Health reason recorded if the source is quarantined.
	Reason string
}

// TransferFailedDecision is the core's decision for a transfer that failed
// after the claim. The driver carries it out in this order: Source
// (quarantine BEFORE replying), Health, then the answer (Code, Rule).
type TransferFailedDecision struct {
	// Source says what to do with the source memory.
	Source SourceAction
	// Health is the change to apply (nil: none): NOT_READY on check
	// CheckQuarantine while the source may still be read, until
	// the WRITE is proved ended (QuarantineSourceUntilWriteEnds) or for
	// the life of the process (QuarantineSourceForever).
	Health *HealthChange
	// FreedEarly: the FreeSourceOnTransferFailure mutant freed a source
	// the WRITE may still read. Health is NOT_READY as for the quarantine
	// the contract would have made, and lasts as long (until the WRITE is
	// proved ended when the transport can prove it, else for the life of
	// the process); only the source decision is broken.
	FreedEarly bool
	// Code is the answer's gRPC code: CodeUnavailable, never
	// CodeInvalidArgument (the WRITE may have landed), and never with the
	// before-write trailer. Only InvalidArgumentAfterRemoval answers
	// CodeInvalidArgument.
	Code Code
	// Rule is "Q-3".
	Rule string
}

// decideTransferFailed is the pure decision behind FailTransfer.
func decideTransferFailed(ev TransferFailure, m Mutants) TransferFailedDecision {
	d := TransferFailedDecision{Source: SourceNone, Code: CodeUnavailable, Rule: "Q-3"}
	if m.InvalidArgumentAfterRemoval {
		d.Code = CodeInvalidArgument
	}
	switch {
	case !ev.HasSource:
		return d
	case ev.WriteEnded && ev.Provable:
		d.Source = FreeSource
		return d
	case ev.Provable:
		d.Source = QuarantineSourceUntilWriteEnds
	default:
		d.Source = QuarantineSourceForever
	}
	// The source may still be read: NOT_READY until the WRITE is proved
	// ended. The mutant breaks the source decision alone.
	d.Health = &HealthChange{Check: CheckQuarantine, Reason: ev.Reason}
	if m.FreeSourceOnTransferFailure {
		d.Source, d.FreedEarly = FreeSource, true
	}
	return d
}

// FailTransfer decides what a producer does after a transfer failed past
// the claim (CONTRACT Q-3), and applies TransferFailed (the table counts the
// entry Quarantined whatever happens to its source): the source is freed
// only when the WRITE has ended and the transport can prove it;
// otherwise it is quarantined until the WRITE ends, or for the life of the
// process when nothing can prove it; a quarantine turns Health NOT_READY
// the answer is UNAVAILABLE with rule Q-3, never INVALID_ARGUMENT.
// The Mutants switches replace these decisions by broken ones. Error: the
// entry is not in transfer (a driver bug); the decision is returned all
// the same.
func (t *ProducerTable) FailTransfer(ev TransferFailure, m Mutants) (TransferFailedDecision, error) {
	d := decideTransferFailed(ev, m)
	if err := t.TransferFailed(ev.EntryID); err != nil {
		return d, fmt.Errorf("handoff: Q-3 failed transfer of %s: %w", ev.EntryID, err)
	}
	return d, nil
}

// CleanupFailed decides a failed cleanup (a release, removal or
// deregistration that errored, CONTRACT X-1) and applies it: Health
// NOT_READY on check CheckCleanup with reason (the first reason is kept),
// sticky until restart, so every later handoff is refused with UNAVAILABLE
// (Admit, ErrCleanupFailed). It reports whether the failure was recorded:
// false only under the SwallowCleanupFailure mutant, which forgets it (the
// driver then only logs it).
func (h *Health) CleanupFailed(reason string, m Mutants) (recorded bool) {
	if m.SwallowCleanupFailure {
		return false
	}
	h.Fail(CheckCleanup, reason)
	return true
}

// BeforeWrite decides whether a producer's rejection of
// TransferEncoderCache, made before it claimed the entry, is a definite
// pre-write rejection that carries the trailer
// `baton-transfer-rejected: before-write` (CONTRACT Q-2), so that the
// consumer may release its buffers: every INVALID_ARGUMENT (SU-2, SU-4,
// SU-5, H-3, L-1, a malformed request), SE-3 and L-4 (FAILED_PRECONDITION),
// and UNAVAILABLE for S-2, X-1 and Q-4. Anything else (an unexpected
// error) carries no trailer, so the consumer treats the outcome as
// uncertain. Never call it for a failure after the claim (FailTransfer).
func BeforeWrite(err error) bool {
	rule, code := Classify(err)
	switch {
	case code == CodeInvalidArgument, rule == "SE-3", rule == "L-4":
		return true
	case code == CodeUnavailable && (rule == "S-2" || rule == "X-1" || rule == "Q-4"):
		return true
	}
	return false
}

// EndsOnProof decides whether a quarantine ends once the backend proved
// that nothing can touch its memory any more (CONTRACT Q-6: on the
// consumer, its registration revoked and the revocation done, every
// connection that carried the transfer closed; on the producer, its WRITE
// request terminal and released): true, so the driver ends it in its
// table (ConsumerReceives.EndQuarantine; the producer's source), frees the
// memory and calls Health.QuarantineEnded. False only under the
// NeverEndQuarantine mutant, which keeps it for the life of the process.
// A quarantine with no proof to wait for (ReceiveDecision.NoProof,
// QuarantineSourceForever) never gets here.
func EndsOnProof(m Mutants) bool { return !m.NeverEndQuarantine }

// QuarantineEnded decides Health once a quarantine of this side ended on
// its proof (CONTRACT ), left being the quarantines of this side
// still held (every kind: receive buffers, sources, KV READ buffers): with
// none left the encoder_cache check recovers, so Health is READY again
// unless something else holds it NOT_READY (X-1 lasts until restart);
// otherwise it stays NOT_READY. It reports whether the check recovered.
func (h *Health) QuarantineEnded(left int) (recovered bool) {
	if left > 0 {
		return false
	}
	h.Recover(CheckQuarantine)
	return true
}
