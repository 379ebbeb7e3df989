// Package lowerhex checks strings of lowercase hexadecimal digits, the form
// of baton's entry ids, instance ids' groups and content hashes: every
// handoff validates several, so the check works on eight bytes at a time.
package lowerhex

import "encoding/binary"

// Is reports whether every byte of s is a lowercase hex digit, 0-9 or
// a-f (true for "").
func Is(s string) bool {
	for len(s) >= 8 {
		if !word(binary.LittleEndian.Uint64([]byte(s[:8]))) {
			return false
		}
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

const (
	ones = 0x0101010101010101
	high = 0x8080808080808080
)

// word reports whether each of x's eight bytes is a lowercase hex digit.
// Once every byte is below 0x80, adding 0x80-c to a byte sets its high
// bit exactly when the byte is at least c, and never carries into the
// next byte (0x7f + 0x50 < 0x100).
func word(x uint64) bool {
	digit := (x + (0x80-'0')*ones) &^ (x + (0x80-'9'-1)*ones)
	letter := (x + (0x80-'a')*ones) &^ (x + (0x80-'f'-1)*ones)
	return x&high == 0 && (digit|letter)&high == high
}
