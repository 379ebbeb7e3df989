package lm

import "strings"

// output accumulates generated text, finds stop texts in it, and emits tokens,
// holding back those whose text could begin a stop text not yet complete.
//
// Invariant: every byte offset i >= emittedBytes at which text[i:] is a proper
// prefix of some stop text belongs to a pending token, so a stop match never
// starts inside text already emitted.
type output struct {
	stops        []string
	maxStopLen   int
	includeStop  bool
	emit         func(Token) error
	text         string
	emittedBytes int           // text[:emittedBytes] has been emitted
	pending      []pendingSpan // generated, not yet emitted, in order
}

type pendingSpan struct {
	id         uint32
	start, end int // byte range in text
}

func newOutput(req Request, emit func(Token) error) *output {
	o := &output{stops: req.StopTexts, includeStop: req.IncludeStopInOutput, emit: emit}
	for _, s := range o.stops {
		o.maxStopLen = max(o.maxStopLen, len(s))
	}
	return o
}

// push appends a generated token. With checkStops it looks for a stop text
// that ends inside the new token (earliest start wins, then request order);
// on a match it emits the text before the match (through the match with
// includeStop), cutting the last token's text, and returns the matched stop.
func (o *output) push(id uint32, checkStops bool) (string, error) {
	oldLen := len(o.text)
	o.text += TokenText(id)
	o.pending = append(o.pending, pendingSpan{id: id, start: oldLen, end: len(o.text)})
	if checkStops {
		if stop, start, ok := o.findStop(oldLen); ok {
			cut := start
			if o.includeStop {
				cut += len(stop)
			}
			return stop, o.emitBefore(cut, true)
		}
	}
	return "", o.emitBefore(o.holdFrom(), false)
}

// findStop returns the earliest stop match starting at or after emittedBytes
// and ending after oldLen.
func (o *output) findStop(oldLen int) (stop string, start int, ok bool) {
	start = len(o.text)
	for _, s := range o.stops {
		from := max(o.emittedBytes, oldLen-len(s)+1)
		if from > len(o.text) {
			continue
		}
		if i := strings.Index(o.text[from:], s); i >= 0 && from+i < start {
			stop, start, ok = s, from+i, true
		}
	}
	return stop, start, ok
}

// holdFrom is the first offset whose suffix is a proper prefix of a stop text
// (len(text) when none): text from there on must wait.
func (o *output) holdFrom() int {
	for i := max(o.emittedBytes, len(o.text)-o.maxStopLen+1); i < len(o.text); i++ {
		tail := o.text[i:]
		for _, s := range o.stops {
			if len(tail) < len(s) && strings.HasPrefix(s, tail) {
				return i
			}
		}
	}
	return len(o.text)
}

// emitBefore emits the pending tokens that end at or before cut. With final,
// a token straddling cut is emitted with its text truncated at cut, and every
// later pending token is dropped.
func (o *output) emitBefore(cut int, final bool) error {
	n := 0
	for _, p := range o.pending {
		if p.end > cut && !(final && p.start < cut) {
			break
		}
		end := min(p.end, cut)
		if err := o.emit(Token{ID: p.id, Text: o.text[p.start:end]}); err != nil {
			return err
		}
		o.emittedBytes = end
		n++
	}
	o.pending = o.pending[n:]
	if final {
		o.pending = nil
	}
	return nil
}

// flush emits every pending token whole (the answer ended without a stop text).
func (o *output) flush() error { return o.emitBefore(len(o.text), false) }
