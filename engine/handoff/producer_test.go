package handoff

import (
	"errors"
	"fmt"
	"testing"
)

func id(n int) string { return fmt.Sprintf("%032x", n) }

func mustInvariants(t *testing.T, tb *ProducerTable) {
	t.Helper()
	if err := tb.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func published(t *testing.T, tb *ProducerTable, n int, payloadBytes, expiresMs int64) string {
	t.Helper()
	if err := tb.Reserve(id(n), payloadBytes); err != nil {
		t.Fatalf("Reserve(%d) = %v", n, err)
	}
	if err := tb.CommitPublish(id(n), expiresMs); err != nil {
		t.Fatal(err)
	}
	return id(n)
}

// TestProducerRelease covers SU-3: ABORTED once, ALREADY_FINISHED after and
// for consumed or expired entries; a consumer winning the race makes it CONSUMED.
func TestProducerRelease(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(tb *ProducerTable, e string)
		won    bool
		remove bool // Release answers ReleaseRemove
		want   ReleaseOutcome
	}{
		{"SU-3 first release of a published entry is ABORTED", func(*ProducerTable, string) {}, true, true, ReleaseAborted},
		{"SU-3 release losing the rename to a consumer is ALREADY_FINISHED", func(*ProducerTable, string) {}, false, true, ReleaseAlreadyFinished},
		{"SU-3 release of a consumed entry is ALREADY_FINISHED", func(tb *ProducerTable, e string) { tb.ObserveGone(e) }, true, false, ReleaseAlreadyFinished},
		{"SU-3 release of an expired entry is ALREADY_FINISHED", func(tb *ProducerTable, e string) {
			for _, x := range tb.Expire(100) {
				tb.RemovalDone(x, true)
			}
		}, true, false, ReleaseAlreadyFinished},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := NewProducerTable(ProducerConfig{QuotaBytes: 1000})
			e := published(t, tb, 1, 100, 50)
			c.setup(tb, e)
			got := tb.Release(e)
			if (got == ReleaseRemove) != c.remove {
				t.Fatalf("Release = %v, want remove=%v", got, c.remove)
			}
			if got == ReleaseRemove {
				got = tb.RemovalDone(e, c.won)
			}
			if got != c.want {
				t.Errorf("outcome = %v, want %v", got, c.want)
			}
			if again := tb.Release(e); again != ReleaseAlreadyFinished {
				t.Errorf("SU-3 second release = %v, want ALREADY_FINISHED", again)
			}
			mustInvariants(t, tb)
			if tb.Entries() != 0 || tb.HeldBytes() != 0 {
				t.Errorf("entry left: %d entries, %d bytes", tb.Entries(), tb.HeldBytes())
			}
		})
	}
}

// TestReleaseAfterFailedRemoval: once the removal of an entry failed,
// its storage may still be there for a consumer to claim, so every later
// release answers ReleaseCleanupFailed (UNAVAILABLE), never
// ALREADY_FINISHED: the client must not be told the reference is spent.
// Found by the simulator (seed 192999).
func TestReleaseAfterFailedRemoval(t *testing.T) {
	tb := NewProducerTable(ProducerConfig{QuotaBytes: 1000})
	e := published(t, tb, 1, 100, 50)
	if got := tb.Release(e); got != ReleaseRemove {
		t.Fatalf("Release = %v, want ReleaseRemove", got)
	}
	tb.RemovalFailed(e)
	mustInvariants(t, tb)
	for i := 0; i < 2; i++ {
		if got := tb.Release(e); got != ReleaseCleanupFailed {
			t.Errorf("release %d after the failed removal = %v, want ReleaseCleanupFailed (X-1, not ALREADY_FINISHED)", i+2, got)
		}
	}
	if other := published(t, tb, 2, 100, 50); tb.Release(id(99)) != ReleaseAlreadyFinished || tb.Release(other) != ReleaseRemove {
		t.Error("an unrelated or unknown entry's release changed")
	}
}

// TestReleaseDuringRemovalWaits: a release of an entry whose removal (by an
// earlier release, its expiry or the drain) has not ended answers
// ReleaseWait, never ALREADY_FINISHED at once: until the removal ends a
// consumer may still win the claim, or the removal may fail and leave the
// storage claimable, so the reference is not known to be spent
// (SU-2, SU-3). Once the removal ended, the same release is
// ALREADY_FINISHED (whoever won) or ReleaseCleanupFailed (it failed).
// Found by the simulator (seeds 576264, 954255).
func TestReleaseDuringRemovalWaits(t *testing.T) {
	type removal int
	const (
		removalWon removal = iota
		removalLost
		removalFailed
	)
	starts := []struct {
		name  string
		start func(tb *ProducerTable, e string) RemovalCause
	}{
		{"an earlier release", func(tb *ProducerTable, e string) RemovalCause {
			if got := tb.Release(e); got != ReleaseRemove {
				t.Fatalf("first Release = %v, want ReleaseRemove", got)
			}
			return CauseRelease
		}},
		{"its expiry", func(tb *ProducerTable, e string) RemovalCause {
			if got := tb.Expire(100); len(got) != 1 || got[0] != e {
				t.Fatalf("Expire = %v, want [%s]", got, e)
			}
			return CauseExpiry
		}},
		{"the drain", func(tb *ProducerTable, e string) RemovalCause {
			if got := tb.Drain(); len(got) != 1 || got[0] != e {
				t.Fatalf("Drain = %v, want [%s]", got, e)
			}
			return CauseDrain
		}},
	}
	ends := []struct {
		name  string
		end   removal
		after ReleaseOutcome
	}{
		{"the removal won", removalWon, ReleaseAlreadyFinished},
		{"a consumer's claim won", removalLost, ReleaseAlreadyFinished},
		{"the removal failed (X-1)", removalFailed, ReleaseCleanupFailed},
	}
	for _, st := range starts {
		for _, en := range ends {
			t.Run(fmt.Sprintf("SU-3 release during a removal by %s, then %s", st.name, en.name), func(t *testing.T) {
				tb := NewProducerTable(ProducerConfig{QuotaBytes: 1000})
				e := published(t, tb, 1, 100, 50)
				cause := st.start(tb, e)
				for i := 0; i < 2; i++ {
					if got := tb.Release(e); got != ReleaseWait {
						t.Fatalf("Release %d while the removal is in flight = %v, want ReleaseWait (the entry may still be claimed)", i+1, got)
					}
				}
				if got := tb.State(e); got != EntryRemoving {
					t.Fatalf("state after the waiting releases = %v, want REMOVING (they change nothing)", got)
				}
				switch en.end {
				case removalFailed:
					tb.RemovalFailed(e)
				default:
					got := tb.RemovalDone(e, en.end == removalWon)
					want := ReleaseAlreadyFinished
					if cause == CauseRelease && en.end == removalWon {
						want = ReleaseAborted
					}
					if got != want {
						t.Errorf("RemovalDone = %v, want %v (the first release's answer)", got, want)
					}
				}
				if got := tb.Release(e); got != en.after {
					t.Errorf("Release after the removal ended = %v, want %v", got, en.after)
				}
				mustInvariants(t, tb)
			})
		}
	}
}

// TestProducerQuota covers L-5: past the bound a publish fails with
// RESOURCE_EXHAUSTED and reserves nothing; released bytes come back.
func TestProducerQuota(t *testing.T) {
	tb := NewProducerTable(ProducerConfig{QuotaBytes: 250})
	a := published(t, tb, 1, 100, 1000)
	published(t, tb, 2, 100, 1000)
	err := tb.Reserve(id(3), 100)
	if !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("L-5 Reserve over quota = %v, want ErrQuotaExceeded", err)
	}
	if rule, code := Classify(err); rule != "L-5" || code != CodeResourceExhausted {
		t.Errorf("Classify = %s %d, want L-5 RESOURCE_EXHAUSTED", rule, code)
	}
	if tb.HeldBytes() != 200 || tb.Entries() != 2 {
		t.Errorf("L-5 failed publish left %d bytes, %d entries", tb.HeldBytes(), tb.Entries())
	}
	if tb.Release(a) != ReleaseRemove || tb.RemovalDone(a, true) != ReleaseAborted {
		t.Fatal("release")
	}
	if err := tb.Reserve(id(3), 100); err != nil {
		t.Errorf("L-5 after release Reserve = %v", err)
	}
	tb.AbandonPublish(id(3))
	mustInvariants(t, tb)
	if tb.HeldBytes() != 100 {
		t.Errorf("abandon left %d bytes, want 100", tb.HeldBytes())
	}
}

// TestProducerExpireAndDrain covers X-2 and S-2: expiry and drain remove
// published entries; a consumer that claimed first makes them CONSUMED.
func TestProducerExpireAndDrain(t *testing.T) {
	tb := NewProducerTable(ProducerConfig{})
	published(t, tb, 1, 10, 100)
	published(t, tb, 2, 10, 200)
	published(t, tb, 3, 10, 300)
	exp := tb.Expire(150)
	if len(exp) != 1 || exp[0] != id(1) {
		t.Fatalf("X-2 Expire(150) = %v, want [%s]", exp, id(1))
	}
	tb.RemovalDone(id(1), false) // a consumer had claimed it
	drain := tb.Drain()
	if len(drain) != 2 {
		t.Fatalf("S-2 Drain = %v", drain)
	}
	for _, x := range drain {
		tb.RemovalDone(x, true)
	}
	mustInvariants(t, tb)
	c := tb.Counters()
	if c.Published != 3 || c.Consumed != 1 || c.Released != 2 || c.Expired != 0 || tb.Entries() != 0 {
		t.Errorf("counters %+v, entries %d", c, tb.Entries())
	}
	if err := tb.Reserve("../etc/passwd", 1); !errors.Is(err, ErrBadRequest) {
		t.Errorf("SU-5 Reserve of a path id = %v, want ErrBadRequest", err)
	}
	if err := tb.Reserve(id(9), 0); !errors.Is(err, ErrBadRequest) {
		t.Errorf("Reserve of 0 bytes = %v", err)
	}
}

// TestConsumerReceives covers and L-5 on the consumer.
func TestConsumerReceives(t *testing.T) {
	c := NewConsumerReceives(ConsumerConfig{InflightQuotaBytes: 100})
	step := func(id string, steps ...func(string) error) {
		t.Helper()
		for _, s := range steps {
			if err := s(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.Preflight("a", 60); err != nil {
		t.Fatal(err)
	}
	if err := c.Preflight("b", 60); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("L-5 over in-flight quota = %v", err)
	}
	step("a", c.Registered, c.Requested, c.Rejected) // definite rejection releases
	if b, _ := c.Quarantine(); b != 0 || c.InflightBytes() != 0 {
		t.Fatalf("Q-2 rejected receive quarantined %d buffers", b)
	}
	if err := c.Preflight("c", 50); err != nil {
		t.Fatal(err)
	}
	step("c", c.Registered, c.Uncertain) // not sent yet: the buffers are ours
	if b, _ := c.Quarantine(); b != 0 {
		t.Fatalf("Q-1 receive never sent was quarantined")
	}
	if err := c.Preflight("d", 50); err != nil {
		t.Fatal(err)
	}
	step("d", c.Registered, c.Requested, c.Uncertain)
	if b, n := c.Quarantine(); b != 1 || n != 50 {
		t.Fatalf("Q-1 uncertain receive: quarantine %d buffers %d bytes, want 1, 50", b, n)
	}
	if err := c.Preflight("e", 1); !errors.Is(err, ErrQuarantined) {
		t.Fatalf("Q-4 new handoff after quarantine = %v, want ErrQuarantined", err)
	}
	if err := c.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestHealthAndShutdown covers S-1, Q-4 and X-1 stickiness.
func TestHealthAndShutdown(t *testing.T) {
	const me = "0f0e0d0c-0b0a-4908-8706-050403020100"
	cases := []struct {
		name     string
		expected string
		want     ShutdownStatus
		wantErr  error
		wantCode Code
	}{
		{"S-1 empty id is INVALID_ARGUMENT", "", 0, ErrShutdownIDMissing, CodeInvalidArgument},
		{"S-1 another id is FAILED_PRECONDITION", "11111111-2222-4333-8444-555555555555", 0, ErrShutdownIDMismatch, CodeFailedPrecondition},
		{"S-1 matching id is ACCEPTED", me, ShutdownAccepted, nil, CodeOK},
		{"S-1 repeat is ALREADY_SHUTTING_DOWN", me, ShutdownAlreadyShuttingDown, nil, CodeOK},
	}
	h := NewHealth()
	h.Started()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := h.DecideShutdown(c.expected, me)
			if got != c.want || !errors.Is(err, c.wantErr) {
				t.Fatalf("DecideShutdown(%q) = %v, %v; want %v, %v", c.expected, got, err, c.want, c.wantErr)
			}
			if _, code := Classify(err); code != c.wantCode {
				t.Errorf("code %d, want %d", code, c.wantCode)
			}
		})
	}
	if st, _ := h.State(); st != HealthDraining {
		t.Errorf("S-2 state after ACCEPTED = %v, want DRAINING", st)
	}
	h2 := NewHealth()
	h2.Started()
	h2.Fail(CheckCleanup, "remove failed")
	h2.Fail(CheckCleanup, "second reason is not kept")
	if st, checks := h2.State(); st != HealthNotReady || checks[0].Message != "remove failed" {
		t.Errorf("X-1 state = %v %v", st, checks)
	}
	if err := h2.Admit(); !errors.Is(err, ErrCleanupFailed) {
		t.Errorf("X-1 Admit = %v", err)
	}
}

// TestProducerTransfer covers Q-3: the entry leaves the table before the
// WRITE; a second claim, a release or an expiry cannot touch it; a failure
// after that point quarantines instead of freeing.
func TestProducerTransfer(t *testing.T) {
	cases := []struct {
		name            string
		fail            bool
		wantConsumed    uint64
		wantQuarantined uint64
	}{
		{"Q-3 completed WRITE consumes the entry", false, 1, 0},
		{"Q-3 failure after removal quarantines the source", true, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := NewProducerTable(ProducerConfig{QuotaBytes: 1000})
			e := published(t, tb, 1, 100, 50)
			if err := tb.ClaimForTransfer(e); err != nil {
				t.Fatal(err)
			}
			if err := tb.ClaimForTransfer(e); !errors.Is(err, ErrSpentReference) {
				t.Errorf("SU-1 second claim during transfer = %v, want ErrSpentReference", err)
			}
			if got := tb.Release(e); got != ReleaseAlreadyFinished {
				t.Errorf("SU-3 release during transfer = %v, want ALREADY_FINISHED", got)
			}
			if exp := tb.Expire(1000); len(exp) != 0 {
				t.Errorf("X-2 expiry touched a transferring entry: %v", exp)
			}
			if tb.Entries() != 1 || tb.HeldBytes() != 100 {
				t.Errorf("in transfer: %d entries %d bytes, want 1, 100", tb.Entries(), tb.HeldBytes())
			}
			mustInvariants(t, tb)
			if c.fail {
				if err := tb.TransferFailed(e); err != nil {
					t.Fatal(err)
				}
			} else if err := tb.TransferDone(e); err != nil {
				t.Fatal(err)
			}
			mustInvariants(t, tb)
			cs := tb.Counters()
			if cs.Consumed != c.wantConsumed || cs.Quarantined != c.wantQuarantined || tb.Entries() != 0 || tb.HeldBytes() != 0 {
				t.Errorf("counters %+v entries %d bytes %d", cs, tb.Entries(), tb.HeldBytes())
			}
			if err := tb.TransferDone(e); err == nil {
				t.Error("a transfer ended twice")
			}
		})
	}
}

// TestExpireBeforeRelease: an Abort of a reference whose TTL passed expires
// the table first, so its Release waits for the removal and then answers
// ALREADY_FINISHED, never ABORTED; before the TTL nothing changes and the
// Release removes (ABORTED).
func TestExpireBeforeRelease(t *testing.T) {
	tb := NewProducerTable(ProducerConfig{})
	a := published(t, tb, 1, 10, 100)
	b := published(t, tb, 2, 10, 100)
	v := tb.Version()
	if ids := tb.ExpireBeforeRelease(100, 99); ids != nil || tb.Version() != v {
		t.Fatalf("ExpireBeforeRelease before the TTL = %v (version %d -> %d); want nothing", ids, v, tb.Version())
	}
	ids := tb.ExpireBeforeRelease(100, 100)
	if len(ids) != 2 || ids[0] != a || ids[1] != b {
		t.Fatalf("ExpireBeforeRelease at the TTL = %v; want [%s %s]", ids, a, b)
	}
	if out := tb.Release(a); out != ReleaseWait {
		t.Fatalf("Release of an expiring entry = %v; want ReleaseWait", out)
	}
	tb.RemovalDone(a, true)
	tb.RemovalDone(b, true)
	if out := tb.Release(a); out != ReleaseAlreadyFinished {
		t.Fatalf("Release after the expiry's removal = %v; want ReleaseAlreadyFinished", out)
	}
	mustInvariants(t, tb)
}

// TestVersionCountsChanges: every call that changes the table moves its
// Version, and one that changes nothing (a rejection, a no-op) leaves it,
// so a caller skipping an unchanged table's invariant check misses nothing.
func TestVersionCountsChanges(t *testing.T) {
	tb := NewProducerTable(ProducerConfig{QuotaBytes: 100})
	a := published(t, tb, 1, 10, 100)
	step := func(what string, changes bool, f func()) {
		t.Helper()
		v := tb.Version()
		f()
		if moved := tb.Version() != v; moved != changes {
			t.Fatalf("%s: version moved %v, want %v", what, moved, changes)
		}
		mustInvariants(t, tb)
	}
	step("rejected Reserve (duplicate)", false, func() { _ = tb.Reserve(a, 10) })
	step("rejected Reserve (quota)", false, func() { _ = tb.Reserve(id(2), 1000) })
	step("rejected CommitPublish", false, func() { _ = tb.CommitPublish(id(3), 100) })
	step("no-op AbandonPublish", false, func() { tb.AbandonPublish(a) })
	step("no-op RemovalDone", false, func() { tb.RemovalDone(a, true) })
	step("no-op RemovalFailed", false, func() { tb.RemovalFailed(a) })
	step("no-op ObserveGone", false, func() { tb.ObserveGone(id(3)) })
	step("rejected TransferDone", false, func() { _ = tb.TransferDone(a) })
	step("rejected TransferFailed", false, func() { _ = tb.TransferFailed(a) })
	step("Expire of nothing", false, func() { tb.Expire(99) })
	step("Reserve", true, func() { _ = tb.Reserve(id(2), 10) })
	step("AbandonPublish", true, func() { tb.AbandonPublish(id(2)) })
	step("ClaimForTransfer", true, func() { _ = tb.ClaimForTransfer(a) })
	step("rejected ClaimForTransfer", false, func() { _ = tb.ClaimForTransfer(a) })
	step("TransferDone", true, func() { _ = tb.TransferDone(a) })
	b := published(t, tb, 4, 10, 100)
	step("Release", true, func() { tb.Release(b) })
	step("Release while removing", false, func() { tb.Release(b) })
	step("RemovalDone", true, func() { tb.RemovalDone(b, true) })
	step("Release of a released entry", false, func() { tb.Release(b) })
	c := published(t, tb, 5, 10, 100)
	step("ObserveGone", true, func() { tb.ObserveGone(c) })
	d := published(t, tb, 6, 10, 100)
	step("Expire", true, func() { tb.Expire(100) })
	step("RemovalFailed", true, func() { tb.RemovalFailed(d) })
	e := published(t, tb, 7, 10, 100)
	step("ClaimForTransfer", true, func() { _ = tb.ClaimForTransfer(e) })
	step("TransferFailed", true, func() { _ = tb.TransferFailed(e) })
	_ = published(t, tb, 8, 10, 100)
	step("Drain", true, func() { tb.Drain() })
}

// TestCheckInvariantsWalksWholeTable: the invariant check walks the live
// list, and still finds an entry the maps hold but the list lacks, or one
// listed that the maps no longer hold, and a wrong state or byte count.
func TestCheckInvariantsWalksWholeTable(t *testing.T) {
	plant := []struct {
		name string
		f    func(tb *ProducerTable, e *producerEntry)
	}{
		{"unlisted", func(tb *ProducerTable, e *producerEntry) { tb.unlink(e) }},
		{"unmapped", func(tb *ProducerTable, e *producerEntry) { delete(tb.entries, e.id) }},
		{"moved to transfers", func(tb *ProducerTable, e *producerEntry) {
			delete(tb.entries, e.id)
			tb.transfers = map[string]*producerEntry{e.id: e}
		}},
		{"in both maps", func(tb *ProducerTable, e *producerEntry) {
			e.state = EntryTransferring
			tb.transfers = map[string]*producerEntry{e.id: e}
		}},
		{"terminal", func(tb *ProducerTable, e *producerEntry) { e.state = EntryConsumed }},
		{"bytes", func(tb *ProducerTable, e *producerEntry) { e.payloadBytes++ }},
		{"rekeyed", func(tb *ProducerTable, e *producerEntry) {
			delete(tb.entries, e.id)
			tb.entries[id(99)] = e
		}},
	}
	for _, p := range plant {
		t.Run(p.name, func(t *testing.T) {
			tb := NewProducerTable(ProducerConfig{})
			published(t, tb, 1, 10, 100)
			b := published(t, tb, 2, 10, 100)
			published(t, tb, 3, 10, 100)
			mustInvariants(t, tb)
			p.f(tb, tb.entries[b])
			if err := tb.CheckInvariants(); err == nil {
				t.Fatal("not caught")
			}
		})
	}
}

// TestProducerReset: a table Reset after entries, a transfer and a failed
// removal is a new table under the new config: empty, no bytes held, the
// zero counters and version, and the new quota in force.
func TestProducerReset(t *testing.T) {
	tb := NewProducerTable(ProducerConfig{QuotaBytes: 1000})
	a := published(t, tb, 1, 100, 1000)
	published(t, tb, 2, 100, 1000)
	b := published(t, tb, 3, 100, 1000)
	if err := tb.ClaimForTransfer(b); err != nil {
		t.Fatal(err)
	}
	if tb.Release(a) != ReleaseRemove {
		t.Fatal("release")
	}
	tb.RemovalFailed(a)
	tb.Reset(ProducerConfig{QuotaBytes: 150})
	fresh := NewProducerTable(ProducerConfig{QuotaBytes: 150})
	if tb.Entries() != 0 || tb.Transfers() != 0 || tb.HeldBytes() != 0 || tb.PendingRemovals() != 0 ||
		tb.Counters() != fresh.Counters() || tb.Version() != fresh.Version() || tb.State(a) != fresh.State(a) {
		t.Fatalf("after Reset: %d entries, %d transfers, %d bytes, %d removals, counters %+v, version %d",
			tb.Entries(), tb.Transfers(), tb.HeldBytes(), tb.PendingRemovals(), tb.Counters(), tb.Version())
	}
	mustInvariants(t, tb)
	published(t, tb, 1, 100, 1000) // the same id again: forgotten
	if err := tb.Reserve(id(4), 100); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("Reserve over the new quota = %v, want ErrQuotaExceeded", err)
	}
	mustInvariants(t, tb)
	var zero ProducerTable
	zero.Reset(ProducerConfig{})
	published(t, &zero, 1, 100, 1000) // a zero table Reset is usable
}
