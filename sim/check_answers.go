package sim

import "fmt"

// checkAnswers: B-2. Every successful consume's answer is the answer of its
// own items' content and prompt (the baseline's), however warm the
// consumer's prefix cache: different images with the same prompt get
// different answers when their baselines differ (checked once per new
// answer, after the H-2 and H-5 situations).
func checkAnswers(w *World) string {
	m := &w.media
	for ; m.answerSeen < len(m.answers); m.answerSeen++ {
		if bad := wrongAnswer(w, m.answerSeen); bad != nil {
			return fmt.Sprintf("%s; different images with one prompt must get their own answers (is the prefix cache keyed by the prompt alone?)", bad)
		}
	}
	return ""
}

// badAnswer is a consume answered with another content's answer: the
// answer, its own items, and (when found) the earlier consume whose
// content the answer is of.
type badAnswer struct {
	a      mediaAnswer
	items  []mediaItem
	hashes []string
	donor  *publishedMedia
}

func (b *badAnswer) String() string {
	s := fmt.Sprintf("PD%d answered the consume of entry %s %s with prompt %d with %016x; its own answer is %016x",
		b.a.consumer, short(b.a.entry), describeItems(b.items), b.a.prompt, b.a.answer, answerOf(b.a.prompt, b.items))
	if b.donor != nil {
		s += fmt.Sprintf(", which is the answer of entry %s %s", short(b.donor.entry), describeItems(b.donor.items))
	}
	return s
}

// wrongAnswer returns answer i when it is not its own content's answer.
func wrongAnswer(w *World, i int) *badAnswer {
	a := w.media.answers[i]
	pm := w.media.entries[a.entry]
	if a.answer == answerOf(a.prompt, pm.items) {
		return nil
	}
	b := &badAnswer{a: a, items: pm.items, hashes: pm.hashes}
	for _, d := range w.media.answers[:i] {
		if dm := w.media.entries[d.entry]; d.answer == a.answer && d.prompt == a.prompt && answerOf(d.prompt, dm.items) == a.answer {
			b.donor = dm
			break
		}
	}
	return b
}
