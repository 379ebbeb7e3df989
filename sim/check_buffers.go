package sim

import "fmt"

// checkReceiveBuffers: Q-1. A WRITE that may still land targets a buffer its
// receive still owns, or one quarantined for it, or memory of a crashed
// incarnation (where it will fail); never a freed buffer or one reused by
// another receive. A quarantined buffer is never owned by a later receive.
func checkReceiveBuffers(w *World) string {
	for _, wr := range w.writes {
		if !wr.pending() {
			continue
		}
		c := w.cons[wr.c]
		if !c.up || c.inc != wr.inc {
			continue
		}
		if msg := bufferHeld(wr, &c.bufs[wr.buf]); msg != "" {
			return msg
		}
	}
	return ""
}

// bufferHeld says what is wrong when wr may land in b.
func bufferHeld(wr *write, b *buffer) string {
	switch {
	case b.quarantined && b.owner == wr.recv:
		return ""
	case b.owner == wr.recv:
		return ""
	case b.owner == 0:
		return fmt.Sprintf("PD%d freed buffer %d while WRITE #%d of %s may still land in it", wr.c, wr.buf, wr.num, short(wr.entry))
	default:
		return fmt.Sprintf("PD%d reused buffer %d for receive %d while WRITE #%d of %s for receive %d may still land in it",
			wr.c, wr.buf, b.owner, wr.num, short(wr.entry), wr.recv)
	}
}

// checkLanding is the same check at the moment a WRITE lands.
func (w *World) checkLanding(wr *write, b *buffer) {
	if msg := bufferHeld(wr, b); msg != "" {
		w.failf(Correctness, "Q-1", "WRITE landed: %s", msg)
	}
}

// checkSources: Q-3. A producer never frees a transfer source a WRITE may
// still read: a pending WRITE's source is live (transfer in progress) or
// quarantined.
func checkSources(w *World) string {
	for _, wr := range w.writes {
		if wr.pending() && w.sources[wr.entry] == sourceFreed {
			return fmt.Sprintf("producer freed the source of %s while WRITE #%d may still read it", short(wr.entry), wr.num)
		}
	}
	return ""
}
