package handoff

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Limits on a reference (CONTRACT L-1, SU-4, SU-5).
const (
	// MaxOpaqueStateBytes bounds EncoderCacheRef.opaque_state (CONTRACT L-1, WIRE.md: 65,536 bytes).
	MaxOpaqueStateBytes = 65536
	// MaxDecodePreparationBytes bounds a decode preparation (CONTRACT L-1: 2 MiB).
	MaxDecodePreparationBytes = 2 << 20
	// MaxReferenceDepth is the deepest JSON nesting an opaque state may have
	// (object -> items array -> item object = 3); deeper is SU-4.
	MaxReferenceDepth = 3
	// MaxReferenceItems bounds the items of one reference (one per image of a request).
	MaxReferenceItems = 64
	// MaxItemBytes bounds one item's tensor, rows*cols*4 bytes (256 MiB), so a
	// forged size cannot make a consumer reserve absurd buffers.
	MaxItemBytes = 256 << 20
	// ReferenceVersion is the version of the opaque-state format below.
	ReferenceVersion = 1
)

// lowerHex reports whether s is n lowercase hex digits. (A loop, not a
// regexp: the simulator checks ids on every step.)
func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ValidEntryID reports whether id is 32 lowercase hex digits: 128 random bits (CONTRACT SU-5).
func ValidEntryID(id string) bool { return lowerHex(id, 32) }

// ValidInstanceID reports whether id is a lowercase UUID string
// (8-4-4-4-12 lowercase hex digits), the form of every baton instance id
// (GetServerInfo.instance_id).
func ValidInstanceID(id string) bool {
	return len(id) == 36 && id[8] == '-' && id[13] == '-' && id[18] == '-' && id[23] == '-' &&
		lowerHex(id[0:8], 8) && lowerHex(id[9:13], 4) && lowerHex(id[14:18], 4) && lowerHex(id[19:23], 4) && lowerHex(id[24:], 12)
}

// ValidContentHash reports whether h is 64 lowercase hex digits, the form of a
// content hash (CONTRACT H-1, H-3).
func ValidContentHash(h string) bool { return lowerHex(h, 64) }

// ItemMeta describes one encoded item inside a reference: its content hash
// (64 lowercase hex, CONTRACT H-1) and the shape of its embedding tensor,
// float32 [Rows, Cols].
type ItemMeta struct {
	ContentHash string `json:"hash"`
	Rows        uint32 `json:"rows"`
	Cols        uint32 `json:"cols"`
}

// PayloadBytes is the item's tensor size in bytes (float32: Rows*Cols*4).
func (m ItemMeta) PayloadBytes() int64 { return int64(m.Rows) * int64(m.Cols) * 4 }

// Reference is the decoded opaque state of an EncoderCacheRef together with the
// outer fields it is bound to. The opaque state is JSON (the reference engine
// declares this format in its profile, so a black-box harness can corrupt the
// hash field for H-3):
//
//	{"v":1,"id":"<32 hex>","exp":<unix ms>,"items":[{"hash":"<64 hex>","rows":N,"cols":M}],"tag":"<64 hex>"}
//
// tag is HMAC-SHA256, under the producer instance's key, over the backend, the
// producer instance id, id, exp and the items (see signedBytes). A reference
// never carries a path (CONTRACT SU-5).
type Reference struct {
	Backend            string
	ProducerInstanceID string
	EntryID            string
	ExpiresUnixMs      int64
	Items              []ItemMeta
	Tag                string
}

// wireReference is the JSON shape of the opaque state.
type wireReference struct {
	Version       *int       `json:"v"`
	EntryID       *string    `json:"id"`
	ExpiresUnixMs *int64     `json:"exp"`
	Items         []ItemMeta `json:"items"`
	Tag           *string    `json:"tag"`
}

// PayloadBytes is the total tensor size of all items in bytes.
func (r Reference) PayloadBytes() int64 {
	var n int64
	for _, it := range r.Items {
		n += it.PayloadBytes()
	}
	return n
}

// signedBytes is the canonical byte string the tag covers.
func (r Reference) signedBytes() []byte {
	var b strings.Builder
	b.WriteString("baton.encoder.v1/reference\x00")
	b.WriteString(r.Backend)
	b.WriteByte(0)
	b.WriteString(r.ProducerInstanceID)
	b.WriteByte(0)
	b.WriteString(r.EntryID)
	b.WriteByte(0)
	b.WriteString(strconv.FormatInt(r.ExpiresUnixMs, 10))
	for _, it := range r.Items {
		fmt.Fprintf(&b, "\x00%s:%d:%d", it.ContentHash, it.Rows, it.Cols)
	}
	return []byte(b.String())
}

func (r Reference) computeTag(key []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(r.signedBytes())
	return hex.EncodeToString(mac.Sum(nil))
}

// Seal computes the tag under key and returns the opaque state bytes
// (at most a few KiB for MaxReferenceItems items, far under MaxOpaqueStateBytes).
func (r Reference) Seal(key []byte) []byte {
	r.Tag = r.computeTag(key)
	v := ReferenceVersion
	out, err := json.Marshal(wireReference{Version: &v, EntryID: &r.EntryID, ExpiresUnixMs: &r.ExpiresUnixMs, Items: r.Items, Tag: &r.Tag})
	if err != nil {
		panic(fmt.Sprintf("handoff: marshal reference: %v", err)) // cannot happen: plain types
	}
	return out
}

// ParseReference decodes and validates a reference without verifying its tag.
// Errors, in the contract's precedence: ErrTooLarge (L-1: opaque state over
// MaxOpaqueStateBytes), ErrMalformedReference (SU-4: not JSON, wrong types,
// unknown or missing fields, nesting over MaxReferenceDepth, bad version or
// shape), ErrMalformedHash (H-3), ErrForeignReference (SU-5: an id that is
// not 32 hex digits, a producer instance id that is not a UUID; a caller
// checks N-1 and SE-3, which come between, before reporting it).
//
// maxBytes is the L-1 bound (0 means MaxOpaqueStateBytes, the contract's).
func ParseReference(backend, producerInstanceID string, opaque []byte, maxBytes int) (Reference, error) {
	if maxBytes <= 0 {
		maxBytes = MaxOpaqueStateBytes
	}
	if len(opaque) > maxBytes {
		return Reference{}, rejectf(ErrTooLarge, "L-1 opaque_state is %d bytes, limit %d", len(opaque), maxBytes)
	}
	if len(opaque) == 0 {
		return Reference{}, rejectf(ErrMalformedReference, "SU-4 opaque_state is empty")
	}
	if d := jsonDepth(opaque); d > MaxReferenceDepth {
		return Reference{}, rejectf(ErrMalformedReference, "SU-4 opaque_state nests %d deep, limit %d", d, MaxReferenceDepth)
	}
	if err := exactKeys(opaque); err != nil {
		return Reference{}, rejectf(ErrMalformedReference, "SU-4 opaque_state: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(opaque))
	dec.DisallowUnknownFields()
	var w wireReference
	if err := dec.Decode(&w); err != nil {
		return Reference{}, rejectf(ErrMalformedReference, "SU-4 opaque_state: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Reference{}, rejectf(ErrMalformedReference, "SU-4 opaque_state has trailing data")
	}
	if w.Version == nil || w.EntryID == nil || w.ExpiresUnixMs == nil || w.Tag == nil || w.Items == nil {
		return Reference{}, rejectf(ErrMalformedReference, "SU-4 opaque_state lacks a required field (v, id, exp, items, tag)")
	}
	if *w.Version != ReferenceVersion {
		return Reference{}, rejectf(ErrMalformedReference, "SU-4 opaque_state version %d, want %d", *w.Version, ReferenceVersion)
	}
	if len(w.Items) == 0 || len(w.Items) > MaxReferenceItems {
		return Reference{}, rejectf(ErrMalformedReference, "SU-4 reference has %d items, want 1..%d", len(w.Items), MaxReferenceItems)
	}
	if !ValidContentHash(*w.Tag) {
		return Reference{}, rejectf(ErrMalformedReference, "SU-4 tag is not 64 lowercase hex digits")
	}
	for i, it := range w.Items { // SU-4 before H-3 (CONTRACT "which code wins")
		if it.Rows == 0 || it.Cols == 0 || it.PayloadBytes() > MaxItemBytes {
			return Reference{}, rejectf(ErrMalformedReference, "SU-4 item %d shape [%d, %d] out of range", i, it.Rows, it.Cols)
		}
	}
	for i, it := range w.Items {
		// An empty hash is a missing one: the consumer gives the item a
		// fresh identity (H-2). Anything else must be a content hash (H-3).
		if it.ContentHash != "" && !ValidContentHash(it.ContentHash) {
			return Reference{}, rejectf(ErrMalformedHash, "H-3 item %d content hash %.70q is not 64 lowercase hex digits", i, it.ContentHash)
		}
	}
	// SU-5 after H-3: an id that is not one addresses nothing of the producer's.
	if !ValidEntryID(*w.EntryID) {
		return Reference{}, rejectf(ErrForeignReference, "SU-5 entry id %.40q is not 32 lowercase hex digits", *w.EntryID)
	}
	if !ValidInstanceID(producerInstanceID) {
		return Reference{}, rejectf(ErrForeignReference, "SU-5 producer_instance_id %.40q is not an instance id", producerInstanceID)
	}
	return Reference{
		Backend:            backend,
		ProducerInstanceID: producerInstanceID,
		EntryID:            *w.EntryID,
		ExpiresUnixMs:      *w.ExpiresUnixMs,
		Items:              w.Items,
		Tag:                *w.Tag,
	}, nil
}

// Verify checks the tag under the producer instance's key (constant time).
// A mismatch is ErrForeignReference (SU-5): forged, altered, or bound to
// another instance or backend.
func (r Reference) Verify(key []byte) error {
	want := r.computeTag(key)
	if !hmac.Equal([]byte(want), []byte(r.Tag)) {
		return rejectf(ErrForeignReference, "SU-5 reference tag does not verify for producer %s", r.ProducerInstanceID)
	}
	return nil
}

// Expired reports whether the reference's TTL has passed at nowUnixMs.
func (r Reference) Expired(nowUnixMs int64) bool { return nowUnixMs >= r.ExpiresUnixMs }

// jsonDepth returns the deepest nesting of objects and arrays in b, ignoring
// brackets inside strings. It does not validate JSON.
func jsonDepth(b []byte) int {
	depth, maxDepth := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > maxDepth {
				maxDepth = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return maxDepth
}

// exactKeys checks the opaque state's object keys exactly: Go's JSON decoder
// matches keys case-insensitively and lets a duplicate key win silently, and
// neither is the declared format (SU-4).
func exactKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	top := map[string]bool{"v": true, "id": true, "exp": true, "items": true, "tag": true}
	item := map[string]bool{"hash": true, "rows": true, "cols": true}
	var object func(allowed map[string]bool, inner func(key string) error) error
	object = func(allowed map[string]bool, inner func(key string) error) error {
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return fmt.Errorf("want an object")
		}
		seen := map[string]bool{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := t.(string)
			if !allowed[key] {
				return fmt.Errorf("unknown key %.20q", key)
			}
			if seen[key] {
				return fmt.Errorf("duplicate key %q", key)
			}
			seen[key] = true
			if err := inner(key); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	}
	skip := func(string) error { var v json.RawMessage; return dec.Decode(&v) }
	return object(top, func(key string) error {
		if key != "items" {
			return skip(key)
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return fmt.Errorf("items is not an array")
		}
		for dec.More() {
			if err := object(item, skip); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	})
}
