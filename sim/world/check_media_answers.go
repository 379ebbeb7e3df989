package world

import "fmt"

// checkMediaAnswers: B-2. Every successful consume's answer is the answer of its
// own items' content and prompt (the baseline's), however warm the
// consumer's prefix cache: different images with the same prompt get
// different answers when their baselines differ. Checked once per new
// answer; a wrong answer in the narrower situation of H-2 (neither side
// carries a content hash) or H-5 (the images differ only under one uuid)
// is left to those end-of-run checkers.
func checkMediaAnswers(w *World) error {
	m := &w.media
	for ; m.answerSeen < len(m.answers); m.answerSeen++ {
		b := wrongAnswer(w, m.answerSeen)
		if b == nil || b.missingHashSituation() || b.uuidSituation() {
			continue
		}
		return fmt.Errorf("%s; different images with one prompt must get their own answers (is the prefix cache keyed by the prompt alone?)", b)
	}
	return nil
}

// badAnswer is a consume answered with another content's answer: the
// answer, its own items, and the donors: the entries of the earlier
// consumes of the same consumer incarnation and prompt that got this
// answer as their own (the answer its prefix cache may have reused).
type badAnswer struct {
	a      mediaAnswer
	items  []mediaItem
	hashes []string
	donors []*publishedMedia
}

func (b *badAnswer) String() string {
	s := fmt.Sprintf("PD%d answered the consume of entry %s %s with prompt %d with %016x; its own answer is %016x",
		b.a.consumer, short(b.a.pm.entry), describeItems(b.items), b.a.prompt, b.a.answer, answerOf(b.a.prompt, b.items))
	if len(b.donors) > 0 {
		s += fmt.Sprintf(", which is the answer of entry %s %s", short(b.donors[0].entry), describeItems(b.donors[0].items))
	}
	return s
}

// wrongAnswer returns answer i when it is not its own content's answer.
func wrongAnswer(w *World, i int) *badAnswer {
	a := w.media.answers[i]
	pm := a.pm
	if a.answer == answerOf(a.prompt, pm.items) {
		return nil
	}
	b := &badAnswer{a: a, items: pm.items, hashes: pm.hashes}
	for _, d := range w.media.answers[:i] {
		if d.consumer != a.consumer || d.inc != a.inc || d.prompt != a.prompt || d.answer != a.answer {
			continue
		}
		if dm := d.pm; answerOf(d.prompt, dm.items) == a.answer {
			b.donors = append(b.donors, dm)
		}
	}
	return b
}
