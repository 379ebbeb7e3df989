package producer

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/engine/handoff"
)

// TestFinishRemoval: the removal path tells the core what the store did:
// a removal that took the storage answers ABORTED (SU-3) and releases the
// entry; one that found it gone (a consumer claimed it first) answers
// ALREADY_FINISHED and counts it consumed (SU-1); a failed removal, or one
// the engine's hook turns into a failure, is X-1: ErrCleanupFailed, the
// engine's FailCleanup, and a later release answers CleanupFailed, never
// ALREADY_FINISHED.
func TestFinishRemoval(t *testing.T) {
	for _, tc := range []struct {
		name       string
		inStore    bool
		removeErr  error
		hookErr    error
		wantOut    handoff.ReleaseOutcome
		wantErr    bool
		wantAgain  handoff.ReleaseOutcome
		wantCounts handoff.ProducerCounters
	}{
		{name: "removed", inStore: true, wantOut: handoff.ReleaseAborted, wantAgain: handoff.ReleaseAlreadyFinished,
			wantCounts: handoff.ProducerCounters{Published: 1, Released: 1}},
		{name: "claimed first", inStore: false, wantOut: handoff.ReleaseAlreadyFinished, wantAgain: handoff.ReleaseAlreadyFinished,
			wantCounts: handoff.ProducerCounters{Published: 1, Consumed: 1}},
		{name: "store fails", inStore: true, removeErr: errDisk, wantErr: true, wantAgain: handoff.ReleaseCleanupFailed,
			wantCounts: handoff.ProducerCounters{Published: 1, Released: 1}},
		{name: "cleanup_fail hook", inStore: true, hookErr: errDisk, wantErr: true, wantAgain: handoff.ReleaseCleanupFailed,
			wantCounts: handoff.ProducerCounters{Published: 1, Released: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			if tc.hookErr != nil {
				env.failOn = map[string]error{idA: tc.hookErr}
			}
			store := newEntries()
			if tc.inStore {
				store.items[idA] = true
			}
			store.removeErr[idA] = tc.removeErr
			tb := New(handoff.ProducerConfig{QuotaBytes: 1 << 20})
			publish(t, tb, 1<<40, idA)
			if out := tb.Release(idA); out != handoff.ReleaseRemove {
				t.Fatalf("Release = %v; want ReleaseRemove", out)
			}
			d := &Driver{Table: tb, Env: env, Entries: store, Log: discard}
			out, err := d.FinishRemoval(idA, false)
			if tc.wantErr {
				if !errors.Is(err, handoff.ErrCleanupFailed) || !strings.Contains(err.Error(), "X-1") {
					t.Errorf("FinishRemoval = %v, %v; want an X-1 error wrapping handoff.ErrCleanupFailed", out, err)
				}
				if len(env.cleanupFailures) != 1 {
					t.Errorf("FailCleanup calls %q; want one (X-1 is never swallowed)", env.cleanupFailures)
				}
			} else {
				if err != nil || out != tc.wantOut {
					t.Errorf("FinishRemoval = %v, %v; want %v", out, err, tc.wantOut)
				}
				if len(env.cleanupFailures) != 0 {
					t.Errorf("FailCleanup calls %q; want none", env.cleanupFailures)
				}
			}
			if !slices.Equal(env.removalsEnded, []string{idA}) {
				t.Errorf("RemovalEndedLocked calls %q; want one for %s", env.removalsEnded, idA)
			}
			if st := tb.State(idA); st == handoff.EntryRemoving || st == handoff.EntryPublished {
				t.Errorf("entry state after its removal ended = %v; want it out of the table", st)
			}
			if again := tb.Release(idA); again != tc.wantAgain {
				t.Errorf("Release after the removal = %v; want %v", again, tc.wantAgain)
			}
			if c := tb.Counters(); c != tc.wantCounts {
				t.Errorf("counters %+v; want %+v", c, tc.wantCounts)
			}
		})
	}
}

// TestCollect: one collector pass marks entries consumers claimed as
// consumed (the store no longer holds them), expires and removes those
// past their TTL (X-2, each counted as a removal started), and collects
// the store's leftovers; the X-2 mutant expires nothing, the X-2 race
// mutant (CollectorTrustsTable) skips the claims and reports an expired
// entry already gone as a failed removal, and a failing store collection
// is X-1.
func TestCollect(t *testing.T) {
	const nowMs = 10_000
	now := func() time.Time { return time.UnixMilli(nowMs) }
	setup := func(t *testing.T) (*fakeEnv, *fakeEntries, *Table, *Driver) {
		env, store := newEnv(t), newEntries(idB) // idA was claimed by a consumer
		tb := New(handoff.ProducerConfig{QuotaBytes: 1 << 20})
		publish(t, tb, nowMs-1, idB)     // expired
		publish(t, tb, nowMs+1_000, idA) // live, but claimed
		return env, store, tb, &Driver{Table: tb, Env: env, Entries: store, Log: discard}
	}
	t.Run("contract", func(t *testing.T) {
		env, store, tb, d := setup(t)
		d.Collect(now)
		if slices.Contains(tb.Published(), idA) {
			t.Errorf("claimed entry still published; want it consumed (ObserveClaims)")
		}
		if c := tb.Counters(); c.Expired != 1 || c.Consumed != 1 {
			t.Errorf("counters %+v; want 1 expired, 1 consumed", c)
		}
		if held := store.held(); len(held) != 0 {
			t.Errorf("store still holds %q; want the expired entry removed", held)
		}
		if env.started != 1 || !slices.Equal(env.removalsEnded, []string{idB}) {
			t.Errorf("removals started %d, ended %q; want 1 and [%s]", env.started, env.removalsEnded, idB)
		}
		if !slices.Equal(store.collected, []int64{nowMs}) {
			t.Errorf("store collected at %v; want once at %d", store.collected, nowMs)
		}
		if len(env.cleanupFailures) != 0 {
			t.Errorf("cleanup failures %q; want none", env.cleanupFailures)
		}
	})
	t.Run("no expiry mutant", func(t *testing.T) {
		env, store, tb, d := setup(t)
		env.m.NoExpiryCollection = true
		d.Collect(now)
		if st := tb.State(idB); st != handoff.EntryPublished || !slices.Contains(store.held(), idB) {
			t.Errorf("expired entry under NoExpiryCollection: state %v, store %q; want it left published", st, store.held())
		}
	})
	t.Run("collector trusts table", func(t *testing.T) {
		env, store, tb, d := setup(t)
		d.CollectorTrustsTable = true
		store.items = map[string]bool{} // idB vanished too: a consumer claimed it just before its expiry
		d.Collect(now)
		if st := tb.State(idA); st != handoff.EntryPublished {
			t.Errorf("claimed entry under CollectorTrustsTable = %v; want PUBLISHED (the claims are not looked at)", st)
		}
		if len(env.cleanupFailures) != 1 || tb.Release(idB) != handoff.ReleaseCleanupFailed {
			t.Errorf("cleanup failures %q; want the vanished expired entry reported as one (the mutant)", env.cleanupFailures)
		}
	})
	t.Run("store collect fails", func(t *testing.T) {
		env, store, _, d := setup(t)
		store.collectErr = errDisk
		d.Collect(now)
		if len(env.cleanupFailures) != 1 || !strings.Contains(env.cleanupFailures[0], "collect orphans") {
			t.Errorf("cleanup failures %q; want the failed collection (X-1)", env.cleanupFailures)
		}
	})
}

// TestExpire: Expire asks decide at the clock's time under the lock and
// removes exactly what it returns; a failed removal is X-1 and the others
// still run.
func TestExpire(t *testing.T) {
	env, store := newEnv(t), newEntries(idA, idB)
	store.removeErr[idA] = errDisk
	tb := New(handoff.ProducerConfig{QuotaBytes: 1 << 20})
	publish(t, tb, 500, idA, idB)
	d := &Driver{Table: tb, Env: env, Entries: store, Log: discard}
	var asked []int64
	d.Expire(func() time.Time { return time.UnixMilli(700) }, func(nowMs int64) []string {
		if !env.held {
			t.Errorf("decide ran without the lock")
		}
		asked = append(asked, nowMs)
		return tb.Expire(nowMs)
	})
	if !slices.Equal(asked, []int64{700}) {
		t.Errorf("decide asked at %v; want once at 700", asked)
	}
	if env.started != 2 || !slices.Equal(env.removalsEnded, []string{idA, idB}) {
		t.Errorf("removals started %d, ended %q; want 2, both ids", env.started, env.removalsEnded)
	}
	if held := store.held(); !slices.Equal(held, []string{idA}) {
		t.Errorf("store holds %q; want only the entry whose removal failed", held)
	}
	if len(env.cleanupFailures) != 1 || tb.Counters().Expired != 1 {
		t.Errorf("cleanup failures %q, counters %+v; want one failure (X-1) and one expiry", env.cleanupFailures, tb.Counters())
	}
}

// TestDrain: the drain removes every unconsumed entry (S-2), counting the
// removals started, and closes the store (S-4); its first failure is
// returned; the S-2 mutant returns before the removals.
func TestDrain(t *testing.T) {
	t.Run("contract", func(t *testing.T) {
		env, store := newEnv(t), newEntries(idA, idB)
		tb := New(handoff.ProducerConfig{QuotaBytes: 1 << 20})
		publish(t, tb, 1<<40, idA, idB)
		d := &Driver{Table: tb, Env: env, Entries: store, Log: discard}
		if err := d.Drain(); err != nil {
			t.Fatalf("Drain = %v", err)
		}
		if len(store.held()) != 0 || !store.closed || tb.Entries() != 0 || env.started != 2 {
			t.Errorf("after Drain: store %q closed %v, table entries %d, removals started %d; want empty, closed, 0, 2", store.held(), store.closed, tb.Entries(), env.started)
		}
		if c := tb.Counters(); c.Released != 2 {
			t.Errorf("counters %+v; want both released", c)
		}
	})
	t.Run("failures", func(t *testing.T) {
		env, store := newEnv(t), newEntries(idA, idB)
		store.removeErr[idA] = errDisk
		store.closeErr = errors.New("close failed")
		tb := New(handoff.ProducerConfig{QuotaBytes: 1 << 20})
		publish(t, tb, 1<<40, idA, idB)
		d := &Driver{Table: tb, Env: env, Entries: store, Log: discard}
		err := d.Drain()
		if !errors.Is(err, handoff.ErrCleanupFailed) {
			t.Errorf("Drain = %v; want the first removal's failure", err)
		}
		if !store.closed || len(env.cleanupFailures) != 2 || slices.Contains(store.held(), idB) {
			t.Errorf("store closed %v, cleanup failures %q, store %q; want closed, two failures (removal, close), %s removed", store.closed, env.cleanupFailures, store.held(), idB)
		}
	})
	t.Run("drain before cleanup mutant", func(t *testing.T) {
		env, store := newEnv(t), newEntries(idA)
		env.m.DrainBeforeCleanup = true
		tb := New(handoff.ProducerConfig{QuotaBytes: 1 << 20})
		publish(t, tb, 1<<40, idA)
		d := &Driver{Table: tb, Env: env, Entries: store, Log: discard}
		if err := d.Drain(); err != nil || !slices.Equal(store.held(), []string{idA}) || store.closed {
			t.Errorf("Drain under DrainBeforeCleanup = %v, store %q closed %v; want nil with the removal not run", err, store.held(), store.closed)
		}
	})
}
