package checks

import (
	"fmt"

	"github.com/baton-dev/baton/sim/world"
)

// checkMediaAnswers: B-2. Every successful consume's answer is the answer of its
// own items' content and prompt (the baseline's), however warm the
// consumer's prefix cache: different images with the same prompt get
// different answers when their baselines differ. Checked once per new
// answer; a wrong answer in the narrower situation of H-2 (neither side
// carries a content hash) or H-5 (the images differ only under one uuid)
// is left to those end-of-run checkers.
func checkMediaAnswers(w *world.World) error {
	if w.Media.AnswerSeen >= len(w.Media.Answers) {
		return nil // nothing new to judge (the scan would find nothing)
	}
	return checkMediaAnswersScan(w)
}

// checkMediaAnswersScan is checkMediaAnswers's scan, once there is something to look at.
func checkMediaAnswersScan(w *world.World) error {
	m := &w.Media
	for ; m.AnswerSeen < len(m.Answers); m.AnswerSeen++ {
		b := wrongAnswer(w, m.AnswerSeen)
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
	a      world.MediaAnswer
	items  []world.MediaItem
	hashes []string
	donors []*world.PublishedMedia
}

func (b *badAnswer) String() string {
	s := fmt.Sprintf("PD%d answered the consume of entry %s %s with prompt %d with %016x; its own answer is %016x",
		b.a.Consumer, world.Short(b.a.Pm.Entry), world.DescribeItems(b.items), b.a.Prompt, b.a.Answer, world.AnswerOf(b.a.Prompt, b.items))
	if len(b.donors) > 0 {
		s += fmt.Sprintf(", which is the answer of entry %s %s", world.Short(b.donors[0].Entry), world.DescribeItems(b.donors[0].Items))
	}
	return s
}

// wrongAnswer returns answer i when it is not its own content's answer.
func wrongAnswer(w *world.World, i int) *badAnswer {
	a := w.Media.Answers[i]
	pm := a.Pm
	if a.Answer == world.AnswerOf(a.Prompt, pm.Items) {
		return nil
	}
	b := &badAnswer{a: a, items: pm.Items, hashes: pm.Hashes}
	for _, d := range w.Media.Answers[:i] {
		if d.Consumer != a.Consumer || d.Inc != a.Inc || d.Prompt != a.Prompt || d.Answer != a.Answer {
			continue
		}
		if dm := d.Pm; world.AnswerOf(d.Prompt, dm.Items) == a.Answer {
			b.donors = append(b.donors, dm)
		}
	}
	return b
}
