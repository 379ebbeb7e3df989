package checks

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/world"
)

// The incremental step checkers (check_buffers.go's pending WRITEs,
// check_cancel.go's C-3 signature, check_singleuse.go's screen of the
// touched entries) look only at what may have changed; these tests break
// an invariant in the middle of a passing run, after the checkers have
// carried state over many steps, and want the very next checkStep to fail
// with the rule.

// dispatchNext pops w's next event, moves the clock and the step count to
// it and dispatches it, as World.Loop does (without the checkers): ok is
// false when the queue is empty, done true when the run is complete.
func dispatchNext(w *world.World) (done, ok bool) {
	ev, ok := w.Q.Pop()
	if !ok {
		return false, false
	}
	w.Now = ev.Tick
	w.Steps++
	return w.Dispatch(ev), true
}

// stepUntil runs seeds' worlds step by step, with the checkers, until
// found says the world is where a violation can be planted; it returns
// that world (checked up to this step and passing) or nil.
func stepUntil(t *testing.T, found func(w *world.World) bool) *world.World {
	t.Helper()
	for seed := uint64(1); seed <= 500; seed++ {
		w := world.NewWorld(seed, world.DrawSettings(seed), world.Options{})
		w.Start()
		for w.Fail == nil {
			done, ok := dispatchNext(w)
			if !ok {
				break
			}
			w.CheckStep()
			if w.Fail != nil || done {
				break
			}
			if w.Steps > 20 && found(w) {
				return w
			}
		}
	}
	t.Fatal("no seed reached the state to plant the violation in")
	return nil
}

// wantCaught runs one more checkStep and wants a failure of rule whose
// message contains part.
func wantCaught(t *testing.T, w *world.World, rule, part string) {
	t.Helper()
	w.Steps++
	w.CheckStep()
	if w.Fail == nil {
		t.Fatalf("planted %s violation not caught at the step it happened", rule)
	}
	if w.Fail.Rule != rule || !strings.Contains(w.Fail.Msg, part) {
		t.Fatalf("caught as %s %q, want %s with %q", w.Fail.Rule, w.Fail.Msg, rule, part)
	}
}

// firstPending returns a WRITE that may still land into a live consumer
// incarnation's buffer, one the checkers have already seen pending.
func firstPending(w *world.World) *world.Write {
	for _, wr := range w.Writes {
		if wr.Pending() && w.Cons[wr.C].Up && w.Cons[wr.C].Inc == wr.Inc && len(w.Judged.Pending) > 0 && w.Judged.WritesSeen == len(w.Writes) {
			return wr
		}
	}
	return nil
}

func TestIncrementalBuffersCatchFreedBuffer(t *testing.T) {
	w := stepUntil(t, func(w *world.World) bool { return firstPending(w) != nil })
	wr := firstPending(w)
	w.Cons[wr.C].Bufs[wr.Buf].Owner = 0 // freed under a WRITE that may land
	wantCaught(t, w, "Q-1", "freed buffer")
}

func TestIncrementalSourcesCatchFreedSource(t *testing.T) {
	w := stepUntil(t, func(w *world.World) bool { return firstPending(w) != nil })
	wr := firstPending(w)
	w.Sources[wr.Entry] = world.SourceFreed // freed under a WRITE that may read it
	wantCaught(t, w, "Q-3", "freed the source")
}

func TestIncrementalUndeliveredCatchesPublished(t *testing.T) {
	var rec *world.EntryRecord
	w := stepUntil(t, func(w *world.World) bool {
		if !w.Judged.Undelivered.Held {
			return false
		}
		for _, e := range w.Ledger.All {
			if w.Prod.Table.State(e.Id) == handoff.EntryPublished && !e.ReadyUndelivered {
				rec = e
				return true
			}
		}
		return false
	})
	// Its EncoderReady send failed, yet it stays published (C-7); with
	// its stream cancelled first, C-3.
	rec.ReadyUndelivered = true
	w.Ledger.Cancelled = append(w.Ledger.Cancelled, rec)
	wantCaught(t, w, "C-7", "send failed")
	rec.CancelledBeforeReady = true
	w.Fail = nil
	w.Judged.Undelivered = world.UndeliveredSeen{}
	wantCaught(t, w, "C-3", "still published")
}

func TestIncrementalEntriesCatch(t *testing.T) {
	for _, tc := range []struct {
		name, rule, part string
		plant            func(e *world.EntryRecord)
	}{
		{"consumed twice", "SU-1", "consumed 2 times", func(e *world.EntryRecord) {
			e.Consumptions = append(e.Consumptions, "r-a", "r-b")
		}},
		{"OK without consumption", "SU-1", "no receive got its data", func(e *world.EntryRecord) {
			e.OkCalls = append(e.OkCalls, [2]int64{1, 1})
		}},
		{"ABORTED twice", "SU-3", "ABORTED 2 times", func(e *world.EntryRecord) { e.Aborted = 2 }},
		{"ABORTED without removal", "SU-3", "answered ABORTED but", func(e *world.EntryRecord) { e.Aborted = 1 }},
		{"removed and consumed", "SU-1", "by the producer and consumed", func(e *world.EntryRecord) {
			e.RemovedCause, e.Consumptions = "expired", []string{"r-a"}
		}},
		{"abandoned but published", "SU-1", "abandoned but published", func(e *world.EntryRecord) {
			e.Abandoned, e.Published = true, true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec *world.EntryRecord
			w := stepUntil(t, func(w *world.World) bool {
				for _, e := range w.Ledger.All {
					if len(e.Consumptions) == 0 && len(e.OkCalls) == 0 && e.Aborted == 0 && e.RemovedCause == "" && !e.Abandoned {
						rec = e
						return len(w.Ledger.All) > 1
					}
				}
				return false
			})
			if len(w.Ledger.Touched) != 0 {
				t.Fatalf("%d entries still touched after a passing check", len(w.Ledger.Touched))
			}
			tc.plant(rec)
			w.Ledger.Touch(rec) // as every writer of these fields does
			wantCaught(t, w, tc.rule, tc.part)
		})
	}
}

// TestEveryEntryWriterTouches: checkEntries looks only at the ledger's
// Touched entries, so every step that changes a field entrySuspect reads
// must have touched the entry. Over many seeds (correct and mutant
// worlds), each step's changes are compared with Touched before the check.
func TestEveryEntryWriterTouches(t *testing.T) {
	type fields struct {
		nc, nok, aborted     int
		removed              string
		abandoned, published bool
	}
	of := func(e *world.EntryRecord) fields {
		return fields{len(e.Consumptions), len(e.OkCalls), e.Aborted, e.RemovedCause, e.Abandoned, e.Published}
	}
	mutants := append([]world.Mutant{world.MutantNone}, slices.Sorted(maps.Keys(world.Mutants))...)
	changed := 0
	for _, m := range mutants {
		for seed := uint64(1); seed <= 40; seed++ {
			w := world.NewWorld(seed, world.DrawSettings(seed), world.Options{Mutant: m})
			before := map[*world.EntryRecord]fields{}
			w.Start()
			for w.Fail == nil {
				for _, e := range w.Ledger.All {
					before[e] = of(e)
				}
				done, ok := dispatchNext(w)
				if !ok {
					break
				}
				touched := map[*world.EntryRecord]bool{}
				for _, e := range w.Ledger.Touched {
					touched[e] = true
				}
				for _, e := range w.Ledger.All {
					was, seen := before[e]
					if !seen {
						was = fields{}
					}
					if of(e) != was {
						changed++
						if !touched[e] {
							t.Fatalf("mutant %q seed %d step %d: entry %s changed (%+v -> %+v) but is not in Ledger.Touched", m, seed, w.Steps, world.Short(e.Id), was, of(e))
						}
					}
				}
				w.CheckStep()
				if done {
					break
				}
			}
		}
	}
	if changed == 0 {
		t.Fatal("no step changed an entry")
	}
	t.Logf("%d entry changes over %d worlds, each touched", changed, 40*len(mutants))
}

// TestGatedCheckersCatchLateEntries: checkStep calls most checkers only
// when their log or list holds something they have not judged (an inline
// test of the checker's own "nothing new" condition). Each case plants one
// entry in a passing world's log after many steps and wants the very next
// checkStep to fail with its rule.
func TestGatedCheckersCatchLateEntries(t *testing.T) {
	someRecord := func(w *world.World) *world.EntryRecord { return w.Ledger.All[0] }
	for _, tc := range []struct {
		name, rule, part string
		plant            func(w *world.World)
	}{
		{"receive freed on its deadline", "Q-1", "deadline passed", func(w *world.World) {
			w.RecvEnds = append(w.RecvEnds, world.RecvEnd{Key: "r99/late", Cause: world.CauseDeadline, Freed: true})
		}},
		{"take with an oversize reference is fine, a relabelled one is not", "SU-5", "never sealed", func(w *world.World) {
			rec := someRecord(w)
			w.Ledger.Takes = append(w.Ledger.Takes,
				world.Take{Rec: rec, Key: "r98/late", Call: world.CallKey{H: 0, Rpc: 9998}, Form: world.FormOversize},
				world.Take{Rec: rec, Key: "r99/late", Call: world.CallKey{H: 0, Rpc: 9999}, Form: world.FormOversize + 1})
		}},
		{"served after a producer crash", "SU-2", "served after the crash", func(w *world.World) {
			rec := someRecord(w)
			w.Nodes.Lost = append(w.Nodes.Lost, world.LostEntry{Rec: rec, Consumptions: len(rec.Consumptions)})
			rec.Consumptions = append(rec.Consumptions, "r99/late")
		}},
		{"revived after a cancel", "C-2", "late encoder completion revived it", func(w *world.World) {
			rec := someRecord(w)
			rec.CancelledBeforeReady, rec.Published, rec.ReadyUndelivered = true, true, false
			w.Ledger.Cancelled = append(w.Ledger.Cancelled, rec)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := stepUntil(t, func(w *world.World) bool {
				return len(w.Ledger.All) > 0 && len(w.Ledger.Cancelled) == 0 && len(w.Nodes.Lost) == 0 && len(w.Ledger.Touched) == 0 &&
					w.Judged.RecvEnds == len(w.RecvEnds) && w.Judged.Takes == len(w.Ledger.Takes) && len(w.Ledger.Takes) > 0
			})
			tc.plant(w)
			wantCaught(t, w, tc.rule, tc.part)
		})
	}
}

// TestIncrementalExpiryCatchesLateEntry: X-2's look skips the ledger's
// leading ended entries (Judged.Ended); an entry after them, still
// published long past its TTL, is caught at the next look.
func TestIncrementalExpiryCatchesLateEntry(t *testing.T) {
	var rec *world.EntryRecord
	w := stepUntil(t, func(w *world.World) bool {
		if w.Judged.Ended == 0 || w.Prod.Stopped || w.Nodes.ProdDown {
			return false
		}
		for _, e := range w.Ledger.All[w.Judged.Ended:] {
			if e.Published && !e.Terminal() && w.Prod.Table.State(e.Id) == handoff.EntryPublished {
				rec = e
				return true
			}
		}
		return false
	})
	// The ledger says its TTL passed at tick 0: the collector missed it.
	rec.ExpiresMs, rec.CommittedMs = 0, 0
	w.NextExpiryCheck = w.Now
	wantCaught(t, w, "X-2", "still published")
}
