package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/baton-dev/baton/engine/cache"
	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
)

// ClaimedItem is one received item: its metadata and embeddings, float32 [Rows, Cols].
type ClaimedItem struct {
	meta handoff.ItemMeta
	data []float32
}

// parseReference applies, in the contract's precedence (handoff.AdmitConsume
// decides the order), L-1 (size), SU-4 (malformed, including non-canonical
// bytes), H-3 (hash format), N-1 (backend), SE-3 (a transfer backend's
// producer endpoint must be a trusted producer: refused before any
// connection) and SU-5 (the id forms; on shared_dir the tag over every byte
// and the instance) to a reference and returns it verified, with the
// address to dial for a transfer backend ("" for shared_dir).
func (e *Engine) parseReference(wire *pb.EncoderCacheRef) (handoff.Reference, string, error) {
	if wire == nil {
		return handoff.Reference{}, "", fmt.Errorf("%w: SU-4 encoder.consume has no reference", handoff.ErrMalformedReference)
	}
	decisions := e.decisions()
	opaque, maxBytes := decisions.ReadOpaqueState(wire.GetOpaqueState())
	trusted := e.producerEndpoint
	if e.cfg.Hooks.TrustProducer != nil {
		trusted = e.cfg.Hooks.TrustProducer
	}
	var addr string
	ref, err := handoff.AdmitConsume(handoff.ConsumeAdmission{
		OpaqueBytes: len(opaque),
		MaxBytes:    maxBytes,
		Parse: func() (handoff.Reference, error) {
			if e.cfg.Hooks.UnboundedReferenceFields {
				// The A1 mutant: the opaque state alone is checked; the
				// outer fields go on as they came.
				ref, err := handoff.ParseReference("", "", handoff.Endpoint{}, opaque, maxBytes)
				ref.Backend, ref.ProducerInstanceID, ref.Endpoint = wire.GetBackend(), wire.GetProducerInstanceId(), endpointOf(wire.GetProducerEndpoint())
				return ref, err
			}
			return handoff.ParseReference(wire.GetBackend(), wire.GetProducerInstanceId(), endpointOf(wire.GetProducerEndpoint()), opaque, maxBytes)
		},
		Accepts:  func(b string) bool { return slices.Contains(e.cfg.AcceptBackends, b) },
		Accepted: e.cfg.AcceptBackends,
		Transfer: func(b string) bool { return b == BackendTCP || b == BackendCUDAIPC },
		Trust: func(handoff.Reference) error {
			a, err := trusted(wire.GetProducerEndpoint())
			addr = a
			return err
		},
		Known: func(ref handoff.Reference) error {
			_, err := e.producerKey(ref.ProducerInstanceID)
			return err
		},
		Verify: func(ref handoff.Reference) error {
			key, err := e.producerKey(ref.ProducerInstanceID)
			if err == nil {
				err = ref.Verify(key)
			}
			return err
		},
		Mutants: decisions,
		Discard: func(ref handoff.Reference, malformed bool) {
			if malformed {
				ref = looseReference(wire.GetProducerInstanceId(), opaque)
			}
			e.claimAndDiscard(ref)
		},
	})
	if err != nil {
		return handoff.Reference{}, "", err
	}
	return ref, addr, nil
}

// looseReference reads the entry id of a malformed opaque state the way a
// lenient JSON parser would (any JSON object with an "id" string), for
// handoff.Mutants.RejectedReferenceClaims only: the SU-4 mutant claims what
// a malformed imitation names. The contract's engine never reads a
// malformed reference.
func looseReference(producer string, opaque []byte) handoff.Reference {
	var loose struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(opaque, &loose)
	return handoff.Reference{ProducerInstanceID: producer, EntryID: loose.ID}
}

// producerKey loads (once) a producer instance's HMAC key from the shared directory.
func (e *Engine) producerKey(producer string) ([]byte, error) {
	e.mu.Lock()
	key, ok := e.keys[producer]
	e.mu.Unlock()
	if ok {
		return key, nil
	}
	key, err := shareddir.LoadProducerKey(e.fsys, e.cfg.CacheDir, producer)
	if err != nil {
		if errors.Is(err, shareddir.ErrUnknownProducer) || errors.Is(err, shareddir.ErrBadName) {
			return nil, fmt.Errorf("%w: SU-5 no producer %s in this consumer's shared directory", handoff.ErrForeignReference, producer)
		}
		return nil, fmt.Errorf("server: load producer key: %w", err)
	}
	e.mu.Lock()
	e.keys[producer] = key
	e.mu.Unlock()
	return key, nil
}

// receive takes a verified reference through SU-2 (spent, expired), L-5
// and the claim by atomic rename or the transfer; it returns the items as
// lm images. The health refusals came first (generate). Every path
// ends the receive exactly once.
func (e *Engine) receive(ctx context.Context, requestID string, ref handoff.Reference, wire *pb.EncoderCacheRef, addr string, transferFailHook bool) ([]lm.Image, error) {
	if err := handoff.AdmitUnexpired(ref.EntryID, ref.ExpiresUnixMs, e.now().UnixMilli()); err != nil {
		return nil, err
	}
	receiveID := requestID + "/" + ref.EntryID
	if ref.Backend == BackendTCP {
		return e.transferReceive(ctx, receiveID, ref, wire, addr, transferFailHook)
	}
	if ref.Backend == BackendCUDAIPC {
		return e.ipcReceive(ctx, receiveID, ref, wire, addr, transferFailHook)
	}
	// SU-2 decides before L-5 (handoff.AdmitReceive): look before reserving.
	exists, lookErr := shareddir.EntryExists(e.fsys, e.cfg.CacheDir, ref.ProducerInstanceID, ref.EntryID)
	err := handoff.AdmitReceive(ref.EntryID, exists, lookErr,
		func() error {
			e.mu.Lock()
			defer e.mu.Unlock()
			err := e.receives.Preflight(receiveID, ref.PayloadBytes())
			if err == nil {
				err = e.receives.Registered(receiveID)
			}
			if err == nil {
				err = e.receives.Requested(receiveID)
			}
			return err
		})
	if err != nil {
		return nil, err
	}
	claim := defaultClaim
	if e.cfg.Hooks.Claim != nil {
		claim = e.cfg.Hooks.Claim
	}
	items, err := claim(e, ref)
	e.mu.Lock()
	var terr error
	if err != nil {
		terr = e.receives.Rejected(receiveID) // the claim by rename failed: nothing of the entry is ours
	} else {
		terr = e.receives.Succeeded(receiveID)
	}
	e.mu.Unlock()
	e.coreRefused("end shared-directory receive "+receiveID, terr)
	if err != nil {
		switch {
		case errors.Is(err, shareddir.ErrUnknownProducer):
			e.mu.Lock()
			delete(e.keys, ref.ProducerInstanceID)
			e.mu.Unlock()
			return nil, fmt.Errorf("%w: SU-2 producer %s has shut down; its entries are gone", handoff.ErrSpentReference, ref.ProducerInstanceID)
		case errors.Is(err, shareddir.ErrGone):
			return nil, fmt.Errorf("%w: SU-2 reference %s was already consumed, released or expired", handoff.ErrSpentReference, short(ref.EntryID))
		case errors.Is(err, shareddir.ErrCleanup):
			e.failCleanup("delete claimed entry "+ref.EntryID, err)
		}
		return nil, err
	}
	images := make([]lm.Image, len(items))
	for i, it := range items {
		images[i] = lm.Image{ContentHash: it.meta.ContentHash, Rows: int(it.meta.Rows), Cols: int(it.meta.Cols), Data: it.data}
	}
	return images, nil
}

// defaultClaim claims the entry by atomic rename (one winner across
// processes, SU-1; shareddir.Receive, whose switch Hooks.SharedDir breaks
// it) and checks it matches its reference.
func defaultClaim(e *Engine, ref handoff.Reference) ([]ClaimedItem, error) {
	tensors, meta, err := shareddir.Receive(e.fsys, e.cfg.CacheDir, ref.ProducerInstanceID, ref.EntryID, rand.Reader, ref.PayloadBytes()+1<<20, e.cfg.Hooks.SharedDir)
	if err != nil {
		return nil, err
	}
	return MatchEntry(ref, tensors, meta)
}

// MatchEntry checks a claimed entry against the reference that named it.
func MatchEntry(ref handoff.Reference, tensors []shareddir.Tensor, meta map[string]string) ([]ClaimedItem, error) {
	if meta[metaEntry] != ref.EntryID || meta[metaProducer] != ref.ProducerInstanceID || len(tensors) != len(ref.Items) {
		return nil, fmt.Errorf("server: claimed entry %s does not match its reference", short(ref.EntryID))
	}
	items := make([]ClaimedItem, len(tensors))
	for i, t := range tensors {
		it := ref.Items[i]
		if t.Name != tensorName(i) || len(t.Shape) != 2 || t.Shape[0] != int(it.Rows) || t.Shape[1] != int(it.Cols) {
			return nil, fmt.Errorf("server: claimed entry %s item %d has shape %v, reference says [%d, %d]", short(ref.EntryID), i, t.Shape, it.Rows, it.Cols)
		}
		data, err := t.Float32s()
		if err != nil {
			return nil, fmt.Errorf("server: claimed entry %s item %d: %w", short(ref.EntryID), i, err)
		}
		items[i] = ClaimedItem{meta: it, data: data}
	}
	return items, nil
}

// short abbreviates an id for messages (cache.Short).
func short(id string) string { return cache.Short(id) }

// CacheDir is the shared directory root.
func (e *Engine) CacheDir() string { return e.cfg.CacheDir }

// claimAndDiscard claims the entry a reference names and throws it away:
// the engine carrying out handoff.Mutants.RejectedReferenceClaims only (the
// SU-4 mutant, a rejected reference that still consumes).
func (e *Engine) claimAndDiscard(ref handoff.Reference) {
	if ref.EntryID == "" || e.cfg.CacheDir == "" {
		return
	}
	_, _, _ = shareddir.Claim(e.fsys, e.cfg.CacheDir, ref.ProducerInstanceID, ref.EntryID, rand.Reader, handoff.MaxItemBytes)
}
