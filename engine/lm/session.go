package lm

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Session is the result of Prefill: everything Decode needs to continue, so a
// decode-only engine (D in E+P+D) can resume from its bytes without media.
type Session struct {
	modelTag       uint64
	state          uint64
	promptTokens   uint32
	imageCount     uint32
	prefixCacheHit bool   // not serialised
	cross          uint64 // EncoderDecoder: the cross-attention KV (not serialised: E+P+D serves DecoderOnly)
}

// PromptTokens is usage.prompt_tokens: text tokens + sum of image rows.
func (s *Session) PromptTokens() uint32 { return s.promptTokens }

// ImageCount is the number of images in the prompt; > 0 marks a multimodal
// prefill (its KV session then carries baton.multimodal, CONTRACT L-2).
func (s *Session) ImageCount() int { return int(s.imageCount) }

// PrefixCacheHit reports whether Prefill reused a cached state. Always false
// for a session from UnmarshalSession.
func (s *Session) PrefixCacheHit() bool { return s.prefixCacheHit }

// sessionMagic starts every serialised session; the last byte is the version.
const sessionMagic = "BLM\x01"

// SessionBytes is the length of a serialised session: magic, model tag (8),
// state (8), prompt tokens (4), image count (4), CRC-32 IEEE of the rest (4).
const SessionBytes = 4 + 8 + 8 + 4 + 4 + 4

// MarshalBinary serialises s into SessionBytes bytes (encoding.BinaryMarshaler).
// It never fails.
func (s *Session) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, SessionBytes)
	b = append(b, sessionMagic...)
	b = binary.LittleEndian.AppendUint64(b, s.modelTag)
	b = binary.LittleEndian.AppendUint64(b, s.state)
	b = binary.LittleEndian.AppendUint32(b, s.promptTokens)
	b = binary.LittleEndian.AppendUint32(b, s.imageCount)
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b)), nil
}

// UnmarshalSession decodes bytes from Session.MarshalBinary. Errors wrap
// ErrBadSession: wrong length, wrong magic/version, checksum mismatch. Whether
// the session belongs to the decoding model is checked by Decode.
func UnmarshalSession(b []byte) (*Session, error) {
	if len(b) != SessionBytes {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrBadSession, len(b), SessionBytes)
	}
	if string(b[:4]) != sessionMagic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrBadSession, b[:4])
	}
	body, sum := b[:SessionBytes-4], binary.LittleEndian.Uint32(b[SessionBytes-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrBadSession)
	}
	return &Session{
		modelTag:     binary.LittleEndian.Uint64(b[4:]),
		state:        binary.LittleEndian.Uint64(b[12:]),
		promptTokens: binary.LittleEndian.Uint32(b[20:]),
		imageCount:   binary.LittleEndian.Uint32(b[24:]),
	}, nil
}
