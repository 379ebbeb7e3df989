package sim

import "fmt"

// checkMissingHashAnswers: H-2. An item published without content hash
// gets a fresh identity at the consumer, which disables prefix-cache reuse
// for it: a consume whose items all lack a hash never gets the answer of
// another such consume with the same prompt (checked once per new answer).
func checkMissingHashAnswers(w *World) string {
	m := &w.media
	for ; m.missingHashSeen < len(m.answers); m.missingHashSeen++ {
		b := wrongAnswer(w, m.missingHashSeen)
		if b == nil || b.donor == nil || !allUnhashed(b.hashes) || !allUnhashed(b.donor.hashes) {
			continue
		}
		return fmt.Sprintf("%s; neither carries a content hash, so each must get a fresh identity and its own answer (a missing hash keyed by placeholder tokens alone?)", b)
	}
	return ""
}

func allUnhashed(hashes []string) bool {
	for _, h := range hashes {
		if h != "" {
			return false
		}
	}
	return true
}
