package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/xfer"
	"github.com/baton-dev/baton/gpu/cuda"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
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
// A loan never given back is freed by the collector after ipcLease, and at
// the drain. The consumer quarantines its receive buffer (and keeps the
// mapping open) on every uncertain outcome; the producer quarantines a
// source whose claim failed half-way. Both report Health NOT_READY
// (check encoder_cache) and refuse new handoffs.

// ipcLease is how long a lent source waits for its consumer to give it
// back beyond the transfer timeout.
const ipcLease = time.Minute

// gpuState is the engine's CUDA device for the cuda_ipc backend, opened at
// start on the producer and on the first cuda_ipc receive on a consumer, so
// that a consumer that never received over cuda_ipc never initializes CUDA
// (S-3).
type gpuState struct {
	mu     sync.Mutex
	dev    xfer.IPCDevice
	opened bool
	// jailed are the receive buffers and still-open mappings of uncertain
	// receives: never freed, never reused.
	jailed []xfer.DeviceBuffer
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

// ipcStore is the cuda_ipc producer's storage: each entry in one device
// allocation whose IPC handle is exported at publish; claimed entries are
// lent until their consumer gives them back.
type ipcStore struct {
	dev    xfer.IPCDevice
	hmac   []byte
	mu     sync.Mutex
	items  map[string]*ipcEntry
	lent   map[string]*ipcEntry
	jailed []*ipcEntry // quarantined sources
}

type ipcEntry struct {
	buf      xfer.DeviceBuffer
	loan     xfer.IPCLoan
	deadline time.Time // lent: when the collector frees it
}

func newIPCStore(dev xfer.IPCDevice) (*ipcStore, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("server: reference key: %w", err)
	}
	return &ipcStore{dev: dev, hmac: key, items: map[string]*ipcEntry{}, lent: map[string]*ipcEntry{}}, nil
}

func (s *ipcStore) backend() string { return BackendCUDAIPC }
func (s *ipcStore) key() []byte     { return s.hmac }

// keepsTensors: write uploads the bytes at once.
func (s *ipcStore) keepsTensors() bool { return false }

// write uploads the entry's tensors, item after item, into one device
// allocation and exports its IPC handle.
func (s *ipcStore) write(id string, tensors []shareddir.Tensor, _ map[string]string) error {
	total := 0
	segs := make([]xfer.IPCSegment, len(tensors))
	for i, t := range tensors {
		segs[i] = xfer.IPCSegment{Offset: uint64(total), Length: uint64(len(t.Data))}
		total += len(t.Data)
	}
	b, err := s.dev.Alloc(total)
	if err != nil {
		return fmt.Errorf("server: cuda_ipc: allocate %d bytes: %w", total, err)
	}
	for i, t := range tensors {
		if err = s.dev.Upload(b, int(segs[i].Offset), t.Data); err != nil {
			break
		}
	}
	var h [xfer.IPCHandleBytes]byte
	if err == nil {
		h, err = s.dev.Export(b)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("server: cuda_ipc: publish entry %s: %w", short(id), err), s.dev.Free(b))
	}
	s.mu.Lock()
	s.items[id] = &ipcEntry{buf: b, loan: xfer.IPCLoan{Handle: h, Bytes: uint64(total), Segments: segs}}
	s.mu.Unlock()
	return nil
}

func (s *ipcStore) take(id string) (*ipcEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.items[id]
	delete(s.items, id)
	return m, ok
}

func (s *ipcStore) lend(id string, m *ipcEntry, deadline time.Time) {
	s.mu.Lock()
	m.deadline = deadline
	s.lent[id] = m
	s.mu.Unlock()
}

// giveBack frees a lent source; ok is false when id is not lent.
func (s *ipcStore) giveBack(id string) (ok bool, err error) {
	s.mu.Lock()
	m, ok := s.lent[id]
	delete(s.lent, id)
	s.mu.Unlock()
	if !ok {
		return false, nil
	}
	return true, s.dev.Free(m.buf)
}

func (s *ipcStore) quarantine(m *ipcEntry) {
	s.mu.Lock()
	s.jailed = append(s.jailed, m)
	s.mu.Unlock()
}

// quarantinedSources returns how many sources the store keeps quarantined
// and their bytes.
func (s *ipcStore) quarantinedSources() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, m := range s.jailed {
		n += int64(m.buf.Bytes())
	}
	return len(s.jailed), n
}

func (s *ipcStore) remove(id string) (bool, error) {
	m, ok := s.take(id)
	if !ok {
		return false, nil
	}
	if err := s.dev.Free(m.buf); err != nil {
		return true, fmt.Errorf("server: cuda_ipc: free entry %s: %w", short(id), err)
	}
	return true, nil
}

func (s *ipcStore) exists(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.items[id]
	return ok, nil
}

// collect frees loans their consumers never gave back, past their lease.
func (s *ipcStore) collect(nowMs int64) error {
	s.mu.Lock()
	var due []string
	for id, m := range s.lent {
		if nowMs >= m.deadline.UnixMilli() {
			due = append(due, id)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, id := range due {
		if _, err := s.giveBack(id); err != nil {
			errs = append(errs, fmt.Errorf("server: cuda_ipc: free the expired loan of %s: %w", short(id), err))
		}
	}
	return errors.Join(errs...)
}

// close frees every entry and every loan (S-4); quarantined sources stay.
func (s *ipcStore) close() error {
	s.mu.Lock()
	var ids, lent []string
	for id := range s.items {
		ids = append(ids, id)
	}
	for id := range s.lent {
		lent = append(lent, id)
	}
	s.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if _, err := s.remove(id); err != nil {
			errs = append(errs, err)
		}
	}
	for _, id := range lent {
		if _, err := s.giveBack(id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lendIPC serves TransferEncoderCache for cuda_ipc: every rejection up to
// the claim is INVALID_ARGUMENT with the before-write trailer; the
// entry leaves the table before it is lent, and a failure after that point
// quarantines the source and answers UNAVAILABLE, never INVALID_ARGUMENT
// . The response's tensor_layout is the xfer.IPCLoan; bytes_written
// is the bytes lent.
func (e *Engine) lendIPC(ctx context.Context, store *ipcStore, req *pb.TransferEncoderCacheRequest) (*pb.TransferEncoderCacheResponse, error) {
	ref, err := e.checkIPCTransfer(req)
	if err := e.claimForTransfer(ctx, ref, err); err != nil {
		return nil, err
	}
	// ---- the entry is out of the table: from here a failure quarantines (Q-3) ----
	entry, ok := store.take(ref.EntryID)
	if !ok {
		return nil, e.failIPCLend(store, ref.EntryID, nil, errors.New("entry storage missing"))
	}
	if e.cfg.TestHooks && len(metadata.ValueFromIncomingContext(ctx, HookTransferFail)) > 0 {
		return nil, e.failIPCLend(store, ref.EntryID, entry, errors.New("test hook "+HookTransferFail+": the loan failed after the entry left the table"))
	}
	store.lend(ref.EntryID, entry, e.now().Add(e.cfg.TransferTimeout+ipcLease))
	e.mu.Lock()
	_ = e.table.TransferDone(ref.EntryID)
	e.mu.Unlock()
	e.log.Info("lent", "entry", ref.EntryID, "bytes", entry.loan.Bytes, "backend", BackendCUDAIPC)
	resp := &pb.TransferEncoderCacheResponse{BytesWritten: entry.loan.Bytes, TensorLayout: entry.loan.Marshal()}
	for _, it := range ref.Items {
		resp.Items = append(resp.Items, &pb.EncodedItem{ContentHash: it.ContentHash, EmbeddingRows: it.Rows, Modality: pb.Modality_MODALITY_IMAGE})
	}
	return resp, nil
}

// checkIPCTransfer validates everything that can be checked before the
// claim: the reference (SU-4, SU-5, SU-2), one "cuda" target per item of
// the item's length, and the consumer agent (an xfer.IPCPeer).
func (e *Engine) checkIPCTransfer(req *pb.TransferEncoderCacheRequest) (handoff.Reference, error) {
	wire := req.GetRef()
	ref, err := handoff.ParseReference(wire.GetBackend(), wire.GetProducerInstanceId(), endpointOf(wire.GetProducerEndpoint()), wire.GetOpaqueState(), 0)
	if err != nil {
		return ref, err
	}
	if ref.Backend != BackendCUDAIPC {
		return ref, fmt.Errorf("%w: SU-4 reference for backend %.40q sent to a cuda_ipc producer", handoff.ErrMalformedReference, ref.Backend)
	}
	if ref.ProducerInstanceID != e.instanceID {
		return ref, fmt.Errorf("%w: SU-5 reference names producer %s, this is %s", handoff.ErrForeignReference, ref.ProducerInstanceID, e.instanceID)
	}
	if err := ref.Verify(e.store.key()); err != nil {
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

// failIPCLend quarantines a source after the entry left the table
// and answers UNAVAILABLE.
func (e *Engine) failIPCLend(store *ipcStore, id string, entry *ipcEntry, cause error) error {
	e.mu.Lock()
	_ = e.table.TransferFailed(id)
	e.health.Fail(handoff.CheckQuarantine, fmt.Sprintf("Q-3 source of entry %s quarantined after a failed cuda_ipc loan: %v", short(id), cause))
	e.mu.Unlock()
	if entry != nil {
		store.quarantine(entry)
	}
	e.log.Error("Q-3 cuda_ipc loan failed after removal; source quarantined", "entry", id, "err", cause)
	err := status.Errorf(codes.Unavailable, "Q-3 transfer of entry %s failed after it left the table; its source is quarantined: %v", short(id), cause)
	if e.cfg.Hooks.ProducerTransferFailure != nil {
		return e.cfg.Hooks.ProducerTransferFailure(err)
	}
	return err
}

// returnLoan frees the lent source of an entry a consumer gives back with
// Abort(encoder_cache); lent is false when the entry is not lent. A failed
// free is a cleanup failure.
func (e *Engine) returnLoan(id string) (lent bool) {
	store, ok := e.store.(*ipcStore)
	if !ok {
		return false
	}
	lent, err := store.giveBack(id)
	if err != nil {
		e.failCleanup("free the returned cuda_ipc loan of "+short(id), err)
	}
	if lent {
		e.log.Info("loan returned", "entry", id)
	}
	return lent
}

// ---- consumer ----

// ipcReceive receives a cuda_ipc entry: allocate the receive buffer, ask the
// producer for the loan without holding a lock, open the handle, copy
// device-to-device, close the mapping, give the loan back, and download the
// embeddings for the language model. A definite rejection frees the
// buffer; any other failure of the call, a malformed loan, or a failed copy
// quarantines it. A client that cancels does not end the call (C-4).
func (e *Engine) ipcReceive(ctx context.Context, receiveID string, ref handoff.Reference, wire *pb.EncoderCacheRef, forwardFailHook bool) ([]lm.Image, error) {
	addr, err := producerAddress(wire.GetProducerEndpoint())
	if err != nil {
		return nil, err
	}
	client, err := e.producers.get(addr)
	if err != nil {
		return nil, err
	}
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
		_ = e.receives.Rejected(receiveID)
		e.mu.Unlock()
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
	call := e.callTransfer(ctx, client, receiveID, req, forwardFailHook)
	resp, err := call.resp, call.err
	if call.abandoned {
		e.endIPCReceive(receiveID, dst, false) // the C-4 mutant: frees without knowing the outcome
		return nil, ctx.Err()
	}
	if call.definite {
		e.endIPCReceive(receiveID, dst, false)
		return nil, fmt.Errorf("%w: Q-2 the producer rejected the transfer before writing: %s", handoff.ErrSpentReference, status.Convert(err).Message())
	}
	if err != nil {
		return nil, e.quarantineIPCReceive(receiveID, dst, nil, status.Convert(err).Message())
	}
	loan, err := xfer.ParseIPCLoan(resp.GetTensorLayout(), lengths)
	if err == nil && resp.GetBytesWritten() != loan.Bytes {
		err = fmt.Errorf("bytes_written %d for a loan of %d bytes", resp.GetBytesWritten(), loan.Bytes)
	}
	if err != nil {
		return nil, e.quarantineIPCReceive(receiveID, dst, nil, "the producer answered OK with an unusable loan: "+err.Error())
	}
	src, err := dev.Open(loan.Handle, int(loan.Bytes))
	if err != nil {
		// Nothing was copied into dst; the entry is consumed on the
		// producer and its data out of reach: a failed receive, no
		// quarantine needed. The loan goes back.
		e.giveLoanBack(client, wire)
		e.endIPCReceive(receiveID, dst, false)
		return nil, fmt.Errorf("%w: cuda_ipc: open the producer's IPC handle: %v", errKVTransferFailed, err)
	}
	off = 0
	for i, s := range loan.Segments {
		if err = dev.Copy(dst, int(off), src, int(s.Offset), int(s.Length)); err != nil {
			// The copy's outcome is uncertain: keep dst and the mapping.
			return nil, e.quarantineIPCReceive(receiveID, dst, src, fmt.Sprintf("device-to-device copy of item %d: %v", i, err))
		}
		off += s.Length
	}
	if err := dev.Free(src); err != nil {
		e.failCleanup("close the cuda_ipc mapping of "+short(ref.EntryID), err)
	}
	// The copy is done: the loan goes back while the embeddings come down.
	e.gpu.returns.Add(1)
	go func() {
		defer e.gpu.returns.Done()
		e.giveLoanBack(client, wire)
	}()
	// Download straight into the float32s the language model reads (device
	// and host are little-endian, as float32s assumes for the tcp bytes).
	data := make([]float32, total/4)
	if err := dev.Download(unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), total), dst, 0); err != nil {
		return nil, e.quarantineIPCReceive(receiveID, dst, nil, "download of the received embeddings: "+err.Error())
	}
	e.endIPCReceive(receiveID, dst, true)
	images := make([]lm.Image, len(ref.Items))
	off = 0
	for i, it := range ref.Items {
		images[i] = lm.Image{ContentHash: it.ContentHash, Rows: int(it.Rows), Cols: int(it.Cols), Data: data[off/4 : (off+lengths[i])/4 : (off+lengths[i])/4]}
		off += lengths[i]
	}
	return images, nil
}

// giveLoanBack returns a loan to its producer: Abort(encoder_cache) on the
// same reference, ALREADY_FINISHED (SU-3). It holds no lock and is
// bounded by the transfer timeout; a failure only delays the producer's
// free to its lease, so it is logged.
func (e *Engine) giveLoanBack(client pb.ControlClient, wire *pb.EncoderCacheRef) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.TransferTimeout)
	defer cancel()
	if _, err := client.Abort(OutgoingTraceContext(ctx), &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: wire}}); err != nil {
		e.log.Warn("cuda_ipc: giving the loan back failed; the producer frees it at its lease", "err", err)
	}
}

// endIPCReceive ends a receive whose outcome is known and frees its buffer;
// a failed free is a cleanup failure.
func (e *Engine) endIPCReceive(receiveID string, dst xfer.DeviceBuffer, ok bool) {
	e.mu.Lock()
	if ok {
		_ = e.receives.Succeeded(receiveID)
	} else {
		_ = e.receives.Rejected(receiveID)
	}
	e.mu.Unlock()
	if err := e.gpu.dev.Free(dst); err != nil {
		e.failCleanup("free the cuda_ipc receive buffer", err)
	}
}

// quarantineIPCReceive keeps a receive buffer (and an open mapping, if
// any) for the life of the process, turns health NOT_READY,
// and returns the consumer's UNAVAILABLE error.
func (e *Engine) quarantineIPCReceive(receiveID string, dst, mapping xfer.DeviceBuffer, cause string) error {
	e.gpu.mu.Lock()
	e.gpu.jailed = append(e.gpu.jailed, dst)
	if mapping != nil {
		e.gpu.jailed = append(e.gpu.jailed, mapping)
	}
	e.gpu.mu.Unlock()
	e.mu.Lock()
	_ = e.receives.Uncertain(receiveID)
	e.health.Fail(handoff.CheckQuarantine, fmt.Sprintf("Q-1 receive %s quarantined: cuda_ipc outcome uncertain: %s", receiveID, cause))
	e.mu.Unlock()
	e.log.Error("Q-1 cuda_ipc outcome uncertain; receive buffer quarantined", "receive", receiveID, "err", cause)
	return fmt.Errorf("%w: Q-1 transfer outcome uncertain (%s); its buffers are quarantined", handoff.ErrQuarantined, cause)
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
