package server

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/baton-dev/baton/engine/cache/cudaipc"
	"github.com/baton-dev/baton/engine/cache/memory"
	"github.com/baton-dev/baton/engine/consumer"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/xfer"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TrailerTransferRejected is the trailer that marks a definite pre-write
// rejection of TransferEncoderCache (CONTRACT Q-2, WIRE.md).
const (
	TrailerTransferRejected = "baton-transfer-rejected"
	TrailerBeforeWrite      = "before-write"
)

// ---- producer side ----

// claimForTransfer takes a checked reference's entry out of the table
// (SU-1) for a transfer. checkErr is the reference check's error; it and
// any refusal of the claim are definite pre-write rejections, answered
// with the before-write trailer. The tcp and cuda_ipc producers
// share it.
func (e *Engine) claimForTransfer(ctx context.Context, ref handoff.Reference, checkErr error) error {
	if checkErr != nil {
		return beforeWrite(ctx, checkErr)
	}
	e.mu.Lock()
	err := e.table.ClaimForTransfer(ref.EntryID)
	e.mu.Unlock()
	if err != nil {
		return beforeWrite(ctx, err)
	}
	return nil
}

// transferEncoderCache serves TransferEncoderCache on the producer: every
// rejection up to the claim (health, SU-4, H-3, SE-3, SU-5, SU-2) carries
// the before-write trailer; the entry leaves the table BEFORE the
// WRITE is posted, and a failure after that point quarantines the source
// until the WRITE has ended and is never INVALID_ARGUMENT.
func (e *Engine) transferEncoderCache(ctx context.Context, req *pb.TransferEncoderCacheRequest) (*pb.TransferEncoderCacheResponse, error) {
	if s, ok := e.store.(*cudaipc.Store); ok && e.cfg.Role == RoleEncoder {
		return e.lendIPC(ctx, s, req) // cuda_ipc (cudaipc.go)
	}
	store, ok := e.store.(*memory.Store)
	if e.cfg.Role != RoleEncoder || !ok {
		// Rejected before anything is looked at, so nothing was claimed
		// or written: a definite rejection, with the trailer, or a
		// consumer whose forged reference names this engine would
		// quarantine (attack A5). The health refusals come first
		// (CONTRACT precedence), then L-4.
		if err := e.admitHandoff(); err != nil {
			return nil, beforeWrite(ctx, err)
		}
		return nil, beforeWrite(ctx, fmt.Errorf("%w: L-4 this engine does not serve TransferEncoderCache (role %s, backend %s)", handoff.ErrWrongRole, e.cfg.Role, e.cfg.Backend))
	}
	ref, remote, agent, err := e.checkTransfer(req)
	if err := e.claimForTransfer(ctx, ref, err); err != nil {
		return nil, err
	}
	// ---- the entry is out of the table: from here a failure quarantines (Q-3) ----
	entry, ok := store.Take(ref.EntryID)
	if !ok {
		return nil, e.failTransfer(ref.EntryID, nil, nil, errors.New("entry storage missing"))
	}
	written, pending, err := e.writeTo(ctx, entry, agent, remote)
	if err != nil {
		return nil, e.failTransfer(ref.EntryID, entry, pending, err)
	}
	e.producerDriver().Done(ref.EntryID, entry)
	e.log.Info("transferred", "entry", ref.EntryID, "bytes", written, "peer", agent.name)
	resp := &pb.TransferEncoderCacheResponse{BytesWritten: written}
	for _, it := range ref.Items {
		resp.Items = append(resp.Items, &pb.EncodedItem{ContentHash: it.ContentHash, EmbeddingRows: it.Rows, Modality: pb.Modality_MODALITY_IMAGE})
	}
	return resp, nil
}

// consumerAgent is the consumer agent one TransferEncoderCache names
// (consumer_agent), checked, for that call alone.
type consumerAgent struct {
	md   []byte // the metadata as sent: the WRITE is created from it (xfer CreateWriteTo)
	name string // the agent's name, for logs
	// loaded is the name under which the SharedAgentTable mutant loaded md
	// into the agent's shared table ("" in the contract's engine).
	loaded string
}

// checkTransfer validates everything that can be checked before the claim,
// in the contract's order, which handoff.AdmitTransfer decides: health
// (S-2, X-1, Q-4), L-1, SU-4, H-3, the consumer agent (malformed or
// non-canonical metadata: INVALID_ARGUMENT; SE-3: a trusted agent, before
// any connection), SU-5, SU-2 (expired), the targets. It loads nothing into
// the transfer agent: the WRITE is created from this call's own
// consumer_agent after the claim (writeTo), so a spent or refused reference
// leaves nothing behind (the attack run's A3) and no call can redirect
// another's WRITE (A4).
func (e *Engine) checkTransfer(req *pb.TransferEncoderCacheRequest) (handoff.Reference, []xfer.Descriptor, consumerAgent, error) {
	var none consumerAgent
	wire := req.GetRef()
	var md xfer.PeerMetadata
	var remote []xfer.Descriptor
	ref, err := handoff.AdmitTransfer(handoff.TransferAdmission{
		Health:      e.admitHandoff,
		OpaqueBytes: len(wire.GetOpaqueState()),
		Parse: func() (handoff.Reference, error) {
			return handoff.ParseReference(wire.GetBackend(), wire.GetProducerInstanceId(), endpointOf(wire.GetProducerEndpoint()), wire.GetOpaqueState(), 0)
		},
		Serves: []string{BackendTCP},
		Agent: func() error {
			// Malformed metadata, a non-canonical address included (a port
			// with leading zeros, xfer.CanonicalAddress), is a malformed
			// request (INVALID_ARGUMENT, before-write): it names no endpoint
			// at all, so it is not SE-3's untrusted endpoint, and malformed
			// input comes first.
			var err error
			md, err = xfer.ParseMetadata(req.GetConsumerAgent())
			if err != nil || md.Backend != xfer.BackendTCP {
				return fmt.Errorf("%w: consumer_agent is not tcp transfer-agent metadata: %v", handoff.ErrBadRequest, err)
			}
			trusted := func(a string) error { _, err := e.trustedConsumers.address("consumer agent", a); return err }
			if e.cfg.Hooks.TrustConsumerAgent != nil {
				trusted = e.cfg.Hooks.TrustConsumerAgent
			}
			return trusted(md.Address) // SE-3: before any connection
		},
		Self:      e.instanceID,
		Verify:    func(ref handoff.Reference) error { return ref.Verify(e.store.Key()) },
		NowUnixMs: e.now().UnixMilli(),
		Targets: func(ref handoff.Reference) error {
			var err error
			remote, err = transferTargets(req.GetTargets(), ref)
			return err
		},
	})
	if err != nil {
		if errors.Is(err, handoff.ErrSpentReference) {
			e.expire()
		}
		return ref, nil, none, err
	}
	agent := consumerAgent{md: req.GetConsumerAgent(), name: md.Name}
	if e.cfg.Hooks.SharedAgentTable {
		// The A4 mutant: the engine before the fix, which loaded every
		// consumer_agent into the agent's table by name, before the claim.
		if agent.loaded, err = e.agent.LoadRemoteMetadata(agent.md); err != nil {
			return ref, nil, none, fmt.Errorf("%w: consumer_agent: %v", handoff.ErrBadRequest, err)
		}
	}
	return ref, remote, agent, nil
}

// transferTargets checks a call's target regions against its reference:
// one per item, of the item's size, host memory, and everything
// CreateWriteTo checks, before the claim: a bad one is a definite
// pre-write rejection.
func transferTargets(targets []*pb.MemoryRegion, ref handoff.Reference) ([]xfer.Descriptor, error) {
	if len(targets) != len(ref.Items) {
		return nil, fmt.Errorf("%w: %d target regions for %d items", handoff.ErrBadRequest, len(targets), len(ref.Items))
	}
	remote := make([]xfer.Descriptor, len(targets))
	for i, t := range targets {
		if uint64(ref.Items[i].PayloadBytes()) != t.GetLength() {
			return nil, fmt.Errorf("%w: target %d is %d bytes, item needs %d", handoff.ErrBadRequest, i, t.GetLength(), ref.Items[i].PayloadBytes())
		}
		if t.GetMemoryKind() != string(xfer.MemoryHost) {
			return nil, fmt.Errorf("%w: target %d memory kind %.20q (this producer writes host memory)", handoff.ErrBadRequest, i, t.GetMemoryKind())
		}
		remote[i] = xfer.Descriptor{Address: t.GetAddress(), Length: t.GetLength(), DeviceID: t.GetDeviceId(), MemoryKind: xfer.MemoryHost, RemoteKey: t.GetRemoteKey()}
	}
	if err := xfer.CheckRemote(remote); err != nil {
		return nil, fmt.Errorf("%w: targets: %v", handoff.ErrBadRequest, err)
	}
	return remote, nil
}

// beforeWrite answers a rejection made before the claim, with the trailer
// `baton-transfer-rejected: before-write` when handoff.BeforeWrite decides
// it is a definite pre-write rejection: INVALID_ARGUMENT (SU-2,
// SU-4, SU-5, H-3, L-1, a malformed request), FAILED_PRECONDITION (SE-3;
// L-4, an engine that does not serve TransferEncoderCache) and
// UNAVAILABLE (draining, X-1, Q-4). Anything else (an unexpected error)
// carries no trailer: the consumer then treats the outcome as uncertain.
func beforeWrite(ctx context.Context, err error) error {
	if handoff.BeforeWrite(err) {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(TrailerTransferRejected, TrailerBeforeWrite))
	}
	return err
}

// writeTo writes entry's source to the consumer agent this call's own
// consumer_agent describes (engine/producer: Driver.Write, on the
// producer's own deadline, no lock held: Q-5), unless the
// baton.transfer_fail test hook makes it fail first.
func (e *Engine) writeTo(ctx context.Context, entry *memory.Entry, agent consumerAgent, remote []xfer.Descriptor) (uint64, *xfer.Request, error) {
	if e.cfg.TestHooks && len(metadata.ValueFromIncomingContext(ctx, HookTransferFail)) > 0 {
		return 0, nil, errHookTransferFail
	}
	return e.producerDriver().Write(ctx, entry, agent.md, agent.loaded, remote, e.cfg.TransferTimeout)
}

// errHookTransferFail is the failure the baton.transfer_fail test hook
// injects: a WRITE that failed after the entry left the table in a way
// the transport cannot explain, so nothing proves the source unread and
// it stays quarantined for the life of the process (CONTRACT Q-6, last
// sentence; the Q-3 case needs a source quarantine it can see).
var errHookTransferFail = errors.New("test hook " + HookTransferFail + ": WRITE failed after the entry left the table; the transport cannot prove it ended")

// failTransfer answers a transfer that failed after the entry left the
// table with UNAVAILABLE, never INVALID_ARGUMENT (the WRITE may have
// landed), once engine/producer carried out what handoff.FailTransfer
// decides for its source (Driver.Fail: freed, or quarantined until the
// transport proves nothing reads it, Q-6; for the life of the process for
// a failure the transport cannot explain, the test hook).
func (e *Engine) failTransfer(id string, entry *memory.Entry, pending *xfer.Request, cause error) error {
	d := e.producerDriver().Fail(handoff.TransferFailure{
		EntryID:    id,
		HasSource:  entry != nil,
		WriteEnded: pending == nil,
		Provable:   !errors.Is(cause, errHookTransferFail),
		Reason:     consumer.QuarantineReason("Q-3", "source of entry "+short(id), cause),
	}, entry, pending, cause)
	return e.afterClaim(id, d, "", cause)
}

// afterClaim is the producer's answer to a transfer (tcp WRITE, cuda_ipc
// lend) that failed after the entry left the table, once engine/producer
// carried out d (handoff.FailTransfer): UNAVAILABLE (errAfterClaim, Q-3;
// note follows the message's "left the table"), never INVALID_ARGUMENT
// (the WRITE may have landed, the loan may be mapped), except under the
// Q-3 answer mutant (d.Code INVALID_ARGUMENT, without the trailer). The
// Hooks.ProducerTransferFailure mutant rewrites it.
func (e *Engine) afterClaim(id string, d handoff.TransferFailedDecision, note string, cause error) error {
	var err error
	if d.Code == handoff.CodeInvalidArgument {
		// Decisions.InvalidArgumentAfterRemoval (the Q-3 answer mutant):
		// INVALID_ARGUMENT without the trailer.
		err = status.Error(codes.InvalidArgument, "entry not available")
	} else {
		err = e.status(fmt.Errorf("%w: Q-3 transfer of entry %s failed after it left the table%s: %v", errAfterClaim, short(id), note, cause))
	}
	if e.cfg.Hooks.ProducerTransferFailure != nil {
		return e.cfg.Hooks.ProducerTransferFailure(err)
	}
	return err
}

// errAfterClaim: a transfer failed after the entry left the producer's
// table: UNAVAILABLE, never INVALID_ARGUMENT.
var errAfterClaim = errors.New("server: transfer failed after the claim")

// HookTransferFail is a test hook (honoured only with TestHooks): gRPC
// metadata on TransferEncoderCache that makes the producer's WRITE fail after
// the entry left the table (CONTRACT Q-3). A consumer forwards it when its
// Generate carries extra["baton.transfer_fail"] = true.
const HookTransferFail = "baton-test-transfer-fail"

// ---- consumer side ----

// producerEndpoint checks the producer endpoint a transfer reference names
// against the trusted producers (SE-3) and returns the address to dial;
// ErrUntrustedPeer before any connection otherwise.
func (e *Engine) producerEndpoint(ep *pb.KvEndpoint) (string, error) {
	return e.trustedProducers.endpoint("producer endpoint", ep.GetHost(), ep.GetPort())
}

// callTransfer asks the producer for one transfer: it marks the receive
// registered and requested, then calls TransferEncoderCache with no lock
// held (Q-5; the Q-5 mutant holds it) on a context of its own that the
// client's cancellation does not end, bounded by Config.TransferTimeout
// (C-4: the consumer waits for the outcome). The tcp and cuda_ipc
// receives share it.
func (e *Engine) callTransfer(ctx context.Context, pc *producerConn, receiveID string, req *pb.TransferEncoderCacheRequest, forwardFailHook bool) transferCall {
	e.mu.Lock()
	terr := e.receives.Registered(receiveID)
	if terr == nil {
		terr = e.receives.Requested(receiveID)
	}
	e.coreRefused("Registered, Requested "+receiveID, terr)
	hold := e.cfg.Hooks.HoldLockAcrossTransfer
	if !hold {
		e.mu.Unlock()
	}
	decisions := e.decisions()
	callCtx := context.WithoutCancel(ctx)
	if ctx.Err() == nil && handoff.CancelReachesCall(decisions) {
		callCtx = ctx // the C-4 and SE-4 mutants: the client's cancellation reaches the call
	}
	callCtx, cancel := context.WithTimeout(callCtx, e.cfg.TransferTimeout)
	defer cancel()
	if forwardFailHook {
		callCtx = metadata.AppendToOutgoingContext(callCtx, HookTransferFail, "1")
	}
	callCtx = OutgoingTraceContext(callCtx)
	callCtx, headersOut := watchSend(callCtx)
	var trailer metadata.MD
	pc.fresh(callCtx)
	window := pc.begin()
	resp, err := pc.client().TransferEncoderCache(callCtx, req, grpc.Trailer(&trailer))
	carriers := window.carriers()
	// sent: the request's headers were queued on a ready transport (one
	// that read the server's preface), so it may have reached the
	// producer. A peer that wrote bytes but never a preface (garbage, a
	// trickle: attack F6) was sent nothing.
	sent := headersOut.Load()
	if hold {
		e.mu.Unlock()
	}
	call := transferCall{resp: resp, err: err, carriers: carriers}
	if ctx.Err() != nil {
		// The client cancelled: handoff decides (C-4: wait for the outcome;
		// the FreeOnCancel mutant ends the receive at once).
		e.mu.Lock()
		_, ended, terr := e.receives.ClientCancelled(receiveID, decisions)
		e.mu.Unlock()
		e.coreRefused("ClientCancelled "+receiveID, terr)
		if ended {
			call.abandoned = true
			return call
		}
	}
	if err == nil {
		return call
	}
	read := definiteRejection
	if e.cfg.Hooks.ConsumerTransferDefinite != nil {
		read = e.cfg.Hooks.ConsumerTransferDefinite
	}
	call.beforeWrite = read(err, trailer)
	call.invalidArgument = status.Code(err) == codes.InvalidArgument
	call.unsent = !call.beforeWrite && !sent
	if call.unsent {
		e.producers.retire(pc) // its connection failed: nothing redials the address (attack A6)
	}
	return call
}

// event is what the consumer knows of the call, for handoff.EndTransfer:
// complete says an OK reply accounts for every byte, reason is the Health
// reason of a quarantine.
func (c transferCall) event(receiveID string, complete bool, reason string) handoff.TransferEnded {
	return handoff.TransferEnded{ReceiveID: receiveID, StatusOK: c.err == nil, Complete: c.err == nil && complete,
		BeforeWrite: c.beforeWrite, InvalidArgument: c.invalidArgument, Unsent: c.unsent, Reason: reason}
}

// transferCall is the outcome of callTransfer.
type transferCall struct {
	resp *pb.TransferEncoderCacheResponse
	err  error
	// beforeWrite: a non-OK status with the before-write trailer.
	beforeWrite bool
	// invalidArgument: a non-OK status INVALID_ARGUMENT (read by the
	// core's Q-2 mutant only).
	invalidArgument bool
	// unsent: no connection to the producer was open or could be
	// established (none read a server preface: refused, silent, garbage,
	// a trickle), so the request was never sent (Q-2; sendWatch).
	unsent bool
	// abandoned: the core ended the receive on the client's cancellation
	// (handoff.ClientCancelled under the C-4 mutant): release the buffers.
	abandoned bool
	// carriers are closed once every control connection that may have
	// carried the request has closed (part of Q-6's proof).
	carriers []<-chan struct{}
}

// refusal is the consumer's answer to its client for a definite outcome
// of a transfer: the producer's rejection, with the rule it named
// (SU-2, SU-4, SU-5, H-3, SE-3, ...: handoff.ReplyRefusal), or a producer
// that could not be asked (UNAVAILABLE, retryable:
// handoff.ReplyUnreachable). Nothing was written; the consumer stays READY.
func (c transferCall) refusal(reply handoff.ConsumerReply) error {
	if reply == handoff.ReplyUnreachable {
		return fmt.Errorf("%w: Q-2 the connection to the producer was refused or never established: %s", handoff.ErrPeerUnreachable, status.Convert(c.err).Message())
	}
	st := status.Convert(c.err)
	msg := st.Message()
	rule := wrapSiteRule(msg)
	var sentinel error
	switch st.Code() {
	case codes.InvalidArgument:
		switch rule {
		case "SU-4":
			sentinel = handoff.ErrMalformedReference
		case "SU-5":
			sentinel = handoff.ErrForeignReference
		case "H-3":
			sentinel = handoff.ErrMalformedHash
		case "L-1":
			sentinel = handoff.ErrTooLarge
		case "SU-2":
			sentinel = handoff.ErrSpentReference
		default: // a request the producer found malformed, under no rule
			return fmt.Errorf("%w: the producer rejected the transfer before writing: %s", handoff.ErrBadRequest, msg)
		}
	case codes.FailedPrecondition:
		switch rule {
		case "N-1":
			sentinel = handoff.ErrBackendNotAccepted
		case "L-4": // the endpoint is no producer (a forged reference naming another role)
			sentinel = handoff.ErrWrongRole
		default:
			sentinel = handoff.ErrUntrustedPeer
		}
	default: // UNAVAILABLE while draining or NOT_READY, or anything else
		return fmt.Errorf("%w: Q-2 the producer refused the transfer before writing (%s): %s", handoff.ErrPeerUnreachable, st.Code(), msg)
	}
	return fmt.Errorf("%w: %s the producer rejected the transfer before writing (Q-2): %s", sentinel, rule, msg)
}

// transferReceive receives a tcp entry: register buffers, ask the producer
// to WRITE into them without holding a lock, then release on success
// or a definite outcome and quarantine on anything else until
// Q-6 ends it. A consumer whose client cancels keeps waiting (bounded) for
// the outcome (C-4). addr was checked against the trusted producers (SE-3).
// The buffers' life (register, release, quarantine on the core's
// decision) is engine/consumer's Driver; the call and the wire mapping
// (request, trailer, refusal codes) stay here.
func (e *Engine) transferReceive(ctx context.Context, receiveID string, ref handoff.Reference, wire *pb.EncoderCacheRef, addr string, forwardFailHook bool) ([]lm.Image, error) {
	pc, err := e.producers.get(addr)
	if err != nil {
		return nil, err
	}
	defer e.producers.put(pc)
	drv := e.tcpDriver()
	r, err := drv.BeginTCP(receiveID, ref.Items)
	if err != nil {
		return nil, err
	}
	md, err := e.agent.LocalMetadata()
	if err != nil {
		drv.Unsent(r)
		return nil, err
	}
	req := &pb.TransferEncoderCacheRequest{Ref: wire, TransferId: receiveID, ConsumerAgent: md}
	for _, d := range r.Reg.Descriptors {
		req.Targets = append(req.Targets, &pb.MemoryRegion{Address: d.Address, Length: d.Length, DeviceId: d.DeviceID, MemoryKind: string(d.MemoryKind), RemoteKey: d.RemoteKey})
	}
	if err := e.checkTransferRequest(req); err != nil {
		drv.Unsent(r) // nothing was sent: a definite outcome
		return nil, err
	}
	call := e.callTransfer(ctx, pc, receiveID, req, forwardFailHook)
	resp, err := call.resp, call.err
	if call.abandoned {
		drv.Release(r) // the C-4 mutant: freed without knowing the outcome
		return nil, ctx.Err()
	}
	complete := err == nil && resp.GetBytesWritten() == uint64(ref.PayloadBytes())
	if err == nil && !complete {
		err = fmt.Errorf("producer reports %d bytes written, want %d", resp.GetBytesWritten(), ref.PayloadBytes())
	}
	var reason string
	if !complete {
		reason = consumer.QuarantineReason("Q-1", "receive "+receiveID, fmt.Sprintf("transfer outcome uncertain: %v", err))
	}
	d := drv.EndTCP(r, call.event(receiveID, complete, reason), err, call.carriers) // handoff decides and engine/consumer carries it out
	if d.Buffers == handoff.QuarantineBuffers {
		carriers := call.carriers
		if d.NoProof {
			carriers = nil // the Q-2 mutant's uncertain outcome, which nothing can end
		}
		if d.RetireCarriers {
			e.producers.retire(pc) // closed with its last use: the carriers' closing is ours to bring about
		} else {
			e.producers.pin(pc, carriers) // the Q-6 mutant KeepCarrierOpen: only the producer or keepalive ends the quarantine
		}
	}
	switch d.Reply {
	case handoff.ReplyData:
	case handoff.ReplyRefusal, handoff.ReplyUnreachable:
		return nil, call.refusal(d.Reply)
	default:
		return nil, fmt.Errorf("%w: Q-1 transfer outcome uncertain (%v); its buffers are quarantined until nothing can write them", handoff.ErrTransferUncertain, status.Convert(err).Message())
	}
	images := make([]lm.Image, len(ref.Items))
	for i, it := range ref.Items {
		images[i] = lm.Image{ContentHash: it.ContentHash, Rows: int(it.Rows), Cols: int(it.Cols), Data: float32s(r.Bufs[i])}
	}
	return images, nil
}

// definiteRejection reads the Q-2 mark: whether a non-OK status carries
// the before-write trailer (handoff.TransferEnded.BeforeWrite); the core
// decides what follows (handoff.EndTransfer: a definite rejection, release
// the buffers).
func definiteRejection(err error, trailer metadata.MD) bool {
	if status.Code(err) == codes.OK {
		return false
	}
	for _, v := range trailer.Get(TrailerTransferRejected) {
		if v == TrailerBeforeWrite {
			return true
		}
	}
	return false
}

// tcpDriver is the consumer's tcp receive driver (engine/consumer) over
// this engine: its receives, its lock, its agent.
func (e *Engine) tcpDriver() *consumer.Driver {
	return &consumer.Driver{Receives: e.receives, Env: consumerEnv{e}, Agent: e.agent, Log: e.log}
}

// ipcDriver is the consumer's cuda_ipc receive driver (engine/consumer)
// over this engine: its receives, its lock, its device (ipcDevice).
func (e *Engine) ipcDriver(dev xfer.IPCDevice) *consumer.Driver {
	return &consumer.Driver{Receives: e.receives, Env: consumerEnv{e}, Device: dev, Log: e.log}
}

// consumerEnv is the engine as engine/consumer's driver sees it
// (consumer.Env): e.mu, X-1, the core-bug log, the quarantine entry, the
// core's decisions.
type consumerEnv struct{ e *Engine }

// Lock takes the engine's lock (Engine.mu); consumer.Env's sync.Locker.
func (c consumerEnv) Lock() { c.e.mu.Lock() }

// Unlock releases Engine.mu.
func (c consumerEnv) Unlock() { c.e.mu.Unlock() }

// FailCleanup records a cleanup failure: Health turns NOT_READY for good and
// later Generate calls get UNAVAILABLE (CONTRACT X-1). Call without the lock.
func (c consumerEnv) FailCleanup(what string, err error) { c.e.failCleanup(what, err) }

// CoreRefused logs a transition the handoff core refused (a bug of the driver);
// a nil err logs nothing.
func (c consumerEnv) CoreRefused(op string, err error) { c.e.coreRefused(op, err) }

// Decisions returns the core's mutant switches this engine runs with
// (Hooks.CoreDecisions; the zero value is the contract's core).
func (c consumerEnv) Decisions() handoff.Mutants { return c.e.decisions() }

// EnterQuarantine records q, turns Health NOT_READY (CONTRACT Q-4) and ends q
// once every proof channel is closed; with nil proofs it lasts for the
// life of the process. Call without the lock.
func (c consumerEnv) EnterQuarantine(q *consumer.Quarantine, proofs []<-chan struct{}) {
	c.e.enterQuarantine(q, proofs)
}

// float32s reads little-endian float32s.
func float32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return out
}

// checkTransferRequest is the consumer's bound on the request it sends
// (Config.MaxTransferRequestBytes): a request its producer might refuse
// at the transport, without the before-write trailer, would be an
// uncertain outcome and a quarantine caused by a client (attack
// A1, CONTRACT SE-4). Over the bound it is the client's error,
// ErrMalformedReference (SU-4, INVALID_ARGUMENT), before anything is sent.
func (e *Engine) checkTransferRequest(req *pb.TransferEncoderCacheRequest) error {
	if n := proto.Size(req); n > e.cfg.MaxTransferRequestBytes && !e.cfg.Hooks.UnboundedReferenceFields {
		return fmt.Errorf("%w: SU-4 the TransferEncoderCacheRequest this reference makes is %d bytes, over the %d bytes this consumer sends to a producer; nothing was sent", handoff.ErrMalformedReference, n, e.cfg.MaxTransferRequestBytes)
	}
	return nil
}

// DefaultMaxTransferRequestBytes is the default bound on the
// TransferEncoderCacheRequest a consumer sends (Config.MaxTransferRequestBytes):
// 1 MiB, which every conformant producer accepts (CONTRACT L-6: a
// receive limit of at least the media bound plus 1 MiB; gRPC's default
// is 4 MiB). A request of bounded fields (SU-4: handoff.ParseReference),
// an opaque state of at most 64 KiB (L-1) and at most 64 items is a few
// tens of KiB, far under it.
const DefaultMaxTransferRequestBytes = 1 << 20
