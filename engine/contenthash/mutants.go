package contenthash

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"image"
)

// Mutants switches the content hash to a deliberately broken one, each
// breaking one rule. The zero value is the contract's hash (ContentHash).
// The real engine's test hooks (engine/server Hooks.ContentHashing) and
// the simulator's mutants (sim.Mutant.ContentHashDecisions), whose
// producer hashes with this package, set the same switch, so one broken
// hash runs in both.
type Mutants struct {
	// Premultiplied hashes the contract's pre-image with premultiplied
	// 16-bit pixels (color.Color.RGBA) instead of non-premultiplied ones,
	// so alpha changes colours and alpha-0 pixels collide (breaks H-1;
	// conformance h1-premultiplied-hash, sim premultiplied-hash).
	Premultiplied bool
	// WireBytes hashes the item's wire bytes instead of its decoded pixels,
	// so pixel-equal media in different encodings hash differently (breaks
	// H-4; conformance h4-wire-bytes-hash, sim wire-bytes-hash).
	WireBytes bool
}

// Of is the content hash a producer computes for one item whose wire
// bytes wire decoded to img under the preset named preset: ContentHash
// (H-1, H-4), unless a switch of m replaces it by a broken one.
func Of(preset string, wire []byte, img image.Image, m Mutants) string {
	switch {
	case m.Premultiplied:
		return premultipliedHash(preset, img) // the H-1 mutant
	case m.WireBytes:
		sum := sha256.Sum256(wire) // the H-4 mutant
		return hex.EncodeToString(sum[:])
	}
	return ContentHash(preset, img)
}

// premultipliedHash is the H-1 mutant's hash: ContentHash's pre-image
// (domain tag, preset, width, height) with premultiplied 16-bit RGBA
// pixels.
func premultipliedHash(preset string, img image.Image) string {
	h := sha256.New()
	b := img.Bounds()
	writeHashHeader(h, preset, b)
	px := make([]byte, 8)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			binary.BigEndian.PutUint16(px[0:], uint16(r))
			binary.BigEndian.PutUint16(px[2:], uint16(g))
			binary.BigEndian.PutUint16(px[4:], uint16(bl))
			binary.BigEndian.PutUint16(px[6:], uint16(a))
			h.Write(px)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
