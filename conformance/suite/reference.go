package suite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// FormatBatonJSONv1 is the reference format a profile may declare in
// Profile.ReferenceFormat: opaque_state is the JSON object
//
//	{"v":1,"id":"<32 hex>","exp":<unix ms>,"items":[{"hash":"<64 hex>","rows":N,"cols":M}],"tag":"<64 hex>"}
//
// where tag is an HMAC over the backend, producer_instance_id, id, exp and
// items, so any edit makes the reference forged; an item's embeddings are
// float32 [rows, cols]. Cases that corrupt a field (SU-5, H-3, the L-1
// padding check) need it declared, and are `not verifiable` otherwise.
const FormatBatonJSONv1 = "baton-json-v1"

// Size limits of CONTRACT L-1 (WIRE.md).
const (
	// maxReferenceBytes is the largest legal opaque_state (65,536 bytes).
	maxReferenceBytes = 65536
	// maxDecodePreparationBytes is the largest legal decode preparation (2 MiB).
	maxDecodePreparationBytes = 2 << 20
	// maxReferenceDepth is the deepest legal nesting of a baton-json-v1
	// opaque state (object -> items array -> item object).
	maxReferenceDepth = 3
)

// errRefFormat is wrapped by every error of the reference-format helpers:
// the opaque state is not a baton-json-v1 object.
var errRefFormat = errors.New("opaque_state is not a baton-json-v1 object")

// entryIDPattern is the form of a baton-json-v1 id: 32 lowercase hex
// digits, 128 random bits (CONTRACT SU-5).
var entryIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// parseRef decodes a baton-json-v1 opaque state into a generic object,
// keeping numbers exact (json.Number). Errors wrap errRefFormat.
func parseRef(opaque []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(opaque))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", errRefFormat, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: null", errRefFormat)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data", errRefFormat)
	}
	return m, nil
}

// marshalRef encodes a generic object compactly. Key order is not
// significant in JSON (encoding/json sorts map keys).
func marshalRef(m map[string]any) []byte {
	out, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("suite: marshal reference: %v", err)) // generic JSON values always marshal
	}
	return out
}

// refID returns the "id" string of a baton-json-v1 opaque state.
func refID(opaque []byte) (string, error) {
	m, err := parseRef(opaque)
	if err != nil {
		return "", err
	}
	id, ok := m["id"].(string)
	if !ok {
		return "", fmt.Errorf("%w: id is %T, want a string", errRefFormat, m["id"])
	}
	return id, nil
}

// refItems returns the "items" array of a baton-json-v1 opaque state.
func refItems(m map[string]any) ([]any, error) {
	items, ok := m["items"].([]any)
	if !ok {
		return nil, fmt.Errorf("%w: items is %T, want an array", errRefFormat, m["items"])
	}
	return items, nil
}

// refPayloadBytes returns the embedding bytes a baton-json-v1 reference
// describes: the sum over items of rows*cols*4 (float32).
func refPayloadBytes(opaque []byte) (int64, error) {
	m, err := parseRef(opaque)
	if err != nil {
		return 0, err
	}
	items, err := refItems(m)
	if err != nil {
		return 0, err
	}
	var total int64
	for i, it := range items {
		obj, ok := it.(map[string]any)
		if !ok {
			return 0, fmt.Errorf("%w: item %d is %T, want an object", errRefFormat, i, it)
		}
		rows, err1 := jsonInt(obj["rows"])
		cols, err2 := jsonInt(obj["cols"])
		if err := errors.Join(err1, err2); err != nil {
			return 0, fmt.Errorf("%w: item %d: %v", errRefFormat, i, err)
		}
		total += rows * cols * 4
	}
	return total, nil
}

func jsonInt(v any) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%v is %T, want a number", v, v)
	}
	return n.Int64()
}

// refWith returns opaque with the top-level field key set to value (any
// JSON-encodable value); the other fields are kept.
func refWith(opaque []byte, key string, value any) ([]byte, error) {
	m, err := parseRef(opaque)
	if err != nil {
		return nil, err
	}
	m[key] = value
	return marshalRef(m), nil
}

// refWithout returns opaque with the top-level field key removed.
func refWithout(opaque []byte, key string) ([]byte, error) {
	m, err := parseRef(opaque)
	if err != nil {
		return nil, err
	}
	if _, ok := m[key]; !ok {
		return nil, fmt.Errorf("%w: no field %q", errRefFormat, key)
	}
	delete(m, key)
	return marshalRef(m), nil
}

// refWithItemHash returns opaque with items[i].hash set to hash (H-3).
func refWithItemHash(opaque []byte, i int, hash string) ([]byte, error) {
	m, err := parseRef(opaque)
	if err != nil {
		return nil, err
	}
	items, err := refItems(m)
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= len(items) {
		return nil, fmt.Errorf("%w: no item %d (%d items)", errRefFormat, i, len(items))
	}
	obj, ok := items[i].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: item %d is %T, want an object", errRefFormat, i, items[i])
	}
	obj["hash"] = hash
	return marshalRef(m), nil
}

// refWithTagAltered returns opaque with one hex digit of its tag changed
// (still 64 lowercase hex digits): a well-formed imitation whose tag no
// longer verifies (SU-4, SU-5).
func refWithTagAltered(opaque []byte) ([]byte, error) {
	m, err := parseRef(opaque)
	if err != nil {
		return nil, err
	}
	tag, ok := m["tag"].(string)
	if !ok || tag == "" {
		return nil, fmt.Errorf("%w: tag is %T %v, want a non-empty string", errRefFormat, m["tag"], m["tag"])
	}
	m["tag"] = flipHexDigit(tag, len(tag)/2)
	return marshalRef(m), nil
}

// flipHexDigit returns s with the hex digit at i replaced by a different
// lowercase hex digit ('0' becomes '1', anything else '0').
func flipHexDigit(s string, i int) string {
	b := []byte(s)
	if b[i] == '0' {
		b[i] = '1'
	} else {
		b[i] = '0'
	}
	return string(b)
}

// refNested returns opaque with its tag wrapped in depth-1 arrays, so the
// document nests depth deep (object + depth-1 arrays); depth must be at
// least 2. maxReferenceDepth+1 is the smallest illegal depth (SU-4).
func refNested(opaque []byte, depth int) ([]byte, error) {
	if depth < 2 {
		return nil, fmt.Errorf("suite: refNested depth %d, want >= 2", depth)
	}
	m, err := parseRef(opaque)
	if err != nil {
		return nil, err
	}
	var v any = m["tag"]
	for i := 1; i < depth; i++ {
		v = []any{v}
	}
	m["tag"] = v
	return marshalRef(m), nil
}

// padRef returns opaque padded with JSON whitespace after its opening
// brace to exactly totalBytes bytes: the same reference, legal JSON, and
// exactly as long as wanted (L-1). It fails when opaque is not a JSON
// object or is already longer than totalBytes.
func padRef(opaque []byte, totalBytes int) ([]byte, error) {
	if _, err := parseRef(opaque); err != nil {
		return nil, err
	}
	brace := bytes.IndexByte(opaque, '{')
	if brace < 0 {
		return nil, fmt.Errorf("%w: no opening brace", errRefFormat)
	}
	if len(opaque) > totalBytes {
		return nil, fmt.Errorf("suite: reference is %d bytes, cannot pad to %d", len(opaque), totalBytes)
	}
	out := make([]byte, 0, totalBytes)
	out = append(out, opaque[:brace+1]...)
	out = append(out, bytes.Repeat([]byte{' '}, totalBytes-len(opaque))...)
	out = append(out, opaque[brace+1:]...)
	return out, nil
}

// jsonDepth returns the deepest nesting of objects and arrays in b,
// ignoring brackets inside strings. It does not validate JSON.
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
			maxDepth = max(maxDepth, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return maxDepth
}

// malformedVariant is one malformed imitation of a valid reference (SU-4).
type malformedVariant struct {
	name   string // what is wrong, for messages ("tag altered")
	opaque []byte
}

// malformedOpaques returns malformed imitations of the valid opaque state
// valid (SU-4). The black-box variants (any format): empty, garbage, NUL
// bytes, a JSON null, a JSON array. With the baton-json-v1 format declared
// (jsonFormat), also: wrong types for v, id, exp, items and tag, a missing
// tag, trailing data, nesting one deeper than the limit and 64 deep.
// Well-formed alterations of a valid reference (a byte flipped, a
// truncation, an altered tag) are SU-5's (tamperedOpaques). It fails only
// when jsonFormat is set and valid does not parse as the format (the
// target broke its own declaration).
func malformedOpaques(valid []byte, jsonFormat bool) ([]malformedVariant, error) {
	vs := []malformedVariant{
		{"empty", []byte{}},
		{"64 garbage bytes", pseudoBytes("SU-4 garbage", 64)},
		{"32 NUL bytes", make([]byte, 32)},
		{"JSON null", []byte("null")},
		{"JSON array", []byte("[]")},
	}
	if !jsonFormat {
		return vs, nil
	}
	type edit struct {
		name string
		fn   func() ([]byte, error)
	}
	edits := []edit{
		{"v is a string", func() ([]byte, error) { return refWith(valid, "v", "1") }},
		{"id is a number", func() ([]byte, error) { return refWith(valid, "id", 12345) }},
		{"exp is a string", func() ([]byte, error) { return refWith(valid, "exp", "later") }},
		{"items is an object", func() ([]byte, error) { return refWith(valid, "items", map[string]any{}) }},
		{"items is empty", func() ([]byte, error) { return refWith(valid, "items", []any{}) }},
		{"tag is a number", func() ([]byte, error) { return refWith(valid, "tag", 7) }},
		{"tag missing", func() ([]byte, error) { return refWithout(valid, "tag") }},
		{"trailing data", func() ([]byte, error) { return append(append([]byte(nil), valid...), []byte(`{}`)...), nil }},
		{fmt.Sprintf("nesting %d deep", maxReferenceDepth+1), func() ([]byte, error) { return refNested(valid, maxReferenceDepth+1) }},
		{"nesting 64 deep", func() ([]byte, error) { return refNested(valid, 64) }},
	}
	for _, e := range edits {
		op, err := e.fn()
		if err != nil {
			return nil, fmt.Errorf("building variant %q: %w", e.name, err)
		}
		vs = append(vs, malformedVariant{e.name, op})
	}
	return vs, nil
}
