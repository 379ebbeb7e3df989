package suite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// FormatBatonJSONv1 is the reference format a profile may declare in
// Profile.ReferenceFormat (docs/implementing.md section 4.2): opaque_state
// is exactly the bytes
//
//	{"v":1,"id":"<id>","exp":<unix ms>,"items":[{"hash":"<hash>","rows":N,"cols":M},...],"tag":"<64 hex>"}
//
// in this key order, without whitespace or escapes, where tag is an HMAC
// under the producer's key over the backend, producer_instance_id,
// producer_endpoint and every byte before `,"tag":"`, so any edit makes
// the reference forged (SU-5) and any other spelling malformed (SU-4); an
// item's embeddings are float32 [rows, cols]. Cases that edit one field
// (SU-5 confinement, H-3) need it declared, and are `not verifiable`
// otherwise. This codec is the harness's own, written from the document,
// not from an engine.
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
// the opaque state is not a baton-json-v1 reference.
var errRefFormat = errors.New("opaque_state is not a baton-json-v1 reference")

// entryIDPattern is the form of a baton-json-v1 id: 32 lowercase hex
// digits, 128 random bits (CONTRACT SU-5).
var entryIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// The baton-json-v1 grammar as regular expressions: strings are printable
// ASCII without '"' and '\', numbers canonical decimals.
const (
	refStr  = `[\x20\x21\x23-\x5b\x5d-\x7e]*`
	refUint = `(?:0|[1-9][0-9]*)`
	refItem = `\{"hash":"` + refStr + `","rows":` + refUint + `,"cols":` + refUint + `\}`
)

var (
	refPattern = regexp.MustCompile(`^\{"v":1,"id":"(` + refStr + `)","exp":(-?` + refUint + `),"items":\[(` + refItem + `(?:,` + refItem + `)*)\],"tag":"([0-9a-f]{64})"\}$`)
	refItemRe  = regexp.MustCompile(`\{"hash":"(` + refStr + `)","rows":(` + refUint + `),"cols":(` + refUint + `)\}`)
)

// jsonRef is a decoded baton-json-v1 opaque state.
type jsonRef struct {
	ID    string
	Exp   int64
	Items []jsonRefItem
	Tag   string
}

// jsonRefItem is one item: content hash and float32 tensor shape.
type jsonRefItem struct {
	Hash       string
	Rows, Cols uint32
}

// decodeRef reads opaque as baton-json-v1, byte for byte. Errors wrap
// errRefFormat.
func decodeRef(opaque []byte) (jsonRef, error) {
	m := refPattern.FindSubmatch(opaque)
	if m == nil {
		return jsonRef{}, fmt.Errorf("%w: %.80q does not match the format's bytes", errRefFormat, opaque)
	}
	exp, err := strconv.ParseInt(string(m[2]), 10, 64)
	if err != nil || string(m[2]) == "-0" {
		return jsonRef{}, fmt.Errorf("%w: exp %.30s", errRefFormat, m[2])
	}
	r := jsonRef{ID: string(m[1]), Exp: exp, Tag: string(m[4])}
	for _, im := range refItemRe.FindAllSubmatch(m[3], -1) {
		rows, err1 := strconv.ParseUint(string(im[2]), 10, 32)
		cols, err2 := strconv.ParseUint(string(im[3]), 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return jsonRef{}, fmt.Errorf("%w: item %d shape: %v", errRefFormat, len(r.Items), err)
		}
		r.Items = append(r.Items, jsonRefItem{Hash: string(im[1]), Rows: uint32(rows), Cols: uint32(cols)})
	}
	return r, nil
}

// refField is one top-level field of an opaque state being re-encoded:
// its key and raw JSON value.
type refField struct{ key, raw string }

// fields returns r's fields in the format's order, values canonical.
func (r jsonRef) fields() []refField {
	items := make([]string, len(r.Items))
	for i, it := range r.Items {
		items[i] = `{"hash":"` + it.Hash + `","rows":` + strconv.FormatUint(uint64(it.Rows), 10) + `,"cols":` + strconv.FormatUint(uint64(it.Cols), 10) + `}`
	}
	return []refField{
		{"v", "1"},
		{"id", `"` + r.ID + `"`},
		{"exp", strconv.FormatInt(r.Exp, 10)},
		{"items", "[" + strings.Join(items, ",") + "]"},
		{"tag", `"` + r.Tag + `"`},
	}
}

// encodeFields writes fields as a compact JSON object in their order.
func encodeFields(fs []refField) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + f.key + `":` + f.raw)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// rawJSON is value as compact JSON without HTML escaping.
func rawJSON(value any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(value); err != nil {
		return "", fmt.Errorf("suite: encode %T: %w", value, err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// refID returns the id of a baton-json-v1 opaque state.
func refID(opaque []byte) (string, error) {
	r, err := decodeRef(opaque)
	return r.ID, err
}

// refIDLoose returns the string after the first `"id":"` of opaque, up to
// the next '"', whether or not the rest is the format: a label for messages
// about altered references (refLabel), never a decision.
func refIDLoose(opaque []byte) (string, bool) {
	_, rest, ok := bytes.Cut(opaque, []byte(`"id":"`))
	if !ok {
		return "", false
	}
	id, _, ok := bytes.Cut(rest, []byte(`"`))
	return string(id), ok
}

// refPayloadBytes returns the embedding bytes a baton-json-v1 reference
// describes: the sum over items of rows*cols*4 (float32).
func refPayloadBytes(opaque []byte) (int64, error) {
	r, err := decodeRef(opaque)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, it := range r.Items {
		total += int64(it.Rows) * int64(it.Cols) * 4
	}
	return total, nil
}

// refWith returns opaque with the top-level field key set to value (any
// JSON-encodable value), the other fields and the tag kept, in the
// format's order. A string value the format can hold (another entry's id,
// a path) gives a well-formed reference the tag no longer covers (SU-5);
// another type gives a malformed one (SU-4).
func refWith(opaque []byte, key string, value any) ([]byte, error) {
	r, err := decodeRef(opaque)
	if err != nil {
		return nil, err
	}
	raw, err := rawJSON(value)
	if err != nil {
		return nil, err
	}
	fs := r.fields()
	for i := range fs {
		if fs[i].key == key {
			fs[i].raw = raw
			return encodeFields(fs), nil
		}
	}
	return nil, fmt.Errorf("%w: no field %q", errRefFormat, key)
}

// refWithout returns opaque with the top-level field key removed (SU-4).
func refWithout(opaque []byte, key string) ([]byte, error) {
	r, err := decodeRef(opaque)
	if err != nil {
		return nil, err
	}
	fs := r.fields()
	for i := range fs {
		if fs[i].key == key {
			return encodeFields(append(fs[:i], fs[i+1:]...)), nil
		}
	}
	return nil, fmt.Errorf("%w: no field %q", errRefFormat, key)
}

// refWithItemHash returns opaque with items[i].hash set to hash and every
// other byte kept: a malformed hash that the grammar still holds reaches
// H-3 (which the contract's order puts before SU-5's tag check).
func refWithItemHash(opaque []byte, i int, hash string) ([]byte, error) {
	r, err := decodeRef(opaque)
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= len(r.Items) {
		return nil, fmt.Errorf("%w: no item %d (%d items)", errRefFormat, i, len(r.Items))
	}
	r.Items[i].Hash = hash
	return encodeFields(r.fields()), nil
}

// refWithTagAltered returns opaque with one hex digit of its tag changed
// (still 64 lowercase hex digits): a well-formed imitation whose tag no
// longer verifies (SU-5).
func refWithTagAltered(opaque []byte) ([]byte, error) {
	r, err := decodeRef(opaque)
	if err != nil {
		return nil, err
	}
	r.Tag = flipHexDigit(r.Tag, len(r.Tag)/2)
	return encodeFields(r.fields()), nil
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
	r, err := decodeRef(opaque)
	if err != nil {
		return nil, err
	}
	fs := r.fields()
	tag := &fs[len(fs)-1].raw
	*tag = strings.Repeat("[", depth-1) + *tag + strings.Repeat("]", depth-1)
	return encodeFields(fs), nil
}

// padRef returns opaque padded with JSON whitespace after its opening
// brace to exactly totalBytes bytes: the same JSON document, but no longer
// the reference's bytes (SU-4 for baton-json-v1, whose tag covers every
// byte), and past maxReferenceBytes an L-1 case. It fails when opaque is
// not a baton-json-v1 reference or is already longer than totalBytes.
func padRef(opaque []byte, totalBytes int) ([]byte, error) {
	if _, err := decodeRef(opaque); err != nil {
		return nil, err
	}
	if len(opaque) > totalBytes {
		return nil, fmt.Errorf("suite: reference is %d bytes, cannot pad to %d", len(opaque), totalBytes)
	}
	out := make([]byte, 0, totalBytes)
	out = append(out, '{')
	out = append(out, bytes.Repeat([]byte{' '}, totalBytes-len(opaque))...)
	return append(out, opaque[1:]...), nil
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
