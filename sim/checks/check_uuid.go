package checks

import (
	"fmt"

	"github.com/baton-dev/baton/sim/world"
)

// checkUUIDAnswers: H-5. A MediaItem.uuid is an id, never a substitute for
// the content hash: two consumes with one prompt whose items differ only in
// images sent with the same uuid (content hashes present) get their own
// answers. Run at the end (the wrong answers checkMediaAnswers left to it).
func checkUUIDAnswers(w *world.World) error {
	for i := range w.Media.Answers {
		if b := wrongAnswer(w, i); b != nil && b.uuidSituation() {
			return fmt.Errorf("%s; the images that differ were sent with one uuid, which is an id, not their identity", b)
		}
	}
	return nil
}

// uuidSituation reports whether b's items and those of one of its donors
// differ only under one uuid.
func (b *badAnswer) uuidSituation() bool {
	for _, d := range b.donors {
		if differOnlyUnderOneUUID(b.items, b.hashes, d) {
			return true
		}
	}
	return false
}

// differOnlyUnderOneUUID reports whether items and d's have one length and
// every position whose pixels differ holds hashed items sent with the same
// uuid.
func differOnlyUnderOneUUID(items []world.MediaItem, hashes []string, d *world.PublishedMedia) bool {
	if len(items) != len(d.Items) {
		return false
	}
	differ := false
	for k, it := range items {
		o := d.Items[k]
		if world.MediaPool[it.Img].Pixels == world.MediaPool[o.Img].Pixels {
			continue
		}
		if it.Uuid == 0 || it.Uuid != o.Uuid || hashes[k] == "" || d.Hashes[k] == "" {
			return false
		}
		differ = true
	}
	return differ
}
