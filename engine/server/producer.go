package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"strconv"
	"strings"
	"syscall"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/handoff"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
)

// Safetensors metadata keys of a published entry (strings only, per the format).
const (
	metaFormat   = "baton.format"
	metaProducer = "baton.producer_instance_id"
	metaEntry    = "baton.entry_id"
	metaItems    = "baton.items" // JSON [{"hash","rows","cols"}]
	metaCreated  = "baton.created_unix_ms"
	metaTTL      = "baton.ttl_ms"
	metaPreset   = "baton.preset"
	formatValue  = "baton.encoder.v1/entry"
)

// tensorName names item i's tensor, float32 [rows, cols].
func tensorName(i int) string { return "item." + strconv.Itoa(i) }

// publish encodes images and publishes them as one entry: reserve bytes (L-5),
// encode, write the file, commit, then send EncoderReady. The core decides
// its end (handoff.DecidePublishStep, DecideReadySent) and engine/producer
// carries it out (Driver.BeginPublish, Publish): a publish cancelled
// before publication is abandoned (C-1, C-2, C-3); an entry whose
// EncoderReady failed to send or was cancelled is released (C-7). The
// encoder step, the store's write (writeFailed), the reference and the
// EncoderReady stay here.
func (e *Engine) publish(ctx context.Context, req *pb.GenerateRequest, hooks requestHooks, images []decodedImage, send func(*pb.GenerateResponse) error) error {
	if err := e.admitHandoff(); err != nil {
		return err
	}
	rows, cols := e.preset.Patches(), e.preset.OutDim
	payload := int64(len(images)) * int64(rows) * int64(cols) * 4
	id, err := shareddir.NewEntryID(rand.Reader)
	if err != nil {
		return fmt.Errorf("server: entry id: %w", err)
	}
	m := e.decisions()
	if m.EntryIDFromContent {
		hashes := make([]string, len(images))
		for i, im := range images {
			hashes[i] = im.hash
		}
		id = handoff.EntryID(id, strings.Join(hashes, ","), m) // the SU-6 mutant's id
	}
	pub, err := e.producerDriver().BeginPublish(id, payload) // L-5
	if err != nil {
		return err
	}
	defer pub.End() // C-1, C-6: give back everything reserved, unless committed or ended by the core
	imgs := make([]image.Image, len(images))
	for i, im := range images {
		imgs[i] = im.img
	}
	// The executor's wait carries out the core's decision about a
	// cancellation while the step is pending and once its output is ready:
	// it stops, and the publish is abandoned (C-1), unless the core decides
	// to write anyway (the C-2 and C-3 mutants).
	encodeCtx := ctx
	if !handoff.StopsOnCancel(handoff.CancelledDuringStep, m) {
		encodeCtx = context.WithoutCancel(ctx) // the C-2 mutant: the cancellation is not looked at
	}
	hooks.keepAfterReady = !handoff.StopsOnCancel(handoff.CancelledWithOutput, m)
	xr, embeddings, err := e.exec.encode(encodeCtx, req.GetRequestId(), hooks, imgs)
	if err != nil {
		if errors.Is(err, errEncoderFailed) {
			pub.EncoderFailed() // C-6: the core abandons the publish (or keeps it, the C-6 mutant)
		}
		return err // C-1 (cancelled during the held step), C-3 (cancelled while published, unconsumed) or C-6 (failed step)
	}
	defer xr.end() // drops the view if the entry was never written (C-3)
	// A cancellation during the step ended the executor's wait above, as
	// the core decided (StopsOnCancel); one seen now came with the output
	// ready, or during a step whose wait the core said not to stop (then
	// it decides the same for both kinds).
	if err := ctx.Err(); !pub.StepEnded(err != nil) {
		return err // C-1: cancelled before publication, nothing published
	}
	items := make([]handoff.ItemMeta, len(images))
	tensors := make([]shareddir.Tensor, len(images))
	// A store that copies out as it writes (file, device upload) reads the
	// packed storage directly; the view is released after the write.
	view := !e.store.KeepsTensors()
	for i, emb := range embeddings {
		hash := images[i].hash
		if e.cfg.Hooks.PublishedContentHash != nil {
			hash = e.cfg.Hooks.PublishedContentHash(hash, images[i].img)
		}
		if hooks.omitHash {
			hash = "" // test hook: a producer that does not hash (H-2)
		}
		items[i] = handoff.ItemMeta{ContentHash: hash, Rows: uint32(emb.Rows), Cols: uint32(emb.Cols)}
		if view {
			tensors[i] = shareddir.F32TensorView(tensorName(i), emb.Rows, emb.Cols, emb.Data) // the write copies out
		} else {
			tensors[i] = shareddir.F32Tensor(tensorName(i), emb.Rows, emb.Cols, emb.Data) // the entry's own bytes
		}
	}
	if !view {
		xr.release() // the tensors hold their own copy: the batch's storage may go
	}
	e.mu.Lock()
	ttl := e.table.TTL(int64(req.GetEncoder().GetPublish().GetTtlMs()))
	e.mu.Unlock()
	nowMs := e.now().UnixMilli()
	itemsJSON, _ := json.Marshal(items)
	meta := map[string]string{
		metaFormat: formatValue, metaProducer: e.instanceID, metaEntry: id, metaItems: string(itemsJSON),
		metaCreated: strconv.FormatInt(nowMs, 10), metaTTL: strconv.FormatInt(ttl, 10), metaPreset: e.preset.Name,
	}
	if err := e.store.Write(id, tensors, meta); err != nil {
		return e.writeFailed(err)
	}
	e.storageHasRoom()
	xr.release() // idempotent: a no-op when the tensors were copies
	if err := pub.Commit(nowMs + ttl); err != nil {
		return err
	}
	if hooks.cleanupFail {
		e.mu.Lock()
		e.failRemoval[id] = true
		e.mu.Unlock()
	}
	endpoint := e.controlEndpoint()
	ref := handoff.Reference{Backend: e.store.Backend(), ProducerInstanceID: e.instanceID, Endpoint: endpointOf(endpoint), EntryID: id, ExpiresUnixMs: nowMs + ttl, Items: items}
	ready := &pb.EncoderReady{
		Ref: &pb.EncoderCacheRef{
			Backend:            e.store.Backend(),
			ProducerInstanceId: e.instanceID,
			ProducerEndpoint:   endpoint, // the tag covers it (SU-5)
			OpaqueState:        ref.Seal(e.store.Key()),
		},
	}
	for _, it := range items {
		ready.Items = append(ready.Items, &pb.EncodedItem{ContentHash: it.ContentHash, EmbeddingRows: it.Rows, Modality: pb.Modality_MODALITY_IMAGE})
	}
	e.log.InfoContext(ctx, "published", "entry", id, "items", len(items), "payload_bytes", payload, "ttl_ms", ttl)
	err = send(&pb.GenerateResponse{RequestId: req.GetRequestId(), Event: &pb.GenerateResponse_EncoderReady{EncoderReady: ready}, Usage: &pb.Usage{}})
	// The core decides what a send that failed, or a stream cancelled
	// before or during it, does to the entry (C-3, C-7: engine/producer,
	// Publish.ReadySent).
	return pub.ReadySent(ctx, err, ctx.Err()) // nil once answered on a live stream; the C-2 mutant answered a cancelled one
}

// writeFailed answers a failed entry write. Out of space (ENOSPC) is
// RESOURCE_EXHAUSTED, retryable (L-5: nothing was published), and Health
// stays READY with a cache_dir check that names it; a temp file the write
// could not remove is a cleanup failure; anything else is INTERNAL.
func (e *Engine) writeFailed(err error) error {
	if errors.Is(err, shareddir.ErrCleanup) {
		e.failCleanup("remove the temp file of a failed write", err)
	}
	if errors.Is(err, syscall.ENOSPC) && !e.cfg.Hooks.StorageFullInternal {
		e.mu.Lock()
		e.health.Note(handoff.CheckCacheDir, handoff.HealthDegraded, fmt.Sprintf("ENOSPC: the shared directory %s is out of space; publishes answer RESOURCE_EXHAUSTED until an entry fits (L-5)", e.cfg.CacheDir))
		e.storageFull = true
		e.mu.Unlock()
		e.healthChanged()
		return fmt.Errorf("%w: L-5 the shared directory is out of space (ENOSPC); nothing was published: %v", handoff.ErrStorageFull, err)
	}
	return fmt.Errorf("server: write entry: %w", err)
}

// storageHasRoom clears the cache_dir note after a write succeeded.
func (e *Engine) storageHasRoom() {
	e.mu.Lock()
	full := e.storageFull
	if full {
		e.health.ClearNote(handoff.CheckCacheDir)
		e.storageFull = false
	}
	e.mu.Unlock()
	if full {
		e.healthChanged()
	}
}

// removalEndedLocked returns a channel closed when the next removal of an
// entry ends (RemovalDone or RemovalFailed reported to the table). Call
// with mu held.
func (e *Engine) removalEndedLocked() chan struct{} {
	if e.removalEnded == nil {
		e.removalEnded = make(chan struct{})
	}
	return e.removalEnded
}

// removalEndedSignalLocked wakes every release waiting for a removal in
// flight (handoff.ReleaseWait); each decides again, and waits again if its
// own entry's removal has not ended. Call with mu held, in the same
// critical section that reports the removal's end to the table.
func (e *Engine) removalEndedSignalLocked() {
	if e.removalEnded != nil {
		close(e.removalEnded)
		e.removalEnded = nil
	}
}

// collect is one pass of the producer's collector (engine/producer:
// Driver.Collect): entries found claimed become CONSUMED, expired ones are
// removed, stale temp files go.
func (e *Engine) collect() {
	if e.store == nil {
		return
	}
	e.producerDriver().Collect(e.now)
}

// expire removes every entry whose TTL passed.
func (e *Engine) expire() { e.expireBy(e.table.Expire) }

// expireBy removes the entries decide expires at the engine's clock
// (ProducerTable.Expire, ExpireBeforeRelease; engine/producer:
// Driver.Expire).
func (e *Engine) expireBy(decide func(nowMs int64) []string) {
	e.producerDriver().Expire(e.now, decide)
}

// observeClaims looks at which published entries consumers have claimed
// (engine/producer: Driver.ObserveClaims).
func (e *Engine) observeClaims() {
	if e.store == nil {
		return
	}
	e.producerDriver().ObserveClaims()
}

// drainProducer removes every unconsumed entry (S-2) and the instance
// directory with its key (S-4): engine/producer's Driver.Drain.
func (e *Engine) drainProducer() error {
	if e.store == nil {
		return nil
	}
	return e.producerDriver().Drain()
}

// endpointOf is a wire producer_endpoint as the reference tag covers it
// (an absent one is the zero Endpoint, as proto3 reads it).
func endpointOf(ep *pb.KvEndpoint) handoff.Endpoint {
	return handoff.Endpoint{Host: ep.GetHost(), Port: ep.GetPort(), Protocol: ep.GetProtocol()}
}

func (e *Engine) controlEndpoint() *pb.KvEndpoint {
	host, port := splitHostPort(e.cfg.AdvertiseControl)
	return &pb.KvEndpoint{Host: host, Port: port, Protocol: "grpc"}
}
