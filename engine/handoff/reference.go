package handoff

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"

	"github.com/baton-dev/baton/engine/internal/lowerhex"
)

// Limits on a reference (CONTRACT L-1, SU-4, SU-5).
const (
	// MaxOpaqueStateBytes bounds EncoderCacheRef.opaque_state (CONTRACT L-1, WIRE.md: 65,536 bytes).
	MaxOpaqueStateBytes = 65536
	// MaxDecodePreparationBytes bounds a decode preparation (CONTRACT L-1: 2 MiB).
	MaxDecodePreparationBytes = 2 << 20
	// MaxReferenceDepth is the deepest JSON nesting of a baton-json-v1 opaque
	// state (object -> items array -> item object = 3). The grammar of
	// ParseReference admits no other nesting, so anything deeper is SU-4.
	MaxReferenceDepth = 3
	// MaxReferenceItems bounds the items of one reference (one per image of a request).
	MaxReferenceItems = 64
	// MaxItemBytes bounds one item's tensor, rows*cols*4 bytes (256 MiB), so a
	// forged size cannot make a consumer reserve absurd buffers.
	MaxItemBytes = 256 << 20
	// ReferenceVersion is the version of the opaque-state format below.
	ReferenceVersion = 1
	// ReferenceFormat is the name a target profile declares for this format
	// (reference_format, docs/implementing.md section 4).
	ReferenceFormat = "baton-json-v1"
	// ReferenceTagDomain is the domain-separation string that opens the MAC
	// input of a reference's tag (see MACInput).
	ReferenceTagDomain = "baton.encoder.v1/baton-json-v1/tag"
)

// lowerHex reports whether s is n lowercase hex digits. (Not a regexp:
// the simulator checks ids on every step; lowerhex takes eight at a time.)
func lowerHex(s string, n int) bool { return len(s) == n && lowerhex.Is(s) }

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
// (64 lowercase hex, CONTRACT H-1; "" when the producer published none, H-2)
// and the shape of its embedding tensor, float32 [Rows, Cols].
type ItemMeta struct {
	ContentHash string `json:"hash"`
	Rows        uint32 `json:"rows"`
	Cols        uint32 `json:"cols"`
}

// PayloadBytes is the item's tensor size in bytes (float32: Rows*Cols*4).
func (m ItemMeta) PayloadBytes() int64 { return int64(m.Rows) * int64(m.Cols) * 4 }

// Endpoint is EncoderCacheRef.producer_endpoint (a KvEndpoint: host, port,
// protocol). An absent producer_endpoint is the zero Endpoint, as in proto3.
type Endpoint struct {
	Host     string
	Port     uint32
	Protocol string
}

// Reference is the decoded opaque state of an EncoderCacheRef together with
// the outer fields its tag is bound to. The opaque state is the
// baton-json-v1 format (docs/implementing.md section 4; the reference
// engine declares it in its profile, so a black-box harness can corrupt
// single fields for H-3 and SU-5). Its bytes are exactly
//
//	BODY ,"tag":"<64 lowercase hex>"}
//	BODY = {"v":1,"id":"<id>","exp":<exp>,"items":[{"hash":"<hash>","rows":<rows>,"cols":<cols>},...]
//
// with nothing before, between or after (no whitespace, no escapes, keys in
// this order): one byte string per Reference, so a reference is tamper-evident
// byte for byte. tag is HMAC-SHA256 under the producer instance's key over
// MACInput: the backend, the producer instance id, the producer endpoint and
// BODY (CONTRACT SU-5). A reference never carries a path.
type Reference struct {
	Backend            string
	ProducerInstanceID string
	Endpoint           Endpoint
	EntryID            string
	ExpiresUnixMs      int64
	Items              []ItemMeta
	Tag                string
}

// PayloadBytes is the total tensor size of all items in bytes.
func (r Reference) PayloadBytes() int64 {
	var n int64
	for _, it := range r.Items {
		n += it.PayloadBytes()
	}
	return n
}

// Body returns BODY, the canonical bytes of the opaque state up to (not
// including) its tag: {"v":1,"id":"..","exp":..,"items":[...]. The strings
// are written as they are (no escaping): ParseReference accepts only
// strings of printable ASCII without '"' and '\', so every reference it
// accepts re-seals to its own bytes.
func (r Reference) Body() []byte {
	b := make([]byte, 0, 64+len(r.EntryID)+len(r.Items)*100)
	b = append(b, `{"v":1,"id":"`...)
	b = append(b, r.EntryID...)
	b = append(b, `","exp":`...)
	b = strconv.AppendInt(b, r.ExpiresUnixMs, 10)
	b = append(b, `,"items":[`...)
	for i, it := range r.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"hash":"`...)
		b = append(b, it.ContentHash...)
		b = append(b, `","rows":`...)
		b = strconv.AppendUint(b, uint64(it.Rows), 10)
		b = append(b, `,"cols":`...)
		b = strconv.AppendUint(b, uint64(it.Cols), 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

// MACInput is the byte string the tag authenticates, every field
// length-prefixed so no two different references share it:
//
//	LP(ReferenceTagDomain) LP(backend) LP(producer_instance_id)
//	LP(endpoint.host) u32(endpoint.port) LP(endpoint.protocol) LP(BODY)
//
// where u32(n) is n as 4 bytes big-endian and LP(s) is u32(len(s)) followed
// by the bytes of s. Strings longer than 4 GiB cannot occur (gRPC bounds a
// message far below).
func (r Reference) MACInput() []byte {
	body := r.Body()
	b := make([]byte, 0, 7*4+len(ReferenceTagDomain)+len(r.Backend)+len(r.ProducerInstanceID)+len(r.Endpoint.Host)+len(r.Endpoint.Protocol)+len(body))
	lp := func(s []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	lp([]byte(ReferenceTagDomain))
	lp([]byte(r.Backend))
	lp([]byte(r.ProducerInstanceID))
	lp([]byte(r.Endpoint.Host))
	b = binary.BigEndian.AppendUint32(b, r.Endpoint.Port)
	lp([]byte(r.Endpoint.Protocol))
	lp(body)
	return b
}

// computeTag is hex(HMAC-SHA256(key, MACInput)), 64 lowercase hex digits.
func (r Reference) computeTag(key []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(r.MACInput())
	return hex.EncodeToString(mac.Sum(nil))
}

// tagPrefix and tagSuffix frame the tag after BODY.
const (
	tagPrefix = `,"tag":"`
	tagSuffix = `"}`
)

// Seal computes the tag under key over the outer fields and BODY and returns
// the opaque state bytes, BODY + `,"tag":"` + tag + `"}` (at most a few KiB
// for MaxReferenceItems items, far under MaxOpaqueStateBytes). Seal does not
// validate: sealing strings ParseReference would refuse (an id with '"', say)
// gives bytes that never verify.
func (r Reference) Seal(key []byte) []byte {
	tag := r.computeTag(key)
	out := r.Body()
	out = append(out, tagPrefix...)
	out = append(out, tag...)
	return append(out, tagSuffix...)
}

// ParseReference decodes a baton-json-v1 opaque state without verifying its
// tag. It applies, in the contract's precedence, the checks that need no key
// and no configuration:
//
//   - ErrTooLarge (L-1): opaque is longer than maxBytes (0 means
//     MaxOpaqueStateBytes, the contract's); checked before anything is read.
//   - ErrMalformedReference (SU-4): an outer field is unbounded or
//     malformed (checkOuter: backend and protocol short tokens,
//     producer_instance_id at most MaxInstanceIDBytes of printable ASCII,
//     the endpoint absent or a DNS name or IP literal of at most
//     MaxEndpointHostBytes with a port 1..65535), so nothing a consumer
//     forwards to its producer is larger than the producer accepts; or
//     opaque is not exactly the bytes the
//     format defines (see Reference): any other JSON, including well-formed
//     but non-canonical JSON (whitespace, escapes, other key order,
//     duplicate or unknown keys, leading zeros), a version other than 1,
//     a string with a byte outside printable ASCII or with '"' or '\', an
//     exp outside int64, rows or cols outside 1..2^32-1, an item over
//     MaxItemBytes, 0 or more than MaxReferenceItems items, a tag that is
//     not 64 lowercase hex digits, or any byte after the closing brace.
//   - ErrMalformedHash (H-3): an item's hash is neither empty (H-2: no
//     hash) nor 64 lowercase hex digits.
//
// The id and the producer instance id are checked by Verify (SU-5), which
// the caller runs after N-1 and SE-3 (CONTRACT precedence: L-1 -> SU-4 ->
// H-3 -> N-1 -> SE-3 -> SU-5 -> SU-2). A reference ParseReference accepts
// re-seals to the same bytes: Seal(key) == opaque for the right key.
func ParseReference(backend, producerInstanceID string, endpoint Endpoint, opaque []byte, maxBytes int) (Reference, error) {
	if maxBytes <= 0 {
		maxBytes = MaxOpaqueStateBytes
	}
	if len(opaque) > maxBytes {
		return Reference{}, rejectf(ErrTooLarge, "L-1 opaque_state is %d bytes, limit %d", len(opaque), maxBytes)
	}
	if err := checkOuter(backend, producerInstanceID, endpoint); err != nil {
		return Reference{}, err // SU-4 before anything reads the outer fields further
	}
	p := refParser{b: opaque}
	ref, err := p.parse()
	if err != nil {
		return Reference{}, rejectf(ErrMalformedReference, "SU-4 opaque_state is not %s at byte %d: %v", ReferenceFormat, p.i, err)
	}
	for i, it := range ref.Items {
		// An empty hash is a missing one: the consumer gives the item a
		// fresh identity (H-2). Anything else must be a content hash (H-3).
		if it.ContentHash != "" && !ValidContentHash(it.ContentHash) {
			return Reference{}, rejectf(ErrMalformedHash, "H-3 item %d content hash %.70q is not 64 lowercase hex digits", i, it.ContentHash)
		}
	}
	ref.Backend, ref.ProducerInstanceID, ref.Endpoint = backend, producerInstanceID, endpoint
	return ref, nil
}

// refParser reads the baton-json-v1 grammar from b, byte for byte.
type refParser struct {
	b []byte
	i int
}

func (p *refParser) lit(s string) error {
	if !bytes.HasPrefix(p.b[p.i:], []byte(s)) {
		return fmt.Errorf("want %q", s)
	}
	p.i += len(s)
	return nil
}

// str reads printable-ASCII string content up to the closing '"' (which it
// consumes). '\' and bytes outside 0x20..0x7e are not part of the format.
func (p *refParser) str() (string, error) {
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, nil
		case c == '\\':
			return "", fmt.Errorf("escape sequences are not part of the format")
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("byte 0x%02x in a string (printable ASCII only)", c)
		}
		p.i++
	}
	return "", fmt.Errorf("unterminated string")
}

// uint reads a canonical unsigned decimal (0, or no leading zero) at most max.
func (p *refParser) uint(max uint64) (uint64, error) {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	digits := string(p.b[start:p.i])
	switch {
	case digits == "":
		return 0, fmt.Errorf("want a decimal number")
	case len(digits) > 1 && digits[0] == '0':
		return 0, fmt.Errorf("leading zero in %q", digits)
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n > max {
		return 0, fmt.Errorf("number %.30s out of range", digits)
	}
	return n, nil
}

// int64 reads a canonical signed decimal in int64 range ("-0" is not canonical).
func (p *refParser) int64() (int64, error) {
	neg := p.i < len(p.b) && p.b[p.i] == '-'
	if neg {
		p.i++
	}
	n, err := p.uint(math.MaxInt64 + 1)
	switch {
	case err != nil:
		return 0, err
	case neg && n == 0:
		return 0, fmt.Errorf("-0 is not canonical")
	case neg:
		return int64(-n), nil // -(2^63) wraps to math.MinInt64, the intended value
	case n > math.MaxInt64:
		return 0, fmt.Errorf("exp out of range")
	}
	return int64(n), nil
}

func (p *refParser) parse() (Reference, error) {
	var r Reference
	var err error
	if len(p.b) == 0 {
		return r, fmt.Errorf("empty")
	}
	if err = p.lit(`{"v":1,"id":"`); err != nil {
		return r, err
	}
	if r.EntryID, err = p.str(); err != nil {
		return r, err
	}
	if err = p.lit(`,"exp":`); err != nil {
		return r, err
	}
	if r.ExpiresUnixMs, err = p.int64(); err != nil {
		return r, err
	}
	if err = p.lit(`,"items":[`); err != nil {
		return r, err
	}
	for {
		if len(r.Items) == MaxReferenceItems {
			return r, fmt.Errorf("more than %d items", MaxReferenceItems)
		}
		var it ItemMeta
		if err = p.lit(`{"hash":"`); err != nil {
			return r, err
		}
		if it.ContentHash, err = p.str(); err != nil {
			return r, err
		}
		if err = p.lit(`,"rows":`); err != nil {
			return r, err
		}
		rows, err := p.uint(math.MaxUint32)
		if err != nil {
			return r, err
		}
		if err = p.lit(`,"cols":`); err != nil {
			return r, err
		}
		cols, err := p.uint(math.MaxUint32)
		if err != nil {
			return r, err
		}
		it.Rows, it.Cols = uint32(rows), uint32(cols)
		if it.Rows == 0 || it.Cols == 0 || it.PayloadBytes() > MaxItemBytes {
			return r, fmt.Errorf("item %d shape [%d, %d] out of range (1.., %d bytes at most)", len(r.Items), it.Rows, it.Cols, MaxItemBytes)
		}
		if err = p.lit(`}`); err != nil {
			return r, err
		}
		r.Items = append(r.Items, it)
		if p.lit(`,`) != nil {
			break
		}
	}
	if err = p.lit(`]` + tagPrefix); err != nil {
		return r, err
	}
	if p.i+64 > len(p.b) || !lowerHex(string(p.b[p.i:p.i+64]), 64) {
		return r, fmt.Errorf("tag is not 64 lowercase hex digits")
	}
	r.Tag = string(p.b[p.i : p.i+64])
	p.i += 64
	if err = p.lit(tagSuffix); err != nil {
		return r, err
	}
	if p.i != len(p.b) {
		return r, fmt.Errorf("%d bytes after the closing brace", len(p.b)-p.i)
	}
	return r, nil
}

// Verify applies SU-5 to a parsed reference: the producer instance id is a
// lowercase UUID, the entry id is 32 lowercase hex digits (128 random bits;
// nothing else can address an entry), and the tag equals HMAC-SHA256 under
// the producer instance's key over MACInput (constant-time compare). Any
// failure is ErrForeignReference (SU-5, INVALID_ARGUMENT): forged, altered
// in any byte (backend, producer_instance_id, producer_endpoint, BODY, tag),
// or bound to another instance.
func (r Reference) Verify(key []byte) error {
	if err := r.CheckIDs(); err != nil {
		return err
	}
	want := r.computeTag(key)
	if !hmac.Equal([]byte(want), []byte(r.Tag)) {
		return rejectf(ErrForeignReference, "SU-5 reference tag does not verify for producer %s", r.ProducerInstanceID)
	}
	return nil
}

// CheckIDs is the keyless part of Verify: ErrForeignReference (SU-5) unless
// the entry id is 32 lowercase hex digits and the producer instance id a
// lowercase UUID. A consumer that holds no key (transfer backends) runs it
// after N-1 and SE-3, so no id that could name a path goes further.
func (r Reference) CheckIDs() error {
	if !ValidEntryID(r.EntryID) {
		return rejectf(ErrForeignReference, "SU-5 entry id %.40q is not 32 lowercase hex digits", r.EntryID)
	}
	if !ValidInstanceID(r.ProducerInstanceID) {
		return rejectf(ErrForeignReference, "SU-5 producer_instance_id %.40q is not an instance id", r.ProducerInstanceID)
	}
	return nil
}

// Expired reports whether the reference's TTL has passed at nowUnixMs.
func (r Reference) Expired(nowUnixMs int64) bool { return nowUnixMs >= r.ExpiresUnixMs }
