package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/baton-dev/baton/engine/cache/cudaipc"
	"github.com/baton-dev/baton/engine/consumer"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/xfer"
	"github.com/baton-dev/baton/gpu/cuda"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// The cuda_ipc backend (engine/xfer/cuda_ipc.go says the protocol):
//
//	producer (E)                                   consumer (PD, P)
//	publish: upload the entry to one device allocation, export its handle
//	                                   <- TransferEncoderCache(ref, targets "cuda", IPCPeer)
//	checks (before-write rejections, Q-2); claim: the entry leaves the
//	table; lend: -> OK, tensor_layout = IPCLoan
//	                                      open the handle, copy device-to-device
//	                                      into its receive buffer, close the mapping
//	                                   <- Abort(encoder_cache = ref): the loan comes back
//	free the source; ALREADY_FINISHED (SU-3)
//
// A lent source is freed only when its loan comes back: never by a timer,
// since the consumer's process may still map it (CONTRACT Q-6; a loan
// whose consumer's process is gone cannot be told apart here: no driver
// call says who maps an allocation, so such a loan stays, and at the
// drain every loan still out stays quarantined). The consumer quarantines
// its receive buffer on an uncertain outcome of the call until the
// control connections that may have carried the request have closed (the
// producer never writes a consumer's memory; a loan its lost reply
// carried is given back at once), and, when a device-to-device copy
// fails, keeps the buffer and the mapping unless the device then
// synchronizes (nothing runs on it any more). The producer quarantines a
// source whose claim failed half-way. A side that quarantines
// reports Health NOT_READY (check encoder_cache) and refuses new handoffs
// until the quarantine ends.

// gpuState is the engine's CUDA device for the cuda_ipc backend, opened at
// start on the producer and on the first cuda_ipc receive on a consumer, so
// that a consumer that never received over cuda_ipc never initializes CUDA
// (S-3).
type gpuState struct {
	mu     sync.Mutex
	dev    xfer.IPCDevice
	opened bool
	// returns counts loans being given back in the background; the drain
	// waits for them before the S-3 collection.
	returns sync.WaitGroup

	checkMu sync.Mutex      // guards the Health check cache (gpu.go)
	check   *pb.HealthCheck // the last "gpu" check
	checkAt time.Time       // when it was read
}

// ipcDevice returns the engine's device, opening it on first use.
func (e *Engine) ipcDevice() (xfer.IPCDevice, error) {
	g := &e.gpu
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dev != nil {
		return g.dev, nil
	}
	if e.cfg.IPCDevice != nil {
		g.dev, g.opened = e.cfg.IPCDevice, true
		return g.dev, nil
	}
	_, ordinal, _ := ParseDevice(e.cfg.Device)
	dev, err := xfer.OpenCUDADevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("server: the cuda_ipc backend (--backend cuda_ipc, or cuda_ipc in --accept-backends) needs a GPU: %w", err)
	}
	g.dev, g.opened = dev, true
	return dev, nil
}

// ---- producer ----

// lendIPC serves TransferEncoderCache for cuda_ipc: every rejection up to
// the claim is INVALID_ARGUMENT with the before-write trailer; the
// entry leaves the table before it is lent, and a failure after that point
// quarantines the source and answers UNAVAILABLE, never INVALID_ARGUMENT
// . The response's tensor_layout is the xfer.IPCLoan; bytes_written
// is the bytes lent.
func (e *Engine) lendIPC(ctx context.Context, store *cudaipc.Store, req *pb.TransferEncoderCacheRequest) (*pb.TransferEncoderCacheResponse, error) {
	ref, err := e.checkIPCTransfer(req)
	if err := e.claimForTransfer(ctx, ref, err); err != nil {
		return nil, err
	}
	// ---- the entry is out of the table: from here a failure quarantines (Q-3) ----
	entry, ok := store.Take(ref.EntryID)
	if !ok {
		return nil, e.failIPCLend(store, ref.EntryID, nil, errors.New("entry storage missing"))
	}
	if e.cfg.TestHooks && len(metadata.ValueFromIncomingContext(ctx, HookTransferFail)) > 0 {
		return nil, e.failIPCLend(store, ref.EntryID, entry, errors.New("test hook "+HookTransferFail+": the loan failed after the entry left the table"))
	}
	store.Lend(ref.EntryID, entry, callerAddr(ctx))
	e.mu.Lock()
	terr := e.table.TransferDone(ref.EntryID)
	e.mu.Unlock()
	e.coreRefused("TransferDone "+ref.EntryID, terr)
	e.log.Info("lent", "entry", ref.EntryID, "bytes", entry.Loan.Bytes, "backend", BackendCUDAIPC)
	resp := &pb.TransferEncoderCacheResponse{BytesWritten: entry.Loan.Bytes, TensorLayout: entry.Loan.Marshal()}
	for _, it := range ref.Items {
		resp.Items = append(resp.Items, &pb.EncodedItem{ContentHash: it.ContentHash, EmbeddingRows: it.Rows, Modality: pb.Modality_MODALITY_IMAGE})
	}
	return resp, nil
}

// checkIPCTransfer validates everything that can be checked before the
// claim: the reference (SU-4, SU-5, SU-2), one "cuda" target per item of
// the item's length, and the consumer agent (an xfer.IPCPeer).
func (e *Engine) checkIPCTransfer(req *pb.TransferEncoderCacheRequest) (handoff.Reference, error) {
	if err := e.admitHandoff(); err != nil {
		return handoff.Reference{}, err // S-2, X-1, Q-4 first
	}
	wire := req.GetRef()
	ref, err := handoff.ParseReference(wire.GetBackend(), wire.GetProducerInstanceId(), endpointOf(wire.GetProducerEndpoint()), wire.GetOpaqueState(), 0)
	if err != nil {
		return ref, err
	}
	if ref.Backend != BackendCUDAIPC {
		return ref, fmt.Errorf("%w: SU-4 reference for backend %.40q sent to a cuda_ipc producer", handoff.ErrMalformedReference, ref.Backend)
	}
	// SE-3: a cuda_ipc producer dials nothing (it lends a handle that only
	// a process on this machine can open), so no consumer agent to check.
	if ref.ProducerInstanceID != e.instanceID {
		return ref, fmt.Errorf("%w: SU-5 reference names producer %s, this is %s", handoff.ErrForeignReference, ref.ProducerInstanceID, e.instanceID)
	}
	if err := ref.Verify(e.store.Key()); err != nil {
		return ref, err
	}
	if ref.Expired(e.now().UnixMilli()) {
		e.expire()
		return ref, fmt.Errorf("%w: SU-2 reference %s expired", handoff.ErrSpentReference, short(ref.EntryID))
	}
	targets := req.GetTargets()
	if len(targets) != len(ref.Items) {
		return ref, fmt.Errorf("%w: %d target regions for %d items", handoff.ErrBadRequest, len(targets), len(ref.Items))
	}
	for i, t := range targets {
		if uint64(ref.Items[i].PayloadBytes()) != t.GetLength() {
			return ref, fmt.Errorf("%w: target %d is %d bytes, item needs %d", handoff.ErrBadRequest, i, t.GetLength(), ref.Items[i].PayloadBytes())
		}
		if t.GetMemoryKind() != string(xfer.MemoryCUDA) {
			return ref, fmt.Errorf("%w: target %d memory kind %.20q (cuda_ipc lends device memory: want cuda)", handoff.ErrBadRequest, i, t.GetMemoryKind())
		}
	}
	if _, err := xfer.ParseIPCPeer(req.GetConsumerAgent()); err != nil {
		return ref, fmt.Errorf("%w: consumer_agent: %v", handoff.ErrBadRequest, err)
	}
	return ref, nil
}

// failIPCLend carries out what handoff.FailTransfer decides for a loan
// that failed after the entry left the table and answers
// UNAVAILABLE. Only the test hook fails here with a source: a failure the
// backend cannot explain (not Provable), kept for the life of the process
//
func (e *Engine) failIPCLend(store *cudaipc.Store, id string, entry *cudaipc.Entry, cause error) error {
	e.mu.Lock()
	d, terr := e.table.FailTransfer(handoff.TransferFailure{EntryID: id, HasSource: entry != nil, WriteEnded: true,
		Reason: quarantineReason("Q-3", "source of entry "+short(id), "cuda_ipc loan failed: "+cause.Error())}, e.decisions())
	e.mu.Unlock()
	e.coreRefused("FailTransfer "+id, terr)
	switch d.Source {
	case handoff.SourceNone:
	case handoff.FreeSource: // the Q-3 source mutant (FreedEarly): freed while a process may map it
		if err := store.Free(entry); err != nil {
			e.failCleanup("free the cuda_ipc source of "+short(id), err)
		}
		if d.FreedEarly {
			e.enterQuarantine(&consumer.Quarantine{ID: "source/" + id, Reason: d.Health.Reason}, nil)
		}
	default:
		store.Quarantine(entry)
		e.enterQuarantine(&consumer.Quarantine{ID: "source/" + id, Reason: d.Health.Reason, Keep: entry}, nil)
	}
	e.log.Error("Q-3 cuda_ipc loan failed after removal; source quarantined", "entry", id, "err", cause)
	var err error
	if d.Code == handoff.CodeInvalidArgument {
		// Decisions.InvalidArgumentAfterRemoval (the Q-3 answer mutant).
		err = status.Error(codes.InvalidArgument, "entry not available")
	} else {
		err = e.status(fmt.Errorf("%w: Q-3 transfer of entry %s failed after it left the table; its source is quarantined: %v", errAfterClaim, short(id), cause))
	}
	if e.cfg.Hooks.ProducerTransferFailure != nil {
		return e.cfg.Hooks.ProducerTransferFailure(err)
	}
	return err
}

// returnLoan frees the lent source of an entry its borrower (caller: the
// peer of the TransferEncoderCache call that was lent it) gives back with
// Abort(encoder_cache); lent is false when the entry is not lent. An Abort
// of a lent entry from another peer (a client racing the consume, or one
// that kept the reference) answers the same, consumed, and frees nothing:
// the consumer may not have opened the handle yet (CONTRACT Q-6: a lent
// allocation is freed only once no process maps it). A failed free is a
// cleanup failure.
func (e *Engine) returnLoan(id, caller string) (lent bool) {
	store, ok := e.store.(*cudaipc.Store)
	if !ok {
		return false
	}
	lent, returned, err := store.GiveBack(id, caller)
	if err != nil {
		e.failCleanup("free the returned cuda_ipc loan of "+short(id), err)
	}
	switch {
	case returned:
		e.log.Info("loan returned", "entry", id)
	case lent:
		e.log.Info("Abort of a lent entry by a peer other than its borrower: the loan stays out", "entry", id, "caller", caller)
	}
	return lent
}

// callerAddr is the network address of the peer of an RPC ("" when the
// transport gives none).
func callerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// ---- consumer ----

// ipcReceive receives a cuda_ipc entry: allocate the receive buffer, ask the
// producer for the loan without holding a lock, open the handle, copy
// device-to-device, close the mapping, give the loan back, and download the
// embeddings for the language model. A definite rejection frees the
// buffer; any other failure of the call, a malformed loan, or a failed copy
// quarantines it. A client that cancels does not end the call (C-4).
func (e *Engine) ipcReceive(ctx context.Context, receiveID string, ref handoff.Reference, wire *pb.EncoderCacheRef, addr string, forwardFailHook bool) ([]lm.Image, error) {
	pc, err := e.producers.get(addr)
	if err != nil {
		return nil, err
	}
	defer e.producers.put(pc)
	dev, err := e.ipcDevice()
	if err != nil {
		return nil, err
	}
	total := ref.PayloadBytes()
	e.mu.Lock()
	err = e.receives.Preflight(receiveID, total)
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	dst, err := dev.Alloc(int(total))
	if err != nil {
		e.mu.Lock()
		terr := e.receives.Rejected(receiveID) // nothing was sent: no buffer exists
		e.mu.Unlock()
		e.coreRefused("Rejected "+receiveID, terr)
		return nil, fmt.Errorf("server: cuda_ipc: allocate the receive buffer: %w", err)
	}
	req := &pb.TransferEncoderCacheRequest{Ref: wire, TransferId: receiveID, ConsumerAgent: xfer.IPCPeer{Name: e.instanceID, Device: uint32(dev.Ordinal())}.Marshal()}
	lengths := make([]uint64, len(ref.Items))
	var off uint64
	for i, it := range ref.Items {
		lengths[i] = uint64(it.PayloadBytes())
		req.Targets = append(req.Targets, &pb.MemoryRegion{Address: off, Length: lengths[i], DeviceId: uint32(dev.Ordinal()), MemoryKind: string(xfer.MemoryCUDA)})
		off += lengths[i]
	}
	if err := e.checkTransferRequest(req); err != nil {
		e.endIPCReceive(receiveID, dst) // nothing was sent: a definite outcome
		return nil, err
	}
	call := e.callTransfer(ctx, pc, receiveID, req, forwardFailHook)
	resp, err := call.resp, call.err
	if call.abandoned {
		e.freeIPCReceive(dst) // the C-4 mutant: freed without knowing the outcome
		return nil, ctx.Err()
	}
	if err != nil {
		cause := status.Convert(err).Message()
		d := e.endTransfer(call.event(receiveID, false, quarantineReason("Q-1", "receive "+receiveID, "cuda_ipc outcome uncertain: "+cause))) // handoff decides
		if d.Buffers == handoff.ReleaseBuffers {
			e.freeIPCReceive(dst)
			if d.Reply == handoff.ReplyRefusal || d.Reply == handoff.ReplyUnreachable {
				return nil, call.refusal(d.Reply)
			}
			return nil, fmt.Errorf("%w: Q-1 transfer outcome uncertain (%s)", handoff.ErrTransferUncertain, cause)
		}
		// The reply may have carried a loan we never saw: give it back,
		// so the producer can free its source (it was never mapped here).
		e.giveLoanBackAsync(pc, wire)
		proofs := call.carriers
		if d.NoProof {
			proofs = nil // the Q-2 mutant's uncertain outcome, which nothing can end
		}
		// Pinned, not retired as a tcp receive's client is: nothing here
		// revokes the buffer, so the carriers' closing by themselves is the
		// whole proof, and the consumer closing them would fake it.
		e.producers.pin(pc, proofs)
		return nil, e.quarantineIPCReceive(receiveID, dst, nil, d, cause, proofs)
	}
	loan, err := xfer.ParseIPCLoan(resp.GetTensorLayout(), lengths)
	if err == nil && resp.GetBytesWritten() != loan.Bytes {
		err = fmt.Errorf("bytes_written %d for a loan of %d bytes", resp.GetBytesWritten(), loan.Bytes)
	}
	if err != nil {
		// Nothing was mapped or copied: the loan goes back, the receive fails.
		e.giveLoanBackAsync(pc, wire)
		e.endIPCCopy(handoff.CopyEnded{ReceiveID: receiveID, Quiesced: true}, dst, nil, nil)
		return nil, fmt.Errorf("%w: cuda_ipc: the producer answered OK with an unusable loan: %v", errKVTransferFailed, err)
	}
	src, err := dev.Open(loan.Handle, int(loan.Bytes))
	if err != nil {
		// Nothing was copied into dst; the entry is consumed on the
		// producer and its data out of reach: a failed receive, no
		// quarantine needed. The loan goes back.
		e.giveLoanBack(pc, wire)
		e.endIPCCopy(handoff.CopyEnded{ReceiveID: receiveID, Quiesced: true}, dst, nil, nil)
		return nil, fmt.Errorf("%w: cuda_ipc: open the producer's IPC handle: %v", errKVTransferFailed, err)
	}
	off = 0
	for i, s := range loan.Segments {
		if err = dev.Copy(dst, int(off), src, int(s.Offset), int(s.Length)); err != nil {
			return nil, e.failedIPCCopy(pc, wire, receiveID, dst, src, fmt.Sprintf("device-to-device copy of item %d: %v", i, err))
		}
		off += s.Length
	}
	if err := dev.Free(src); err != nil {
		e.failCleanup("close the cuda_ipc mapping of "+short(ref.EntryID), err)
	}
	// The copy is done: the loan goes back while the embeddings come down.
	e.giveLoanBackAsync(pc, wire)
	// Download straight into the float32s the language model reads (device
	// and host are little-endian, as float32s assumes for the tcp bytes).
	data := make([]float32, total/4)
	if err := dev.Download(unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), total), dst, 0); err != nil {
		return nil, e.failedIPCCopy(nil, nil, receiveID, dst, nil, "download of the received embeddings: "+err.Error())
	}
	e.endIPCCopy(handoff.CopyEnded{ReceiveID: receiveID, OK: true}, dst, nil, nil)
	images := make([]lm.Image, len(ref.Items))
	off = 0
	for i, it := range ref.Items {
		images[i] = lm.Image{ContentHash: it.ContentHash, Rows: int(it.Rows), Cols: int(it.Cols), Data: data[off/4 : (off+lengths[i])/4 : (off+lengths[i])/4]}
		off += lengths[i]
	}
	return images, nil
}

// failedIPCCopy ends a receive whose device copy (or download) failed. If
// the device then synchronizes, nothing runs on it any more: the
// mapping is closed, the loan given back, the buffer freed, and the
// receive fails (UNAVAILABLE) without a quarantine. Otherwise the buffer
// and the mapping are quarantined for the life of the process.
func (e *Engine) failedIPCCopy(pc *producerConn, wire *pb.EncoderCacheRef, receiveID string, dst, mapping xfer.DeviceBuffer, cause string) error {
	if err := e.gpu.dev.Synchronize(); err != nil {
		cause += "; the device does not synchronize: " + err.Error()
		ev := handoff.CopyEnded{ReceiveID: receiveID, Reason: quarantineReason("Q-1", "receive "+receiveID, "cuda_ipc outcome uncertain: "+cause)}
		if err := e.endIPCCopy(ev, dst, mapping, nil); err != nil { // handoff decides: quarantined for the life of the process
			return err
		}
	}
	if mapping != nil {
		if err := e.gpu.dev.Free(mapping); err != nil {
			e.failCleanup("close a cuda_ipc mapping after a failed copy", err)
		}
	}
	if pc != nil {
		e.giveLoanBackAsync(pc, wire)
	}
	e.endIPCCopy(handoff.CopyEnded{ReceiveID: receiveID, Quiesced: true}, dst, nil, nil)
	e.log.Warn("cuda_ipc copy failed; the device synchronized, so nothing touches the buffer any more (Q-6)", "receive", receiveID, "err", cause)
	return fmt.Errorf("%w: cuda_ipc: %s", errKVTransferFailed, cause)
}

// giveLoanBack returns a loan to its producer: Abort(encoder_cache) on the
// same reference, ALREADY_FINISHED (SU-3), or ABORTED when the producer
// never lent it (the reply of an uncertain call). It holds no lock
// and is bounded by the transfer timeout; a failure leaves the loan with
// the producer, so it is logged.
func (e *Engine) giveLoanBack(pc *producerConn, wire *pb.EncoderCacheRef) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.TransferTimeout)
	defer cancel()
	if _, err := pc.client().Abort(OutgoingTraceContext(ctx), &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: wire}}); err != nil {
		e.log.Warn("cuda_ipc: giving the loan back failed; the producer keeps its source", "err", err)
	}
}

// giveLoanBackAsync is giveLoanBack in the background; the drain waits.
func (e *Engine) giveLoanBackAsync(pc *producerConn, wire *pb.EncoderCacheRef) {
	e.gpu.returns.Add(1)
	e.producers.hold(pc) // the caller's use ends before this one does
	go func() {
		defer e.gpu.returns.Done()
		defer e.producers.put(pc)
		e.giveLoanBack(pc, wire)
	}()
}

// endIPCReceive ends a receive before its request was sent (nothing can
// touch its buffer: REJECTED) and frees its buffer.
func (e *Engine) endIPCReceive(receiveID string, dst xfer.DeviceBuffer) {
	e.mu.Lock()
	err := e.receives.Rejected(receiveID)
	e.mu.Unlock()
	e.coreRefused("Rejected "+receiveID, err)
	e.freeIPCReceive(dst)
}

// freeIPCReceive frees the receive buffer of a receive the core released
// (handoff.ReleaseBuffers); a failed free is a cleanup failure.
func (e *Engine) freeIPCReceive(dst xfer.DeviceBuffer) {
	if err := e.gpu.dev.Free(dst); err != nil {
		e.failCleanup("free the cuda_ipc receive buffer", err)
	}
}

// endIPCCopy lets the core decide how a receive whose own copy ended ends
// (handoff.EndCopy) and carries it out: the buffer freed, or quarantined
// with the mapping for the life of the process (then it returns the
// consumer's UNAVAILABLE error, Q-1).
func (e *Engine) endIPCCopy(ev handoff.CopyEnded, dst, mapping xfer.DeviceBuffer, proofs []<-chan struct{}) error {
	e.mu.Lock()
	d, err := e.receives.EndCopy(ev)
	e.mu.Unlock()
	e.coreRefused("EndCopy "+ev.ReceiveID, err)
	if d.Buffers == handoff.QuarantineBuffers {
		return e.quarantineIPCReceive(ev.ReceiveID, dst, mapping, d, ev.Reason, proofs)
	}
	e.freeIPCReceive(dst)
	return nil
}

// quarantineIPCReceive carries out a quarantine the core decided (d:
// already UNCERTAIN): it keeps a receive buffer (and an open mapping, if
// any) until every proof has arrived, for the life of the process when
// proofs is nil, turns health NOT_READY (Q-4, d.Health), and
// returns the consumer's UNAVAILABLE error.
func (e *Engine) quarantineIPCReceive(receiveID string, dst, mapping xfer.DeviceBuffer, d handoff.ReceiveDecision, cause string, proofs []<-chan struct{}) error {
	e.enterQuarantine(&consumer.Quarantine{ID: "receive/" + receiveID, Reason: d.Health.Reason,
		Keep: []xfer.DeviceBuffer{dst, mapping},
		End:  func() { e.coreRefused("EndQuarantine "+receiveID, e.receives.EndQuarantine(receiveID)) },
		Free: func() error {
			if mapping != nil {
				if err := e.gpu.dev.Free(mapping); err != nil {
					return err
				}
			}
			return e.gpu.dev.Free(dst)
		}}, proofs)
	e.log.Error("Q-1 cuda_ipc outcome uncertain; receive buffer quarantined", "receive", receiveID, "err", cause)
	return fmt.Errorf("%w: Q-1 transfer outcome uncertain (%s); its buffers are quarantined", handoff.ErrTransferUncertain, cause)
}

// collectGPU is the S-3 step of the drain, after everything else: it
// releases the engine's CUDA device (and closes the CUDA encoder) only
// after a clean drain (prior == nil), only on a healthy engine (nothing
// quarantined, no cleanup failed: a quarantined buffer or mapping must
// outlive any late copy), and only if this process initialized CUDA; it
// never initializes CUDA. Its failure is returned only when there was no
// earlier one: a failure here never hides an earlier failure.
func (e *Engine) collectGPU(prior error) error {
	e.gpu.returns.Wait() // loans still being given back (bounded by the transfer timeout)
	e.gpu.mu.Lock()
	dev, opened := e.gpu.dev, e.gpu.opened
	e.gpu.mu.Unlock()
	closer, _ := e.encoder.(interface{ Close() error })
	if dev == nil && closer == nil {
		return prior // S-3: no GPU in use; nothing to collect, nothing initialized
	}
	e.mu.Lock()
	unhealthy := e.health.Failure()
	e.mu.Unlock()
	if s, ok := e.store.(*cudaipc.Store); ok && unhealthy == "" && s.Outstanding() > 0 {
		unhealthy = fmt.Sprintf("%d cuda_ipc sources lent or quarantined: another process may map them", s.Outstanding())
	}
	switch {
	case prior != nil:
		e.log.Warn("S-3 GPU collection skipped: the drain failed", "err", prior)
		return prior
	case unhealthy != "":
		e.log.Warn("S-3 GPU collection skipped: the engine is not healthy", "reason", unhealthy)
		return nil
	case e.cfg.IPCDevice == nil && !cuda.Initialized():
		return nil // never initialize CUDA at shutdown
	}
	var errs []error
	if closer != nil {
		errs = append(errs, closer.Close())
	}
	if dev != nil && opened {
		errs = append(errs, dev.Close())
	}
	if err := errors.Join(errs...); err != nil {
		e.log.Error("S-3 GPU collection failed", "err", err)
		return fmt.Errorf("server: S-3 GPU collection: %w", err)
	}
	e.log.Info("S-3 GPU collected")
	return nil
}
