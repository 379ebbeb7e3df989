package world

import (
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"math/rand/v2"
	"strings"

	"github.com/baton-dev/baton/engine/contenthash"
)

// The media model of the handoff world. Each client's publish carries one
// or two items drawn from a small fixed pool of tiny images (mediaPool):
// pixel-equal twins (an 8-bit and a 16-bit source, and four encodings of
// every image, so the wire bytes differ while the pixels do not), alpha
// variants and colour-under-alpha-0 variants (different non-premultiplied
// pixels that premultiplication makes equal), sometimes a MediaItem.uuid
// shared by different images, rarely a video or audio item, and sometimes
// no content hash at all (a publish with the engine's omit-hash test hook;
// the consumer must then give the item a fresh identity, H-2).
//
// The producer computes each item's content hash with the engine's own
// function (contenthash.ContentHash, CONTRACT H-1) when it publishes; the consumer
// keeps a prefix cache keyed as the engine's language model keys it
// (lm.DefaultPrefixKey over the prompt's token ids with one lm.ImageID
// marker per item and one identity per item: its content hash, or a fresh
// lm.FreshIdentityPrefix identity when it has none), and answers a
// successful consume from that cache or, on a miss, from the items'
// content. An answer is a cheap deterministic stand-in for the model's
// tokens (a hash of the prompt and the decoded pixels): the simulator
// checks which content an answer came from, not floats.

// subMedia is the media draws' PRNG stream (clients' items and prompts,
// fresh identities), apart from the workload's so that the lifecycle draws
// of a seed stay what they were.
const subMedia subsystem = 0xc2b2ae3d27d4eb4f

// mediaPreset is the preprocessing preset named in every content hash.
const mediaPreset = "tiny"

// Item modalities (CONTRACT L-3: only images are served).
const (
	ModalityImage uint8 = iota
	modalityVideo
	modalityAudio
)

var ModalityNames = [...]string{ModalityImage: "image", modalityVideo: "video", modalityAudio: "audio"}

// mediaEncodings are the wire forms every pool image is sent in: each is
// lossless, so all four decode to the same pixels (H-4).
var mediaEncodings = [...]string{"png", "png-reencoded", "data-uri", "raw-bytes"}

// MediaUUIDs are the MediaItem.uuid values clients send (index 0: none);
// each is sent with different images (H-5).
var MediaUUIDs = [...]string{"", "0b8f4a52-4c1e-4d0a-9a51-5a0c2f7e3b11", "7d3e9c10-2b6a-4f85-8e47-c1d2a3b4c5d6"}

// MediaPrompts are the consumes' prompt token ids (no markers: the items'
// lm.ImageID markers go before them, as without <image> in the prompt).
var MediaPrompts = [...][]uint32{{201, 202, 203}, {201, 204}, {205, 206, 207, 208}}

// Content-hash functions the producer can apply: the contract's and the
// two broken ones of the H-1 and H-4 mutants (contenthash.Of under each of
// its switches).
const (
	HashContract      = iota // contenthash.ContentHash: the contract's
	HashPremultiplied        // over premultiplied pixels (the H-1 mutant)
	HashWireBytes            // over the wire bytes (the H-4 mutant)
	hashFunctions
)

// mediaImage is one pool image, with everything derived from it computed
// once: its pixel identity, its content digest and its hash under every
// function and encoding.
type mediaImage struct {
	name string
	img  image.Image // *image.NRGBA or *image.NRGBA64
	// Pixels is the image's size and non-premultiplied 16-bit RGBA pixels
	// (image.NRGBA64 order): equal exactly when the decoded pixels are;
	// pixelClass the index of the first pool image with these pixels.
	Pixels     string
	PixelClass int
	// Digest stands in for the encoder output of the decoded pixels.
	Digest uint64
	Hashes [hashFunctions][len(mediaEncodings)]string // the item's content hash by hash function and encoding
}

// MediaPool is the fixed pool every seed draws items from.
var MediaPool = buildMediaPool()

// buildMediaPool makes the pool's images and everything derived from them.
func buildMediaPool() []mediaImage {
	base := [4]color.NRGBA{{255, 0, 0, 255}, {0, 0, 255, 255}, {10, 20, 30, 255}, {40, 50, 60, 255}}
	nrgba := func(px [4]color.NRGBA) image.Image {
		m := image.NewNRGBA(image.Rect(0, 0, 2, 2))
		for i, c := range px {
			m.SetNRGBA(i%2, i/2, c)
		}
		return m
	}
	with := func(i int, c color.NRGBA) [4]color.NRGBA {
		px := base
		px[i] = c
		return px
	}
	wide := image.NewNRGBA64(image.Rect(0, 0, 2, 2))
	for i, c := range base {
		wide.SetNRGBA64(i%2, i/2, color.NRGBA64{uint16(c.R) * 0x101, uint16(c.G) * 0x101, uint16(c.B) * 0x101, uint16(c.A) * 0x101})
	}
	pool := []mediaImage{
		{name: "base", img: nrgba(base)},
		{name: "base-16bit", img: wide}, // pixel-equal to base
		{name: "green", img: nrgba(with(0, color.NRGBA{0, 255, 0, 255}))},
		{name: "grey", img: nrgba([4]color.NRGBA{{128, 128, 128, 255}, {64, 64, 64, 255}, {192, 192, 192, 255}, {0, 0, 0, 255}})},
		{name: "half-alpha", img: nrgba(with(0, color.NRGBA{255, 0, 0, 128}))},
		{name: "hidden-orange", img: nrgba(with(1, color.NRGBA{200, 100, 50, 0}))},
		{name: "hidden-orange-2", img: nrgba(with(1, color.NRGBA{201, 100, 50, 0}))},
		{name: "hidden-black", img: nrgba(with(1, color.NRGBA{0, 0, 0, 0}))},
	}
	if len(pool) > maxPoolImages {
		panic("sim: media pool over maxPoolImages")
	}
	for i := range pool {
		m := &pool[i]
		m.Pixels = nrgba64Pixels(m.img)
		m.PixelClass = i
		for j := range i {
			if pool[j].Pixels == m.Pixels {
				m.PixelClass = pool[j].PixelClass
				break
			}
		}
		m.Digest = fnv64(m.Pixels)
		for e, enc := range mediaEncodings {
			wire := wireBytes(enc, m.img)
			m.Hashes[HashContract][e] = contenthash.ContentHash(mediaPreset, m.img)
			m.Hashes[HashPremultiplied][e] = contenthash.Of(mediaPreset, wire, m.img, contenthash.Mutants{Premultiplied: true})
			m.Hashes[HashWireBytes][e] = contenthash.Of(mediaPreset, wire, m.img, contenthash.Mutants{WireBytes: true})
		}
	}
	return pool
}

// nrgba64Pixels is img's size and non-premultiplied 16-bit pixels.
func nrgba64Pixels(img image.Image) string {
	b := img.Bounds()
	out := binary.BigEndian.AppendUint32(nil, uint32(b.Dx()))
	out = binary.BigEndian.AppendUint32(out, uint32(b.Dy()))
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			var c color.NRGBA64
			switch m := img.(type) {
			case *image.NRGBA:
				p := m.NRGBAAt(x, y)
				c = color.NRGBA64{uint16(p.R) * 0x101, uint16(p.G) * 0x101, uint16(p.B) * 0x101, uint16(p.A) * 0x101}
			case *image.NRGBA64:
				c = m.NRGBA64At(x, y)
			default:
				panic(fmt.Sprintf("sim: media pool image of type %T", img))
			}
			out = binary.BigEndian.AppendUint16(out, c.R)
			out = binary.BigEndian.AppendUint16(out, c.G)
			out = binary.BigEndian.AppendUint16(out, c.B)
			out = binary.BigEndian.AppendUint16(out, c.A)
		}
	}
	return string(out)
}

// wireBytes stands in for img encoded as enc: the encoding's name, then
// the source's own pixel bytes (8 or 16 bits a channel).
func wireBytes(enc string, img image.Image) []byte {
	out := []byte(enc + "\x00")
	switch m := img.(type) {
	case *image.NRGBA:
		return append(append(out, "nrgba\x00"...), m.Pix...)
	case *image.NRGBA64:
		return append(append(out, "nrgba64\x00"...), m.Pix...)
	}
	panic(fmt.Sprintf("sim: media pool image of type %T", img))
}

// fnv64 is FNV-1a over s.
func fnv64(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 0x100000001b3
	}
	return h
}

// MediaItem is one MediaItem of a publish: a pool image, its encoding on
// the wire, its uuid (index into mediaUUIDs, 0: none) and its modality.
type MediaItem struct {
	Img, Enc, Uuid, Modality uint8 // indexes into MediaPool, mediaEncodings, MediaUUIDs; the modality
}

func (it MediaItem) String() string {
	s := MediaPool[it.Img].name + "/" + mediaEncodings[it.Enc]
	if it.Uuid != 0 {
		s += " uuid " + MediaUUIDs[it.Uuid][:8]
	}
	if it.Modality != ModalityImage {
		s += " (" + ModalityNames[it.Modality] + ")"
	}
	return s
}

// MediaPlan is what one client publishes and asks: its items (n of them),
// whether its publish omits the content hashes (the engine's omit-hash
// test hook), and the prompt of its consumes. n == 0 is a client without
// media (the Driver's).
type MediaPlan struct {
	items    [2]MediaItem
	N        uint8
	OmitHash bool
	Prompt   uint8 // the consumes' prompt (index into MediaPrompts)
}

// List returns the plan's items.
func (p *MediaPlan) List() []MediaItem { return p.items[:p.N] }

// drawMedia draws a client's media from the media stream: one item (80%)
// or two, each from the pool in one of the encodings; a publish without
// content hashes (6%, whose items carry no uuid); a shared uuid on an item
// (6%); a video or audio item (1%).
func (w *World) drawMedia() MediaPlan {
	m := &w.Media
	p := MediaPlan{N: 1, Prompt: m.intN(len(MediaPrompts)), OmitHash: m.chance(0.15)}
	if m.chance(0.2) {
		p.N = 2
	}
	for i := range p.List() {
		it := MediaItem{Img: m.intN(len(MediaPool)), Enc: m.intN(len(mediaEncodings))}
		if !p.OmitHash && m.chance(0.2) {
			it.Uuid = 1 + m.intN(len(MediaUUIDs)-1)
		}
		if m.chance(0.01) {
			it.Modality = 1 + m.intN(2)
		}
		p.items[i] = it
	}
	return p
}

// PublishedMedia is an entry's items as the producer published them, with
// the content hash it computed for each ("" when the publish omitted it).
type PublishedMedia struct {
	Entry  string
	Items  []MediaItem
	Hashes []string
	Buf    [2]string // hashes' backing array
}

// MediaAnswer is one successful consume's answer, with what it was asked.
type MediaAnswer struct {
	Pm       *PublishedMedia // what was consumed
	Answer   uint64
	Consumer int32
	Inc      int32 // the consumer's incarnation
	Prompt   uint8
}

// CacheKey is a prefix-cache key of one consumer incarnation: the
// consumers' caches share one map (a new incarnation starts cold).
type CacheKey struct {
	Consumer, Inc int32  // the consumer incarnation
	Key           string // lm's prefix key
}

// mediaWorld is the media state of one world: the stream, what was
// published and answered (the checkers' input), the consumers' caches, and
// the checkers' progress.
type mediaWorld struct {
	Pcg       rand.PCG            // the media stream (a value: no allocation per run)
	Published []*PublishedMedia   // in publication order
	arena     []PublishedMedia    // where published ones are allocated, a chunk at a time
	Answers   []MediaAnswer       // in answer order
	Cache     map[CacheKey]uint64 // the consumers' prefix caches: the answer by key
	Hits      int                 // answers the prefix caches gave
	// TokenIDs is sim/nodes' consumeMedia's buffer for a prompt's token
	// ids, reused from one consume to the next (lm's prefix key keeps
	// nothing of them; an array on the stack escaped, issue #16). It
	// starts in tokenBuf (TokenScratch), which holds the longest.
	TokenIDs []uint32
	tokenBuf [8]uint32

	// Checker state: how far each checker got, and what it saw: the first
	// published item of each pixel class (1 + 2*index into published +
	// item; 0: none yet) and of each distinct content hash.
	ModalitySeen, WireHashSeen, ContentHashSeen, AnswerSeen int
	ByPixels                                                [maxPoolImages]int32
	ByHash                                                  []ItemRef
}

// maxPoolImages bounds len(mediaPool).
const maxPoolImages = 16

// ItemRef is one published item: item i of an entry's media.
type ItemRef struct {
	Pm *PublishedMedia
	I  int
}

func (r ItemRef) String() string {
	return fmt.Sprintf("%s of entry %s", r.Pm.Items[r.I], Short(r.Pm.Entry))
}

// TokenScratch returns TokenIDs emptied: the world's own tokenBuf before
// the run's first consume (the TokenIDs of a run grew once or twice a run
// from nil).
func (m *mediaWorld) TokenScratch() []uint32 {
	if m.TokenIDs == nil {
		return m.tokenBuf[:0]
	}
	return m.TokenIDs[:0]
}

func newMediaWorld(seed uint64) mediaWorld {
	return mediaWorld{Pcg: *rand.NewPCG(seed, uint64(subMedia))}
}

// intN draws from [0, n) (n <= 256) from the media stream.
func (m *mediaWorld) intN(n int) uint8 { return uint8(m.Pcg.Uint64() % uint64(n)) }

// chance reports true with probability p, from the media stream.
func (m *mediaWorld) chance(p float64) bool { return float64(m.Pcg.Uint64()>>11)/(1<<53) < p }

// NewPublished allocates one publishedMedia from the arena.
func (m *mediaWorld) NewPublished(chunk int) *PublishedMedia {
	if len(m.arena) == cap(m.arena) {
		m.arena = make([]PublishedMedia, 0, max(chunk, 8))
	}
	m.arena = m.arena[:len(m.arena)+1]
	return &m.arena[len(m.arena)-1]
}

// AnswerOf is the answer to prompt over items' decoded content: the
// stand-in for the baseline's tokens (different content, different answer).
func AnswerOf(prompt uint8, items []MediaItem) uint64 {
	a := mix64(uint64(prompt)<<8 | uint64(len(items)))
	for _, it := range items {
		a = mix64(a ^ MediaPool[it.Img].Digest)
	}
	return a
}

// DescribeItems renders items for a failure message.
func DescribeItems(items []MediaItem) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = it.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
