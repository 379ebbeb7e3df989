package checks

import (
	"strings"
	"testing"

	"github.com/baton-dev/baton/sim/world"
)

// TestMediaWorld: across seeds, the correct world serves media as the
// contract says: prefix caches are hit (equal content, one prompt), every
// answer is its own content's, publishes with a video or audio item end
// UNIMPLEMENTED, and the special items (no hash, shared uuids) occur.
func TestMediaWorld(t *testing.T) {
	var hits, answers, unimplemented, omitted, uuids int
	for seed := uint64(1); seed <= 300; seed++ {
		w := world.NewWorld(seed, world.DrawSettings(seed), world.Options{})
		w.Start()
		w.Loop()
		if w.Fail != nil {
			t.Fatalf("seed %d: %s", seed, w.Fail.Msg)
		}
		hits += w.Media.Hits
		answers += len(w.Media.Answers)
		for i := range w.Media.Answers {
			if b := wrongAnswer(w, i); b != nil {
				t.Errorf("seed %d: %s", seed, b)
			}
		}
		for _, c := range w.Clients {
			p := &c.Plan.Media
			if p.OmitHash {
				omitted++
			}
			for _, it := range p.List() {
				if it.Uuid != 0 {
					uuids++
				}
			}
			if strings.Contains(c.Outcome, "UNIMPLEMENTED") {
				unimplemented++
				if p.List()[0].Modality == world.ModalityImage && (p.N < 2 || p.List()[1].Modality == world.ModalityImage) {
					t.Errorf("seed %d client %d: UNIMPLEMENTED for images only %s", seed, c.Idx, world.DescribeItems(p.List()))
				}
			}
		}
	}
	t.Logf("300 seeds: %d answers, %d from a prefix cache; %d publishes UNIMPLEMENTED (L-3); %d without hashes; %d items with a uuid", answers, hits, unimplemented, omitted, uuids)
	if hits == 0 || unimplemented == 0 || omitted == 0 || uuids == 0 {
		t.Errorf("want prefix-cache hits, L-3 rejections, omitted hashes and uuids in 300 seeds")
	}
}
