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
//
// engine/producer carries out the producer's side after the claim (Lend,
// FailLend, ReturnLoan) and engine/consumer the receive buffer's life
// (BeginIPC, EndTransfer, EndCopy, FailedCopy, QuarantineIPC); this file
// keeps the calls, the checks before the claim, the loan's return over
// gRPC and the answers' codes.

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
		return nil, e.failIPCLend(ref.EntryID, nil, errors.New("entry storage missing"))
	}
	if e.cfg.TestHooks && len(metadata.ValueFromIncomingContext(ctx, HookTransferFail)) > 0 {
		return nil, e.failIPCLend(ref.EntryID, entry, errors.New("test hook "+HookTransferFail+": the loan failed after the entry left the table"))
	}
	e.producerDriver().Lend(ref.EntryID, entry, callerAddr(ctx))
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

// failIPCLend answers a loan that failed after the entry left the table
// with UNAVAILABLE (afterClaim), once engine/producer carried out
// what handoff.FailTransfer decides for its source (Driver.FailLend). Only
// the test hook fails here with a source: a failure the backend cannot
// explain (not Provable), kept for the life of the process.
func (e *Engine) failIPCLend(id string, entry *cudaipc.Entry, cause error) error {
	d := e.producerDriver().FailLend(handoff.TransferFailure{EntryID: id, HasSource: entry != nil, WriteEnded: true,
		Reason: consumer.QuarantineReason("Q-3", "source of entry "+short(id), "cuda_ipc loan failed: "+cause.Error())}, entry, cause)
	return e.afterClaim(id, d, "; its source is quarantined", cause)
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
// The buffer's life (allocate, free, quarantine on the core's decision) is
// engine/consumer's Driver; the call, the loan's return and the wire
// mapping stay here.
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
	drv := e.ipcDriver(dev)
	total := ref.PayloadBytes()
	r, err := drv.BeginIPC(receiveID, total)
	if err != nil {
		return nil, err
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
		drv.UnsentIPC(r) // nothing was sent: a definite outcome
		return nil, err
	}
	call := e.callTransfer(ctx, pc, receiveID, req, forwardFailHook)
	resp, err := call.resp, call.err
	if call.abandoned {
		drv.ReleaseIPC(r) // the C-4 mutant: freed without knowing the outcome
		return nil, ctx.Err()
	}
	giveBack := func() { e.giveLoanBackAsync(pc, wire) }
	if err != nil {
		cause := status.Convert(err).Message()
		d := drv.EndTransfer(call.event(receiveID, false, consumer.QuarantineReason("Q-1", "receive "+receiveID, "cuda_ipc outcome uncertain: "+cause))) // handoff decides
		if d.Buffers == handoff.ReleaseBuffers {
			drv.ReleaseIPC(r)
			if d.Reply == handoff.ReplyRefusal || d.Reply == handoff.ReplyUnreachable {
				return nil, call.refusal(d.Reply)
			}
			return nil, fmt.Errorf("%w: Q-1 transfer outcome uncertain (%s)", handoff.ErrTransferUncertain, cause)
		}
		// The reply may have carried a loan we never saw: give it back,
		// so the producer can free its source (it was never mapped here).
		giveBack()
		proofs := call.carriers
		if d.NoProof {
			proofs = nil // the Q-2 mutant's uncertain outcome, which nothing can end
		}
		// Pinned, not retired as a tcp receive's client is: nothing here
		// revokes the buffer, so the carriers' closing by themselves is the
		// whole proof, and the consumer closing them would fake it.
		e.producers.pin(pc, proofs)
		return nil, drv.QuarantineIPC(r, nil, d, cause, proofs)
	}
	loan, err := xfer.ParseIPCLoan(resp.GetTensorLayout(), lengths)
	if err == nil && resp.GetBytesWritten() != loan.Bytes {
		err = fmt.Errorf("bytes_written %d for a loan of %d bytes", resp.GetBytesWritten(), loan.Bytes)
	}
	if err != nil {
		// Nothing was mapped or copied: the loan goes back, the receive fails.
		giveBack()
		if qerr := drv.EndCopy(r, handoff.CopyEnded{ReceiveID: receiveID, Quiesced: true}, nil, nil); qerr != nil {
			return nil, qerr // never: a quiesced copy is released
		}
		return nil, fmt.Errorf("%w: cuda_ipc: the producer answered OK with an unusable loan: %v", errKVTransferFailed, err)
	}
	src, err := dev.Open(loan.Handle, int(loan.Bytes))
	if err != nil {
		// Nothing was copied into dst; the entry is consumed on the
		// producer and its data out of reach: a failed receive, no
		// quarantine needed. The loan goes back.
		e.giveLoanBack(pc, wire)
		if qerr := drv.EndCopy(r, handoff.CopyEnded{ReceiveID: receiveID, Quiesced: true}, nil, nil); qerr != nil {
			return nil, qerr // never: a quiesced copy is released
		}
		return nil, fmt.Errorf("%w: cuda_ipc: open the producer's IPC handle: %v", errKVTransferFailed, err)
	}
	off = 0
	for i, s := range loan.Segments {
		if err = dev.Copy(r.Dst, int(off), src, int(s.Offset), int(s.Length)); err != nil {
			return nil, failedIPCCopy(drv, r, src, fmt.Sprintf("device-to-device copy of item %d: %v", i, err), giveBack)
		}
		off += s.Length
	}
	if err := dev.Free(src); err != nil {
		e.failCleanup("close the cuda_ipc mapping of "+short(ref.EntryID), err)
	}
	// The copy is done: the loan goes back while the embeddings come down.
	giveBack()
	// Download straight into the float32s the language model reads (device
	// and host are little-endian, as float32s assumes for the tcp bytes).
	data := make([]float32, total/4)
	if err := dev.Download(unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), total), r.Dst, 0); err != nil {
		return nil, failedIPCCopy(drv, r, nil, "download of the received embeddings: "+err.Error(), nil)
	}
	if qerr := drv.EndCopy(r, handoff.CopyEnded{ReceiveID: receiveID, OK: true}, nil, nil); qerr != nil {
		return nil, qerr // never: a copy that ended OK is released
	}
	images := make([]lm.Image, len(ref.Items))
	off = 0
	for i, it := range ref.Items {
		images[i] = lm.Image{ContentHash: it.ContentHash, Rows: int(it.Rows), Cols: int(it.Cols), Data: data[off/4 : (off+lengths[i])/4 : (off+lengths[i])/4]}
		off += lengths[i]
	}
	return images, nil
}

// failedIPCCopy ends a receive whose device copy (or download) failed
// (engine/consumer: Driver.FailedCopy) and answers it: the consumer's
// UNAVAILABLE error of a quarantine for the life of the process when
// the device does not synchronize, otherwise a failed receive
// (errKVTransferFailed: UNAVAILABLE) without a quarantine. giveBack
// returns the loan (nil when none is to be returned).
func failedIPCCopy(drv *consumer.Driver, r *consumer.IPCReceive, mapping xfer.DeviceBuffer, cause string, giveBack func()) error {
	if err := drv.FailedCopy(r, mapping, cause, giveBack); err != nil {
		return err
	}
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
