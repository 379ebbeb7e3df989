package checks

import (
	"fmt"

	"github.com/baton-dev/baton/sim/world"
)

// checkMissingHashAnswers: H-2. An item published without content hash
// gets a fresh identity at the consumer, which disables prefix-cache reuse
// for it: a consume whose items all lack a hash never gets the answer of
// another such consume with the same prompt. Run at the end (the wrong
// answers checkMediaAnswers left to it).
func checkMissingHashAnswers(w *world.World) error {
	for i := range w.Media.Answers {
		if b := wrongAnswer(w, i); b != nil && b.missingHashSituation() {
			return fmt.Errorf("%s; neither carries a content hash, so each must get a fresh identity and its own answer (a missing hash keyed by placeholder tokens alone?)", b)
		}
	}
	return nil
}

// missingHashSituation reports whether neither b's items nor those of one
// of its donors carry a content hash.
func (b *badAnswer) missingHashSituation() bool {
	if !allUnhashed(b.hashes) {
		return false
	}
	for _, d := range b.donors {
		if allUnhashed(d.Hashes) {
			return true
		}
	}
	return false
}

func allUnhashed(hashes []string) bool {
	for _, h := range hashes {
		if h != "" {
			return false
		}
	}
	return true
}
