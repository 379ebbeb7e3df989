package world

import "fmt"

// checkUUIDAnswers: H-5. A MediaItem.uuid is an id, never a substitute for
// the content hash: two consumes with one prompt whose items differ only in
// images sent with the same uuid (content hashes present) get their own
// answers. Run at the end (the wrong answers checkMediaAnswers left to it).
func checkUUIDAnswers(w *World) error {
	for i := range w.media.answers {
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
func differOnlyUnderOneUUID(items []mediaItem, hashes []string, d *publishedMedia) bool {
	if len(items) != len(d.items) {
		return false
	}
	differ := false
	for k, it := range items {
		o := d.items[k]
		if mediaPool[it.img].pixels == mediaPool[o.img].pixels {
			continue
		}
		if it.uuid == 0 || it.uuid != o.uuid || hashes[k] == "" || d.hashes[k] == "" {
			return false
		}
		differ = true
	}
	return differ
}
