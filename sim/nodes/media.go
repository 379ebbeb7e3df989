package nodes

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/sim/world"
)

// The nodes' media behaviour: E's L-3 decision on a publish's items and
// the content hashes it publishes with them (H-1, H-4 mutants), and a
// consumer's prefill of a successful consume (its identities and
// prefix-cache key, H-2, H-5, B-2). The media pool, the plans and what was
// published and answered (the checkers' input) stay in package world
// (sim/world/media.go).

// modalityError is the L-3 decision on a publish's items: "" when every
// item is an image. The core decides (handoff.AdmitModality); its L-3
// switch treats video and audio as images.
func modalityError(w *world.World, p *world.MediaPlan) string {
	for i, it := range p.List() {
		if it.Modality != world.ModalityImage {
			why := fmt.Sprintf("L-3 item %d is %s: not served", i, world.ModalityNames[it.Modality])
			if handoff.AdmitModality(fmt.Errorf("%w: %s", handoff.ErrModalityUnsupported, why), w.Decisions) != nil {
				return why
			}
		}
	}
	return ""
}

// publishMedia records the items of entry id as the producer publishes
// them, with the content hash it computes for each (none when the publish
// omits them). The H-1 mutant hashes premultiplied pixels, the H-4 mutant
// the wire bytes.
func publishMedia(w *world.World, rec *world.EntryRecord, p *world.MediaPlan) {
	if p.N == 0 {
		return
	}
	fn := world.HashContract // the pool's hashes under each contenthash.Of switch
	switch d := w.Opts.Mutant.ContentHashDecisions(); {
	case d.Premultiplied:
		fn = world.HashPremultiplied
	case d.WireBytes:
		fn = world.HashWireBytes
	}
	pm := w.Media.NewPublished(w.Set.Handoffs)
	pm.Entry, pm.Items = rec.Id, p.List()
	pm.Hashes = pm.Buf[:p.N]
	if !p.OmitHash {
		for i, it := range pm.Items {
			pm.Hashes[i] = world.MediaPool[it.Img].Hashes[fn][it.Enc]
		}
	}
	if w.Media.Published == nil {
		w.Media.Published = make([]*world.PublishedMedia, 0, w.Set.Handoffs)
	}
	rec.Media = pm
	w.Media.Published = append(w.Media.Published, pm)
}

// consumeMedia is the consumer's prefill of a successful consume of r's
// entry: the prompt's token ids (one lm.ImageID marker per item first),
// one identity per item, the prefix-cache key; a hit answers from the
// cache, a miss from the received items' content.
func consumeMedia(w *world.World, c *world.ConsumerNode, r *world.Recv) {
	pm := w.Ledger.Get(r.Entry).Media
	if pm == nil {
		return
	}
	prompt := w.Clients[r.H].Plan.Media.Prompt
	var identityBuf [2]string
	ids := w.Media.TokenScratch()
	for range pm.Items {
		ids = append(ids, lm.ImageID)
	}
	ids = append(ids, world.MediaPrompts[prompt]...)
	w.Media.TokenIDs = ids
	identities := identityBuf[:len(pm.Items)]
	for i, it := range pm.Items {
		identities[i] = imageIdentity(w, it, pm.Hashes[i])
	}
	key := world.CacheKey{Consumer: int32(c.Idx), Inc: int32(c.Inc), Key: prefixKey(w, ids, identities)}
	if w.Media.Cache == nil {
		w.Media.Cache = make(map[world.CacheKey]uint64, w.Set.Handoffs)
		w.Media.Answers = make([]world.MediaAnswer, 0, w.Set.Handoffs)
	}
	ans, hit := w.Media.Cache[key]
	if hit {
		w.Media.Hits++
	} else {
		ans = world.AnswerOf(prompt, pm.Items)
		w.Media.Cache[key] = ans
	}
	w.Media.Answers = append(w.Media.Answers, world.MediaAnswer{Pm: pm, Consumer: int32(c.Idx), Inc: int32(c.Inc), Prompt: prompt, Answer: ans})
	if w.Tracing {
		if w.Tracing {
			w.Notef("PD%d answered %s (prefix cache hit %v)", c.Idx, world.Short(r.Entry), hit)
		}
	}
}

// imageIdentity is the identity the consumer keys an item by: its content
// hash (lm.ImageIdentity, whose H-5 switch keys an item that has a uuid by
// the uuid), or a fresh random identity when it has none (H-2).
func imageIdentity(w *world.World, it world.MediaItem, hash string) string {
	if id := lm.ImageIdentity(world.MediaUUIDs[it.Uuid], hash, w.Opts.Mutant.ModelDecisions()); id != "" {
		return id
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], w.Media.Pcg.Uint64())
	binary.LittleEndian.PutUint64(b[8:], w.Media.Pcg.Uint64())
	return lm.FreshIdentityPrefix + hex.EncodeToString(b[:])
}

// prefixKey is the consumer's prefix-cache key: lm.PrefixKeyWith under the
// model switches the mutant sets (lm.DefaultPrefixKey without; the B-2
// mutant keys by the token ids alone, the H-2 mutant leaves the fresh
// identities out).
func prefixKey(w *world.World, ids []uint32, identities []string) string {
	return lm.PrefixKeyWith(ids, identities, w.Opts.Mutant.ModelDecisions())
}
