package encoder

import (
	"image"

	"github.com/baton-dev/baton/engine/contenthash"
)

// ContentHashTag is the domain tag that starts every content-hash pre-image
// (30 bytes, the last one NUL).
const ContentHashTag = contenthash.ContentHashTag

// ContentHashLen is the length of a content hash string: 64 lowercase hex
// digits (SHA-256).
const ContentHashLen = 64

// ContentHash returns the content hash of img under preset p (rule H-1):
// contenthash.ContentHash(p.Name, img), whose doc gives the pre-image (SHA-256 over
// the domain tag ContentHashTag, the preset's name, width, height and the
// non-premultiplied 16-bit RGBA pixels in image.NRGBA64 order, so alpha-0
// pixels keep their colour and 8/16-bit sources cannot collide). The hash
// depends on the decoded pixels and the preset, never on the wire bytes
// (rule H-4). Test vectors are in testdata/content_hash_vectors.json. img
// must not be nil.
func ContentHash(p Preset, img image.Image) string { return contenthash.ContentHash(p.Name, img) }

// IsContentHash reports whether s has the form of a content hash: exactly 64
// lowercase hex digits. A malformed hash from a peer is INVALID_ARGUMENT
// (rule H-3).
func IsContentHash(s string) bool {
	if len(s) != ContentHashLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
