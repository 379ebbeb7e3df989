package world

import (
	"testing"

	"github.com/baton-dev/baton/engine/contenthash"
)

// TestMediaPool: the pool holds what the media rules need: pixel-equal
// twins (a 16-bit source, four encodings) that hash equal under the
// contract's function (contenthash.ContentHash) and differently over the wire
// bytes (H-4); different pixels that hash differently under the contract
// and collide once premultiplied (H-1).
func TestMediaPool(t *testing.T) {
	byName := map[string]mediaImage{}
	for _, m := range MediaPool {
		byName[m.name] = m
		if got := contenthash.ContentHash(mediaPreset, m.img); got != m.Hashes[HashContract][0] {
			t.Errorf("%s: pool hash %s, contenthash.ContentHash %s", m.name, m.Hashes[HashContract][0], got)
		}
		for e := range mediaEncodings {
			if m.Hashes[HashContract][e] != m.Hashes[HashContract][0] {
				t.Errorf("%s: the contract's hash depends on the encoding", m.name)
			}
			if e > 0 && m.Hashes[HashWireBytes][e] == m.Hashes[HashWireBytes][0] {
				t.Errorf("%s: wire bytes of %s and %s hash equal", m.name, mediaEncodings[e], mediaEncodings[0])
			}
		}
	}
	base, wide := byName["base"], byName["base-16bit"]
	if base.Pixels != wide.Pixels || base.Hashes[HashContract][0] != wide.Hashes[HashContract][0] || base.PixelClass != wide.PixelClass {
		t.Errorf("base and base-16bit: want equal pixels, contract hashes and pixel class")
	}
	if base.Hashes[HashWireBytes][0] == wide.Hashes[HashWireBytes][0] {
		t.Errorf("base and base-16bit: wire hashes equal; want the 8/16-bit sources to differ on the wire")
	}
	for i, a := range MediaPool {
		for _, b := range MediaPool[i+1:] {
			if a.Pixels != b.Pixels && a.Hashes[HashContract][0] == b.Hashes[HashContract][0] {
				t.Errorf("%s and %s: different pixels, one contract hash", a.name, b.name)
			}
		}
	}
	hidden := []string{"hidden-orange", "hidden-orange-2", "hidden-black"}
	for _, n := range hidden[1:] {
		if byName[n].Hashes[HashPremultiplied][0] != byName[hidden[0]].Hashes[HashPremultiplied][0] {
			t.Errorf("%s and %s: premultiplied hashes differ; want colours under alpha 0 to collide", n, hidden[0])
		}
	}
}
