package world

import (
	"strings"
	"testing"
)

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
