package world

import (
	"strings"
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
	for _, m := range mediaPool {
		byName[m.name] = m
		if got := contenthash.ContentHash(mediaPreset, m.img); got != m.hashes[hashContract][0] {
			t.Errorf("%s: pool hash %s, contenthash.ContentHash %s", m.name, m.hashes[hashContract][0], got)
		}
		for e := range mediaEncodings {
			if m.hashes[hashContract][e] != m.hashes[hashContract][0] {
				t.Errorf("%s: the contract's hash depends on the encoding", m.name)
			}
			if e > 0 && m.hashes[hashWireBytes][e] == m.hashes[hashWireBytes][0] {
				t.Errorf("%s: wire bytes of %s and %s hash equal", m.name, mediaEncodings[e], mediaEncodings[0])
			}
		}
	}
	base, wide := byName["base"], byName["base-16bit"]
	if base.pixels != wide.pixels || base.hashes[hashContract][0] != wide.hashes[hashContract][0] || base.pixelClass != wide.pixelClass {
		t.Errorf("base and base-16bit: want equal pixels, contract hashes and pixel class")
	}
	if base.hashes[hashWireBytes][0] == wide.hashes[hashWireBytes][0] {
		t.Errorf("base and base-16bit: wire hashes equal; want the 8/16-bit sources to differ on the wire")
	}
	for i, a := range mediaPool {
		for _, b := range mediaPool[i+1:] {
			if a.pixels != b.pixels && a.hashes[hashContract][0] == b.hashes[hashContract][0] {
				t.Errorf("%s and %s: different pixels, one contract hash", a.name, b.name)
			}
		}
	}
	hidden := []string{"hidden-orange", "hidden-orange-2", "hidden-black"}
	for _, n := range hidden[1:] {
		if byName[n].hashes[hashPremultiplied][0] != byName[hidden[0]].hashes[hashPremultiplied][0] {
			t.Errorf("%s and %s: premultiplied hashes differ; want colours under alpha 0 to collide", n, hidden[0])
		}
	}
}

// TestMediaWorld: across seeds, the correct world serves media as the
// contract says: prefix caches are hit (equal content, one prompt), every
// answer is its own content's, publishes with a video or audio item end
// UNIMPLEMENTED, and the special items (no hash, shared uuids) occur.
func TestMediaWorld(t *testing.T) {
	var hits, answers, unimplemented, omitted, uuids int
	for seed := uint64(1); seed <= 300; seed++ {
		w := newWorld(seed, DrawSettings(seed), Options{})
		w.start()
		w.loop()
		if w.fail != nil {
			t.Fatalf("seed %d: %s", seed, w.fail.msg)
		}
		hits += w.media.hits
		answers += len(w.media.answers)
		for i := range w.media.answers {
			if b := wrongAnswer(w, i); b != nil {
				t.Errorf("seed %d: %s", seed, b)
			}
		}
		for _, c := range w.clients {
			p := &c.plan.media
			if p.omitHash {
				omitted++
			}
			for _, it := range p.list() {
				if it.uuid != 0 {
					uuids++
				}
			}
			if strings.Contains(c.outcome, "UNIMPLEMENTED") {
				unimplemented++
				if p.list()[0].modality == modalityImage && (p.n < 2 || p.list()[1].modality == modalityImage) {
					t.Errorf("seed %d client %d: UNIMPLEMENTED for images only %s", seed, c.idx, describeItems(p.list()))
				}
			}
		}
	}
	t.Logf("300 seeds: %d answers, %d from a prefix cache; %d publishes UNIMPLEMENTED (L-3); %d without hashes; %d items with a uuid", answers, hits, unimplemented, omitted, uuids)
	if hits == 0 || unimplemented == 0 || omitted == 0 || uuids == 0 {
		t.Errorf("want prefix-cache hits, L-3 rejections, omitted hashes and uuids in 300 seeds")
	}
}
