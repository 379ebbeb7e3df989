package lm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/baton-dev/baton/internal/mix"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultMaxContextTokens bounds prompt + generated tokens, in tokens
	// (room for dozens of 196-row images).
	DefaultMaxContextTokens = 8192
	// DefaultMaxTokens is the generated-token budget when Request.MaxTokens is
	// 0, in tokens; natural answers (EOS) are almost always shorter.
	DefaultMaxTokens = 64
	// DefaultPrefixCacheEntries bounds the prefix cache, in entries (one
	// uint64 state plus a 64-byte key each).
	DefaultPrefixCacheEntries = 256
)

// FreshIdentityPrefix starts every identity Prefill draws for an image without
// content hash (H-2), followed by 32 hex digits (128 random bits).
const FreshIdentityPrefix = "fresh:"

// Config configures a Model. Zero values take the defaults above.
type Config struct {
	// Seed selects the model: different seeds give different answers.
	Seed uint64
	// MaxContextTokens bounds prompt tokens + generated tokens
	// (default DefaultMaxContextTokens).
	MaxContextTokens int
	// DefaultMaxTokens is used when Request.MaxTokens is 0 (default DefaultMaxTokens).
	DefaultMaxTokens uint32
	// PrefixCacheEntries bounds the LRU prefix cache, in entries
	// (0 = DefaultPrefixCacheEntries, < 0 = no cache).
	PrefixCacheEntries int
	// Rand supplies fresh identities for images without content hash (H-2),
	// 16 bytes per image, and nothing else (default crypto/rand.Reader).
	// Reads are serialised by the Model.
	Rand io.Reader
	// PrefixKey maps (prompt token ids with ImageID markers, one identity per
	// image in order) to a prefix-cache key (default DefaultPrefixKey, which
	// covers both). It is the injection point for deliberately broken engines
	// (conformance/mutants); a correct engine never keys by token ids alone.
	PrefixKey func(tokenIDs []uint32, imageIdentities []string) string
	// Mutants, when PrefixKey is nil, keys the prefix cache with
	// PrefixKeyWith under these switches (the conformance mutants of B-2
	// and H-2); the zero value is DefaultPrefixKey.
	Mutants Mutants
	// Architecture selects how images reach the language side (default
	// DecoderOnly).
	Architecture Architecture
}

// Architecture is how the language side reads the encoder output.
type Architecture uint8

// Architectures (the model presets of the language side).
const (
	// DecoderOnly is a decoder-only vision-language model: the image
	// embeddings are merged into the prompt at their markers and absorbed by
	// prefill (LLaVA, Qwen-VL).
	DecoderOnly Architecture = iota
	// EncoderDecoder is an encoder-decoder model (T5, BART, Whisper): prefill
	// absorbs the text only, and the cross-attention KV is computed once from
	// the encoder output (CrossAttention) and read by every decode step.
	EncoderDecoder
)

// ErrUnknownArchitecture: ArchitectureByName of a name it does not know.
var ErrUnknownArchitecture = errors.New("lm: unknown model architecture")

// ArchitectureByName maps "decoder-only" and "encoder-decoder" (the
// --model-architecture flag's values) to an Architecture. Errors:
// ErrUnknownArchitecture.
func ArchitectureByName(name string) (Architecture, error) {
	switch name {
	case "", "decoder-only":
		return DecoderOnly, nil
	case "encoder-decoder":
		return EncoderDecoder, nil
	}
	return 0, fmt.Errorf("%w: %q (want decoder-only or encoder-decoder)", ErrUnknownArchitecture, name)
}

// String is "encoder-decoder" for EncoderDecoder, "decoder-only" otherwise.
func (a Architecture) String() string {
	if a == EncoderDecoder {
		return "encoder-decoder"
	}
	return "decoder-only"
}

// Model is the toy language model. It is safe for concurrent use.
type Model struct {
	cfg  Config
	tag  uint64 // binds sessions to this seed and vocabulary
	root uint64 // state before any prompt token

	randMu sync.Mutex // guards cfg.Rand
	cache  *prefixCache
}

// New returns a Model for cfg, filling zero fields with the defaults.
func New(cfg Config) *Model {
	if cfg.MaxContextTokens <= 0 {
		cfg.MaxContextTokens = DefaultMaxContextTokens
	}
	if cfg.DefaultMaxTokens == 0 {
		cfg.DefaultMaxTokens = DefaultMaxTokens
	}
	if cfg.PrefixCacheEntries == 0 {
		cfg.PrefixCacheEntries = DefaultPrefixCacheEntries
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.PrefixKey == nil {
		cfg.PrefixKey = DefaultPrefixKey
		if m := cfg.Mutants; m != (Mutants{}) {
			cfg.PrefixKey = func(ids []uint32, identities []string) string { return PrefixKeyWith(ids, identities, m) }
		}
	}
	return &Model{
		cfg:   cfg,
		tag:   mix64(cfg.Seed^0x73657373696f6e^uint64(cfg.Architecture)<<56) ^ uint64(VocabSize()),
		root:  mix64(cfg.Seed ^ 0x726f6f74),
		cache: newPrefixCache(cfg.PrefixCacheEntries),
	}
}

// Request is one generation request. Prefill reads the prompt, images and
// stopping options; Decode reads only the stopping options.
type Request struct {
	// Prompt is the prompt text; "<image>" marks image positions. Exclusive
	// with TokenIDs (ErrInvalidInput), which gives the prompt as ids
	// (each < VocabSize(), else ErrTokenOutOfRange; ImageID marks images).
	Prompt string
	// TokenIDs is the prompt as token ids, instead of Prompt (see above).
	TokenIDs []uint32
	// Images are the encoder outputs, in marker order.
	Images []Image
	// MaxTokens bounds generated tokens (0 = Config.DefaultMaxTokens);
	// reaching it ends with FinishLength. MinTokens suppresses EOS, stop token
	// ids and stop texts until that many tokens were generated.
	MaxTokens, MinTokens uint32
	// StopTexts end the answer with FinishStop when the output text contains
	// one (non-empty, else ErrBadStopping); the match is cut from the output
	// unless IncludeStopInOutput.
	StopTexts []string
	// StopTokenIDs end the answer with FinishStop when generated; the token is
	// emitted only with IncludeStopInOutput.
	StopTokenIDs []uint32
	// IgnoreEOS keeps decoding past EOSID: the answer then ends only by a
	// stop token id, a stop text or FinishLength.
	IgnoreEOS bool
	// IncludeStopInOutput emits the matched stop token id, or keeps the
	// matched stop text in the output.
	IncludeStopInOutput bool
}

// Prefill validates req, expands its prompt (text tokens plus Rows positions
// per image), and computes the model state, reusing the prefix cache when
// Config.PrefixKey(token ids, image identities) hits. Errors (all before any
// state is computed): ErrInvalidInput, ErrTokenOutOfRange, ErrBadImage,
// ErrImageMarkers, ErrEmptyPrompt, ErrContextTooLong, ErrBadStopping,
// ErrIdentity.
func (m *Model) Prefill(req Request) (*Session, error) {
	if err := validateStopping(req); err != nil {
		return nil, err
	}
	ids, err := promptIDs(req)
	if err != nil {
		return nil, err
	}
	for i, img := range req.Images {
		if err := img.validate(); err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
	}
	ids, promptTokens, err := placeImages(ids, req.Images)
	if err != nil {
		return nil, err
	}
	if promptTokens == 0 {
		return nil, ErrEmptyPrompt
	}
	if promptTokens >= uint64(m.cfg.MaxContextTokens) {
		return nil, fmt.Errorf("%w: %d prompt tokens, context %d", ErrContextTooLong, promptTokens, m.cfg.MaxContextTokens)
	}
	identities, err := m.identities(req.Images)
	if err != nil {
		return nil, err
	}
	s := &Session{modelTag: m.tag, promptTokens: uint32(promptTokens), imageCount: uint32(len(req.Images))}
	key := m.cfg.PrefixKey(ids, identities)
	if m.cfg.Architecture == EncoderDecoder {
		s.cross = CrossAttention(req.Images)
	}
	if state, ok := m.cache.get(key); ok {
		s.state, s.prefixCacheHit = state, true
		return s, nil
	}
	s.state = m.prefillState(ids, req.Images)
	m.cache.put(key, s.state)
	return s, nil
}

// Architecture is the model's architecture (Config.Architecture).
func (m *Model) Architecture() Architecture { return m.cfg.Architecture }

// CrossAttention is the toy cross-attention KV of an encoder-decoder model:
// one uint64 absorbing each image's (rows, cols) and signature, in order. It
// is what Prefill computes from the encoder output for EncoderDecoder, once
// per call; every decode step of the session reads it.
func CrossAttention(images []Image) uint64 {
	kv := uint64(0x63726f7373) // "cross"
	for _, img := range images {
		kv = absorb(kv, uint64(img.Rows)<<32|uint64(img.Cols))
		for _, w := range signature(img) {
			kv = absorb(kv, w)
		}
	}
	return kv
}

// promptIDs returns the prompt's token ids, markers included.
func promptIDs(req Request) ([]uint32, error) {
	if len(req.TokenIDs) == 0 {
		return Tokenize(req.Prompt), nil
	}
	if req.Prompt != "" {
		return nil, ErrInvalidInput
	}
	for i, id := range req.TokenIDs {
		if int64(id) >= int64(VocabSize()) {
			return nil, fmt.Errorf("%w: token_ids[%d] = %d, vocabulary %d", ErrTokenOutOfRange, i, id, VocabSize())
		}
	}
	return req.TokenIDs, nil
}

// placeImages puts one ImageID per image before the prompt when it has no
// marker, and counts prompt positions: text tokens + sum of image rows.
func placeImages(ids []uint32, images []Image) ([]uint32, uint64, error) {
	markers := 0
	for _, id := range ids {
		if id == ImageID {
			markers++
		}
	}
	if markers == 0 && len(images) > 0 {
		placed := make([]uint32, 0, len(images)+len(ids))
		for range images {
			placed = append(placed, ImageID)
		}
		ids, markers = append(placed, ids...), len(images)
	}
	if markers != len(images) {
		return nil, 0, fmt.Errorf("%w: %d markers, %d images", ErrImageMarkers, markers, len(images))
	}
	n := uint64(len(ids) - markers)
	for _, img := range images {
		n += uint64(img.Rows)
	}
	return ids, n, nil
}

// identities returns each image's content hash, or a fresh random identity
// when it has none (H-2).
func (m *Model) identities(images []Image) ([]string, error) {
	out := make([]string, len(images))
	for i, img := range images {
		if img.ContentHash != "" {
			out[i] = img.ContentHash
			continue
		}
		var b [16]byte
		m.randMu.Lock()
		_, err := io.ReadFull(m.cfg.Rand, b[:])
		m.randMu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrIdentity, err)
		}
		out[i] = FreshIdentityPrefix + hex.EncodeToString(b[:])
	}
	return out, nil
}

// prefillState absorbs the prompt into the hash chain: a text token absorbs
// its id; a marker absorbs imageTag, (rows, cols) and the image's signature.
func (m *Model) prefillState(ids []uint32, images []Image) uint64 {
	state := m.root
	next := 0
	for _, id := range ids {
		if id != ImageID {
			state = absorb(state, uint64(id))
			continue
		}
		img := images[next]
		next++
		state = absorb(state, imageTag)
		if m.cfg.Architecture == EncoderDecoder {
			continue // the image reaches the decoder through CrossAttention
		}
		state = absorb(state, uint64(img.Rows)<<32|uint64(img.Cols))
		for _, w := range signature(img) {
			state = absorb(state, w)
		}
	}
	return state
}

// imageTag is absorbed before an image; token ids are < 2^32, so it differs
// from every token.
const imageTag uint64 = 1 << 40

// mix64 is the splitmix64 finalizer, a bijection on uint64 (internal/mix).
func mix64(x uint64) uint64 { return mix.Mix64(x) }

// absorb is one link of the hash chain: order-sensitive in its inputs.
func absorb(state, x uint64) uint64 {
	return mix64(state ^ mix64(x+0x9e3779b97f4a7c15))
}
