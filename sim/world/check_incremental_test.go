package world

import (
	"strings"
	"testing"

	"github.com/baton-dev/baton/engine/handoff"
)

// The incremental step checkers (check_buffers.go's pending WRITEs,
// check_cancel.go's C-3 signature, check_singleuse.go's one-pass screen)
// look only at what may have changed; these tests break an invariant in
// the middle of a passing run, after the checkers have carried state over
// many steps, and want the very next checkStep to fail with the rule.

// stepUntil runs seeds' worlds step by step, with the checkers, until
// found says the world is where a violation can be planted; it returns
// that world (checked up to this step and passing) or nil.
func stepUntil(t *testing.T, found func(w *World) bool) *World {
	t.Helper()
	for seed := uint64(1); seed <= 500; seed++ {
		w := newWorld(seed, DrawSettings(seed), Options{})
		w.start()
		for w.fail == nil {
			ev, ok := w.q.pop()
			if !ok {
				break
			}
			w.now = ev.tick
			w.steps++
			done := w.dispatch(ev)
			w.checkStep()
			if w.fail != nil || done {
				break
			}
			if w.steps > 20 && found(w) {
				return w
			}
		}
	}
	t.Fatal("no seed reached the state to plant the violation in")
	return nil
}

// wantCaught runs one more checkStep and wants a failure of rule whose
// message contains part.
func wantCaught(t *testing.T, w *World, rule, part string) {
	t.Helper()
	w.steps++
	w.checkStep()
	if w.fail == nil {
		t.Fatalf("planted %s violation not caught at the step it happened", rule)
	}
	if w.fail.rule != rule || !strings.Contains(w.fail.msg, part) {
		t.Fatalf("caught as %s %q, want %s with %q", w.fail.rule, w.fail.msg, rule, part)
	}
}

// firstPending returns a WRITE that may still land into a live consumer
// incarnation's buffer, one the checkers have already seen pending.
func firstPending(w *World) *write {
	for _, wr := range w.writes {
		if wr.pending() && w.cons[wr.c].up && w.cons[wr.c].inc == wr.inc && len(w.judged.pending) > 0 && w.judged.writesSeen == len(w.writes) {
			return wr
		}
	}
	return nil
}

func TestIncrementalBuffersCatchFreedBuffer(t *testing.T) {
	w := stepUntil(t, func(w *World) bool { return firstPending(w) != nil })
	wr := firstPending(w)
	w.cons[wr.c].bufs[wr.buf].owner = 0 // freed under a WRITE that may land
	wantCaught(t, w, "Q-1", "freed buffer")
}

func TestIncrementalSourcesCatchFreedSource(t *testing.T) {
	w := stepUntil(t, func(w *World) bool { return firstPending(w) != nil })
	wr := firstPending(w)
	w.sources[wr.entry] = sourceFreed // freed under a WRITE that may read it
	wantCaught(t, w, "Q-3", "freed the source")
}

func TestIncrementalUndeliveredCatchesPublished(t *testing.T) {
	var rec *entryRecord
	w := stepUntil(t, func(w *World) bool {
		if !w.judged.undelivered.held {
			return false
		}
		for _, e := range w.ledger.all {
			if w.prod.table.State(e.id) == handoff.EntryPublished && !e.readyUndelivered {
				rec = e
				return true
			}
		}
		return false
	})
	// Its EncoderReady send failed, yet it stays published (C-7); with
	// its stream cancelled first, C-3.
	rec.readyUndelivered = true
	w.ledger.cancelled = append(w.ledger.cancelled, rec)
	wantCaught(t, w, "C-7", "send failed")
	rec.cancelledBeforeReady = true
	w.fail = nil
	w.judged.undelivered = undeliveredSeen{}
	wantCaught(t, w, "C-3", "still published")
}

func TestIncrementalEntriesCatch(t *testing.T) {
	for _, tc := range []struct {
		name, rule, part string
		plant            func(e *entryRecord)
	}{
		{"consumed twice", "SU-1", "consumed 2 times", func(e *entryRecord) {
			e.consumptions = append(e.consumptions, "r-a", "r-b")
		}},
		{"OK without consumption", "SU-1", "no receive got its data", func(e *entryRecord) {
			e.okCalls = append(e.okCalls, [2]int64{1, 1})
		}},
		{"ABORTED twice", "SU-3", "ABORTED 2 times", func(e *entryRecord) { e.aborted = 2 }},
		{"ABORTED without removal", "SU-3", "answered ABORTED but", func(e *entryRecord) { e.aborted = 1 }},
		{"removed and consumed", "SU-1", "by the producer and consumed", func(e *entryRecord) {
			e.removedCause, e.consumptions = "expired", []string{"r-a"}
		}},
		{"abandoned but published", "SU-1", "abandoned but published", func(e *entryRecord) {
			e.abandoned, e.published = true, true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec *entryRecord
			w := stepUntil(t, func(w *World) bool {
				for _, e := range w.ledger.all {
					if len(e.consumptions) == 0 && len(e.okCalls) == 0 && e.aborted == 0 && e.removedCause == "" && !e.abandoned {
						rec = e
						return len(w.ledger.all) > 1
					}
				}
				return false
			})
			tc.plant(rec)
			wantCaught(t, w, tc.rule, tc.part)
		})
	}
}
