package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
)

// DecodePreparationVersion is the "v" of the reference engine's decode
// preparation format.
const DecodePreparationVersion = 1

// DecodePreparation is what P hands D besides the KV session
// (PrefillReady.decode_preparation, then GenerateRequest.decode_preparation;
// at most handoff.MaxDecodePreparationBytes = 2 MiB, CONTRACT L-1). It is
// one JSON object, for example
//
//	{"v":1,"model":"baton-vlm-tiny","session_id":"<32 hex>","prompt_tokens":61,
//	 "items":[{"hash":"<64 hex>","rows":49}],"session_bytes":32,"session_sha256":"<64 hex>"}
//
// Every field is required (items may be empty for a text-only prefill) and
// no other field is allowed:
//
//   - v: DecodePreparationVersion.
//   - model: the served model name (ModelName); D refuses another model's.
//   - session_id: the KvSessionRef.session_id it belongs to; D refuses a
//     preparation of another session before fetching anything.
//   - prompt_tokens: usage.prompt_tokens of the prefill (text tokens plus
//     every image's rows, lm's expansion), >= 1, below the context window.
//     D checks the request's prompt against it and the fetched session.
//   - items: one per image in prompt order: its content hash (64 lowercase
//     hex digits; anything else is CONTRACT H-3, INVALID_ARGUMENT) and its
//     embedding rows (>= 1). Their count is the session's image count.
//   - session_bytes, session_sha256: the length (lm.SessionBytes) and
//     SHA-256 of the KV session's bytes; D verifies the fetched bytes.
type DecodePreparation struct {
	// Version is the format version, "v": DecodePreparationVersion.
	Version int `json:"v"`
	// Model is the served model name (ModelName), "model".
	Model string `json:"model"`
	// SessionID is the KvSessionRef.session_id the preparation belongs to,
	// "session_id".
	SessionID string `json:"session_id"`
	// PromptTokens is the prefill's usage.prompt_tokens (text tokens plus
	// every image's rows), >= 1, "prompt_tokens".
	PromptTokens uint32 `json:"prompt_tokens"`
	// Items is one entry per image in prompt order, "items"; empty for a
	// text-only prefill.
	Items []DecodePrepItem `json:"items"`
	// SessionBytes is the KV session's length in bytes (lm.SessionBytes),
	// "session_bytes".
	SessionBytes int `json:"session_bytes"`
	// SessionSHA256 is the SHA-256 of the KV session's bytes, 64 lowercase
	// hex digits, "session_sha256".
	SessionSHA256 string `json:"session_sha256"`
}

// DecodePrepItem is one image of a decode preparation.
type DecodePrepItem struct {
	// ContentHash is the image's content hash, 64 lowercase hex digits (H-1, H-3).
	ContentHash string `json:"hash"`
	// Rows is the image's embedding rows: its prompt positions.
	Rows uint32 `json:"rows"`
}

// Marshal encodes p as JSON.
func (p DecodePreparation) Marshal() []byte {
	b, _ := json.Marshal(p) // plain fields: never fails
	return b
}

// SessionDigest is the session_sha256 of session bytes b.
func SessionDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

var sha256HexPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// errMalformedPrep wraps every malformed decode preparation (CONTRACT L-2, INVALID_ARGUMENT).
var errMalformedPrep = errors.New("L-2 malformed decode preparation")

// ParseDecodePreparation checks a decode preparation's bytes (size is the
// caller's, L-1) and returns it. Errors (INVALID_ARGUMENT): a malformed
// one wraps handoff.ErrBadRequest (rule L-2): not one JSON object, an
// unknown or missing field, a wrong type or version, counts out of range;
// a malformed content hash wraps handoff.ErrMalformedHash (H-3).
func ParseDecodePreparation(b []byte) (DecodePreparation, error) {
	bad := func(format string, args ...any) (DecodePreparation, error) {
		return DecodePreparation{}, fmt.Errorf("%w: %w: %s", handoff.ErrBadRequest, errMalformedPrep, fmt.Sprintf(format, args...))
	}
	// Pointers tell a missing field from a zero one.
	var w struct {
		Version       *int             `json:"v"`
		Model         *string          `json:"model"`
		SessionID     *string          `json:"session_id"`
		PromptTokens  *uint32          `json:"prompt_tokens"`
		Items         *[]*prepItemWire `json:"items"`
		SessionBytes  *int             `json:"session_bytes"`
		SessionSHA256 *string          `json:"session_sha256"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return bad("%v", truncateErr(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("data after the JSON object")
	}
	switch {
	case w.Version == nil || w.Model == nil || w.SessionID == nil || w.PromptTokens == nil || w.Items == nil || w.SessionBytes == nil || w.SessionSHA256 == nil:
		return bad("a required field is missing (v, model, session_id, prompt_tokens, items, session_bytes, session_sha256)")
	case *w.Version != DecodePreparationVersion:
		return bad("v = %d, want %d", *w.Version, DecodePreparationVersion)
	case !kvSessionIDPattern.MatchString(*w.SessionID):
		return bad("session_id %.80q is not %d lowercase hex digits", *w.SessionID, kvSessionIDHexDigits)
	case *w.PromptTokens == 0 || *w.PromptTokens >= lm.DefaultMaxContextTokens:
		return bad("prompt_tokens %d (want 1..%d)", *w.PromptTokens, lm.DefaultMaxContextTokens-1)
	case len(*w.Items) > handoff.MaxReferenceItems:
		return bad("%d items (at most %d)", len(*w.Items), handoff.MaxReferenceItems)
	case *w.SessionBytes != lm.SessionBytes:
		return bad("session_bytes %d, want %d", *w.SessionBytes, lm.SessionBytes)
	case !sha256HexPattern.MatchString(*w.SessionSHA256):
		return bad("session_sha256 is not 64 lowercase hex digits")
	}
	p := DecodePreparation{
		Version: *w.Version, Model: *w.Model, SessionID: *w.SessionID, PromptTokens: *w.PromptTokens,
		SessionBytes: *w.SessionBytes, SessionSHA256: *w.SessionSHA256, Items: []DecodePrepItem{},
	}
	var rows uint64
	for i, it := range *w.Items {
		if it == nil || it.Hash == nil || it.Rows == nil {
			return bad("item %d lacks hash or rows", i)
		}
		// An empty hash is a missing one (H-2: the item had none); anything
		// else must be a content hash (H-3).
		if *it.Hash != "" && !handoff.ValidContentHash(*it.Hash) {
			return DecodePreparation{}, fmt.Errorf("%w: H-3 decode preparation item %d content hash %.80q is not 64 lowercase hex digits", handoff.ErrMalformedHash, i, *it.Hash)
		}
		if *it.Rows == 0 {
			return bad("item %d has 0 rows", i)
		}
		rows += uint64(*it.Rows)
		p.Items = append(p.Items, DecodePrepItem{ContentHash: *it.Hash, Rows: *it.Rows})
	}
	if rows > uint64(p.PromptTokens) {
		return bad("items hold %d rows, more than prompt_tokens %d", rows, p.PromptTokens)
	}
	return p, nil
}

// prepItemWire is one item of a decode preparation as decoded, fields optional.
type prepItemWire struct {
	Hash *string `json:"hash"`
	Rows *uint32 `json:"rows"`
}

// truncateErr shortens a decoder error for a message.
func truncateErr(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// decodePreparationFor builds P's decode preparation for a prefill of req
// whose session serialised to sessionBytes, held as session id.
func (e *Engine) decodePreparationFor(sessionID string, req lm.Request, promptTokens uint32, sessionBytes []byte) []byte {
	p := DecodePreparation{
		Version: DecodePreparationVersion, Model: ModelName(e.preset.Name), SessionID: sessionID,
		PromptTokens: promptTokens, Items: []DecodePrepItem{},
		SessionBytes: len(sessionBytes), SessionSHA256: SessionDigest(sessionBytes),
	}
	for _, im := range req.Images {
		p.Items = append(p.Items, DecodePrepItem{ContentHash: im.ContentHash, Rows: uint32(im.Rows)})
	}
	return p.Marshal()
}
