package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/xfer"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
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
// any refusal of the claim are definite pre-write rejections: returned as
// INVALID_ARGUMENT with the before-write trailer. The tcp and
// cuda_ipc producers share it.
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
// rejection up to the claim is INVALID_ARGUMENT with the before-write trailer
// the entry leaves the table BEFORE the WRITE is posted, and a failure
// after that point quarantines the source and is never INVALID_ARGUMENT.
func (e *Engine) transferEncoderCache(ctx context.Context, req *pb.TransferEncoderCacheRequest) (*pb.TransferEncoderCacheResponse, error) {
	if s, ok := e.store.(*ipcStore); ok && e.cfg.Role == RoleEncoder {
		return e.lendIPC(ctx, s, req) // cuda_ipc (cudaipc.go)
	}
	store, ok := e.store.(*memoryStore)
	if e.cfg.Role != RoleEncoder || !ok {
		return nil, fmt.Errorf("%w: N-1 this engine does not serve TransferEncoderCache (role %s, backend %s)", handoff.ErrWrongRole, e.cfg.Role, e.cfg.Backend)
	}
	ref, remote, peer, err := e.checkTransfer(req)
	if err := e.claimForTransfer(ctx, ref, err); err != nil {
		return nil, err
	}
	// ---- the entry is out of the table: from here a failure quarantines (Q-3) ----
	entry, ok := store.take(ref.EntryID)
	if !ok {
		return nil, e.failTransfer(ref.EntryID, nil, errors.New("entry storage missing"))
	}
	written, err := e.writeTo(ctx, store, entry, peer, remote)
	if err != nil {
		return nil, e.failTransfer(ref.EntryID, entry, err)
	}
	e.mu.Lock()
	_ = e.table.TransferDone(ref.EntryID)
	e.mu.Unlock()
	if err := store.free(entry); err != nil {
		e.failCleanup("deregister source of "+ref.EntryID, err)
	}
	e.log.Info("transferred", "entry", ref.EntryID, "bytes", written, "peer", peer)
	resp := &pb.TransferEncoderCacheResponse{BytesWritten: written}
	for _, it := range ref.Items {
		resp.Items = append(resp.Items, &pb.EncodedItem{ContentHash: it.ContentHash, EmbeddingRows: it.Rows, Modality: pb.Modality_MODALITY_IMAGE})
	}
	return resp, nil
}

// checkTransfer validates everything that can be checked before the claim.
func (e *Engine) checkTransfer(req *pb.TransferEncoderCacheRequest) (handoff.Reference, []xfer.Descriptor, string, error) {
	wire := req.GetRef()
	ref, err := handoff.ParseReference(wire.GetBackend(), wire.GetProducerInstanceId(), wire.GetOpaqueState(), 0)
	if err != nil {
		return ref, nil, "", err
	}
	if ref.Backend != BackendTCP {
		return ref, nil, "", fmt.Errorf("%w: SU-4 reference for backend %.40q sent to TransferEncoderCache", handoff.ErrMalformedReference, ref.Backend)
	}
	if ref.ProducerInstanceID != e.instanceID {
		return ref, nil, "", fmt.Errorf("%w: SU-5 reference names producer %s, this is %s", handoff.ErrForeignReference, ref.ProducerInstanceID, e.instanceID)
	}
	if err := ref.Verify(e.store.key()); err != nil {
		return ref, nil, "", err
	}
	if ref.Expired(e.now().UnixMilli()) {
		e.expire()
		return ref, nil, "", fmt.Errorf("%w: SU-2 reference %s expired", handoff.ErrSpentReference, short(ref.EntryID))
	}
	targets := req.GetTargets()
	if len(targets) != len(ref.Items) {
		return ref, nil, "", fmt.Errorf("%w: %d target regions for %d items", handoff.ErrBadRequest, len(targets), len(ref.Items))
	}
	remote := make([]xfer.Descriptor, len(targets))
	for i, t := range targets {
		if uint64(ref.Items[i].PayloadBytes()) != t.GetLength() {
			return ref, nil, "", fmt.Errorf("%w: target %d is %d bytes, item needs %d", handoff.ErrBadRequest, i, t.GetLength(), ref.Items[i].PayloadBytes())
		}
		if t.GetMemoryKind() != string(xfer.MemoryHost) {
			return ref, nil, "", fmt.Errorf("%w: target %d memory kind %.20q (this producer writes host memory)", handoff.ErrBadRequest, i, t.GetMemoryKind())
		}
		remote[i] = xfer.Descriptor{Address: t.GetAddress(), Length: t.GetLength(), DeviceID: t.GetDeviceId(), MemoryKind: xfer.MemoryHost, RemoteKey: t.GetRemoteKey()}
	}
	peer, err := e.agent.LoadRemoteMetadata(req.GetConsumerAgent())
	if err != nil {
		return ref, nil, "", fmt.Errorf("%w: consumer_agent: %v", handoff.ErrBadRequest, err)
	}
	return ref, remote, peer, nil
}

// beforeWrite answers a definite pre-write rejection: INVALID_ARGUMENT with
// the trailer. Other codes (a wrong role) carry no trailer.
func beforeWrite(ctx context.Context, err error) error {
	if _, code := handoff.Classify(err); code == handoff.CodeInvalidArgument {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(TrailerTransferRejected, TrailerBeforeWrite))
	}
	return err
}

// writeTo posts the WRITE and waits for its outcome on the producer's own
// deadline, not the caller's: a consumer that gave up must not turn a
// landing write into a freed source. No lock is held.
func (e *Engine) writeTo(ctx context.Context, store *memoryStore, entry *memoryEntry, peer string, remote []xfer.Descriptor) (uint64, error) {
	if e.cfg.TestHooks && len(metadata.ValueFromIncomingContext(ctx, HookTransferFail)) > 0 {
		return 0, errors.New("test hook " + HookTransferFail + ": WRITE failed after the entry left the table")
	}
	xreq, err := e.agent.CreateWrite(entry.reg.Descriptors, peer, remote)
	if err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.TransferTimeout)
	defer cancel()
	st, err := e.agent.Post(xreq)
	if err == nil && st == xfer.StatusInProgress {
		st, err = xfer.Wait(wctx, e.agent, xreq)
	}
	if rerr := e.agent.Release(xreq); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, d := range remote {
		n += d.Length
	}
	return n, nil
}

// failTransfer quarantines a transfer's source after the entry left the table
// and answers UNAVAILABLE: the WRITE may have landed, so this is never
// INVALID_ARGUMENT.
func (e *Engine) failTransfer(id string, entry *memoryEntry, cause error) error {
	e.mu.Lock()
	_ = e.table.TransferFailed(id)
	e.health.Fail(handoff.CheckQuarantine, fmt.Sprintf("Q-3 source of entry %s quarantined after a failed WRITE: %v", short(id), cause))
	e.mu.Unlock()
	if entry != nil {
		store := e.store.(*memoryStore)
		if e.cfg.Hooks.FreeSourceOnTransferFailure {
			if err := store.free(entry); err != nil { // the Q-3 source mutant
				e.failCleanup("deregister source of "+id, err)
			}
		} else {
			store.quarantine(entry)
		}
	}
	e.log.Error("Q-3 transfer failed after removal; source quarantined", "entry", id, "err", cause)
	err := status.Errorf(codes.Unavailable, "Q-3 transfer of entry %s failed after it left the table; its source is quarantined: %v", short(id), cause)
	if e.cfg.Hooks.ProducerTransferFailure != nil {
		return e.cfg.Hooks.ProducerTransferFailure(err)
	}
	return err
}

// HookTransferFail is a test hook (honoured only with TestHooks): gRPC
// metadata on TransferEncoderCache that makes the producer's WRITE fail after
// the entry left the table (CONTRACT Q-3). A consumer forwards it when its
// Generate carries extra["baton.transfer_fail"] = true.
const HookTransferFail = "baton-test-transfer-fail"

// ---- consumer side ----

// producerClients caches Control clients per producer endpoint.
type producerClients struct {
	creds credentials.TransportCredentials // TLS when the engine dials peers over TLS (SE-1); nil: plaintext
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func (p *producerClients) get(addr string) (pb.ControlClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return pb.NewControlClient(c), nil
	}
	creds := p.creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, err
	}
	if p.conns == nil {
		p.conns = map[string]*grpc.ClientConn{}
	}
	p.conns[addr] = c
	return pb.NewControlClient(c), nil
}

func (p *producerClients) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// producerAddress checks the producer endpoint a reference names: only
// loopback addresses are dialled, so no request can make the consumer reach
// an arbitrary host (the spirit of L-6 for media URLs).
func producerAddress(ep *pb.KvEndpoint) (string, error) {
	ip := net.ParseIP(ep.GetHost())
	if ep.GetHost() == "localhost" {
		ip = net.IPv4(127, 0, 0, 1)
	}
	if ip == nil || !ip.IsLoopback() || ep.GetPort() == 0 || ep.GetPort() > 65535 {
		return "", fmt.Errorf("%w: SU-5 producer endpoint %.60q:%d is not a loopback address this consumer may dial", handoff.ErrForeignReference, ep.GetHost(), ep.GetPort())
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(ep.GetPort()))), nil
}

// callTransfer asks the producer for one transfer: it marks the receive
// registered and requested, then calls TransferEncoderCache with no lock
// held (Q-5; the Q-5 mutant holds it) on a context of its own that the
// client's cancellation does not end, bounded by Config.TransferTimeout
// (C-4: the consumer waits for the outcome). definite reports a failure
// that is a definite pre-write rejection (Q-2: INVALID_ARGUMENT with the
// before-write trailer); abandoned, that the C-4 mutant gave up on the
// client's cancellation without knowing the outcome. The tcp and cuda_ipc
// receives share it.
func (e *Engine) callTransfer(ctx context.Context, client pb.ControlClient, receiveID string, req *pb.TransferEncoderCacheRequest, forwardFailHook bool) transferCall {
	e.mu.Lock()
	_ = e.receives.Registered(receiveID)
	_ = e.receives.Requested(receiveID)
	hold := e.cfg.Hooks.HoldLockAcrossTransfer
	if !hold {
		e.mu.Unlock()
	}
	callCtx := context.WithoutCancel(ctx)
	if ctx.Err() == nil && e.cfg.Hooks.ReleaseOnCancel {
		callCtx = ctx
	}
	callCtx, cancel := context.WithTimeout(callCtx, e.cfg.TransferTimeout)
	defer cancel()
	if forwardFailHook {
		callCtx = metadata.AppendToOutgoingContext(callCtx, HookTransferFail, "1")
	}
	callCtx = OutgoingTraceContext(callCtx)
	var trailer metadata.MD
	resp, err := client.TransferEncoderCache(callCtx, req, grpc.Trailer(&trailer))
	if hold {
		e.mu.Unlock()
	}
	if e.cfg.Hooks.ReleaseOnCancel && ctx.Err() != nil {
		return transferCall{resp: resp, err: err, abandoned: true}
	}
	decide := definiteRejection
	if e.cfg.Hooks.ConsumerTransferDefinite != nil {
		decide = e.cfg.Hooks.ConsumerTransferDefinite
	}
	return transferCall{resp: resp, err: err, definite: err != nil && decide(err, trailer)}
}

// transferCall is the outcome of callTransfer.
type transferCall struct {
	resp      *pb.TransferEncoderCacheResponse
	err       error
	definite  bool // a definite pre-write rejection
	abandoned bool // the C-4 mutant gave up on the client's cancellation
}

// transferReceive receives a tcp entry: register buffers, ask the producer
// to WRITE into them without holding a lock, then release on success
// or definite rejection and quarantine on anything else. A
// consumer whose client cancels keeps waiting (bounded) for the outcome (C-4).
func (e *Engine) transferReceive(ctx context.Context, receiveID string, ref handoff.Reference, wire *pb.EncoderCacheRef, forwardFailHook bool) ([]lm.Image, error) {
	addr, err := producerAddress(wire.GetProducerEndpoint())
	if err != nil {
		return nil, err
	}
	client, err := e.producers.get(addr)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	err = e.receives.Preflight(receiveID, ref.PayloadBytes())
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	bufs := make([][]byte, len(ref.Items))
	for i, it := range ref.Items {
		bufs[i] = make([]byte, it.PayloadBytes())
	}
	reg, err := e.agent.RegisterMemory(bufs)
	if err != nil {
		e.mu.Lock()
		_ = e.receives.Rejected(receiveID)
		e.mu.Unlock()
		return nil, fmt.Errorf("server: register receive buffers: %w", err)
	}
	md, err := e.agent.LocalMetadata()
	if err != nil {
		e.endReceive(receiveID, reg, false)
		return nil, err
	}
	req := &pb.TransferEncoderCacheRequest{Ref: wire, TransferId: receiveID, ConsumerAgent: md}
	for _, d := range reg.Descriptors {
		req.Targets = append(req.Targets, &pb.MemoryRegion{Address: d.Address, Length: d.Length, DeviceId: d.DeviceID, MemoryKind: string(d.MemoryKind), RemoteKey: d.RemoteKey})
	}
	call := e.callTransfer(ctx, client, receiveID, req, forwardFailHook)
	resp, err := call.resp, call.err
	if call.abandoned {
		e.endReceive(receiveID, reg, false) // the C-4 mutant: frees without knowing the outcome
		return nil, ctx.Err()
	}
	switch {
	case err == nil && resp.GetBytesWritten() == uint64(ref.PayloadBytes()):
		e.endReceive(receiveID, reg, true)
	case call.definite:
		e.endReceive(receiveID, reg, false)
		st := status.Convert(err)
		return nil, fmt.Errorf("%w: Q-2 the producer rejected the transfer before writing: %s", handoff.ErrSpentReference, st.Message())
	default:
		if err == nil {
			err = fmt.Errorf("producer reports %d bytes written, want %d", resp.GetBytesWritten(), ref.PayloadBytes())
		}
		e.quarantineReceive(receiveID, reg, bufs, err)
		return nil, fmt.Errorf("%w: Q-1 transfer outcome uncertain (%v); its buffers are quarantined", handoff.ErrQuarantined, status.Convert(err).Message())
	}
	images := make([]lm.Image, len(ref.Items))
	for i, it := range ref.Items {
		images[i] = lm.Image{ContentHash: it.ContentHash, Rows: int(it.Rows), Cols: int(it.Cols), Data: float32s(bufs[i])}
	}
	return images, nil
}

// definiteRejection is the Q-2 decision: only INVALID_ARGUMENT with the
// before-write trailer lets the consumer release its buffers.
func definiteRejection(err error, trailer metadata.MD) bool {
	if status.Code(err) != codes.InvalidArgument {
		return false
	}
	for _, v := range trailer.Get(TrailerTransferRejected) {
		if v == TrailerBeforeWrite {
			return true
		}
	}
	return false
}

// endReceive ends a receive whose outcome is known and deregisters its
// buffers; a deregistration failure is a cleanup failure.
func (e *Engine) endReceive(receiveID string, reg *xfer.Registration, ok bool) {
	e.mu.Lock()
	if ok {
		_ = e.receives.Succeeded(receiveID)
	} else {
		_ = e.receives.Rejected(receiveID)
	}
	e.mu.Unlock()
	if err := e.agent.Deregister(reg); err != nil {
		e.failCleanup("deregister receive buffers", err)
	}
}

// quarantineReceive keeps a receive's buffers registered and referenced for
// the life of the process and turns health NOT_READY.
func (e *Engine) quarantineReceive(receiveID string, reg *xfer.Registration, bufs [][]byte, cause error) {
	e.mu.Lock()
	_ = e.receives.Uncertain(receiveID)
	e.quarantined = append(e.quarantined, quarantinedBuffers{reg: reg, bufs: bufs})
	e.health.Fail(handoff.CheckQuarantine, fmt.Sprintf("Q-1 receive %s quarantined: transfer outcome uncertain: %v", receiveID, cause))
	e.mu.Unlock()
	e.log.Error("Q-1 transfer outcome uncertain; receive buffers quarantined", "receive", receiveID, "err", cause)
}

// quarantinedBuffers are receive buffers a late WRITE may still land in.
type quarantinedBuffers struct {
	reg  *xfer.Registration
	bufs [][]byte
}

// float32s reads little-endian float32s.
func float32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return out
}
