package world

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestHistoryCatchesMutant: under the read-without-claim mutant (SU-1) some
// seed's client-visible history is not linearizable, the same seed's
// history under the correct driver is, and the failing history is written
// as porcupine's HTML visualization.
func TestHistoryCatchesMutant(t *testing.T) {
	for seed := uint64(1); seed <= 2000; seed++ {
		r := RunSeed(seed, Options{Mutant: MutantReadWithoutClaim, KeepHistory: true, HistoryOnly: true})
		if r.Verdict == Passed {
			continue
		}
		msg := CheckHistory(r.History)
		if r.Rule != "history" || msg == "" {
			t.Fatalf("seed %d: %v %s %s; with HistoryOnly want a history failure", seed, r.Verdict, r.Rule, r.Failure)
		}
		t.Logf("seed %d: %s", seed, msg)
		if !strings.Contains(msg, "-> OK") {
			t.Errorf("seed %d: the failing history should show the consumes answered OK: %s", seed, msg)
		}
		good := RunSeed(seed, Options{KeepHistory: true})
		if good.Verdict != Passed || CheckHistory(good.History) != "" {
			t.Errorf("seed %d without the mutant: %v %s; history %q; want PASSED and a linearizable history", seed, good.Verdict, good.Failure, CheckHistory(good.History))
		}
		path := filepath.Join(t.TempDir(), "h.html")
		wrote, err := WriteHistoryHTML(path, r.History)
		if err != nil || !wrote {
			t.Fatalf("WriteHistoryHTML = %v, %v; want the visualization written", wrote, err)
		}
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), "<html") || !strings.Contains(string(b), "consume(") {
			t.Fatalf("visualization %s (%d bytes, %v) lacks the HTML page or the operations", path, len(b), err)
		}
		if p, err := WriteHistory(t.TempDir(), r, Options{HistoryOnly: true}); err != nil || p == "" {
			t.Errorf("WriteHistory(seed %d) = %q, %v; want the re-run's visualization", seed, p, err)
		}
		return
	}
	t.Fatal("no seed in 1..2000 gave a non-linearizable history under read-without-claim")
}

// TestHistoryModel checks the entry model on hand-made histories: each
// row must be linearizable or not as stated.
func TestHistoryModel(t *testing.T) {
	const e = "e0000000000000000000000000000000"
	pub := HistoryOp{Client: 0, Kind: OpPublish, Entry: e, Call: 0, Return: 1, Result: ResOK}
	op := func(client int, k OpKind, call, ret, res int64) HistoryOp {
		return HistoryOp{Client: client, Kind: k, Entry: e, Call: call, Return: ret, Result: res}
	}
	for _, tc := range []struct {
		name string
		ops  []HistoryOp
		ok   bool
	}{
		{"consume then replay", []HistoryOp{pub, op(0, OpConsume, 2, 3, ResOK), op(0, OpConsume, 4, 5, ResSpent)}, true},
		{"two consumes answered OK (SU-1)", []HistoryOp{pub, op(0, OpConsume, 2, 3, ResOK), op(1, OpConsume, 4, 5, ResOK)}, false},
		{"concurrent consumes, one wins", []HistoryOp{pub, op(0, OpConsume, 2, 6, ResSpent), op(1, OpConsume, 3, 5, ResOK)}, true},
		{"ABORTED after a consume answered OK (SU-3)", []HistoryOp{pub, op(0, OpConsume, 2, 3, ResOK), op(0, OpRelease, 4, 5, ResAborted)}, false},
		{"OK after a release answered ABORTED (SU-2)", []HistoryOp{pub, op(0, OpRelease, 2, 3, ResAborted), op(1, OpConsume, 4, 5, ResOK)}, false},
		{"a lost consume may have taken it", []HistoryOp{pub, op(0, OpConsume, 2, ReturnUnknown, 0), op(0, OpRelease, 4, 5, ResAlreadyFinished)}, true},
		{"ALREADY_FINISHED for a live entry", []HistoryOp{pub, op(0, OpRelease, 2, 3, ResAlreadyFinished)}, false},
		{"ALREADY_FINISHED once it may have lapsed", []HistoryOp{pub, func() HistoryOp { o := op(0, OpRelease, 2, 3, ResAlreadyFinished); o.MayLapse = true; return o }()}, true},
		{"release twice", []HistoryOp{pub, op(0, OpRelease, 2, 3, ResAborted), op(0, OpRelease, 4, 5, ResAlreadyFinished)}, true},
	} {
		if got := CheckHistory(tc.ops) == ""; got != tc.ok {
			t.Errorf("%s: linearizable = %v, want %v (%s)", tc.name, got, tc.ok, CheckHistory(tc.ops))
		}
	}
}

// TestHistoryFastPathAgrees: the fast paths (sequential replay, the small
// search) and porcupine alone give the same verdict on the histories of
// many seeds, with and without a mutant (so on linearizable and
// non-linearizable ones), and on each entry's operations separately.
func TestHistoryFastPathAgrees(t *testing.T) {
	bad := 0
	for seed := uint64(1); seed <= 400; seed++ {
		for _, m := range []Mutant{MutantNone, MutantReadWithoutClaim} {
			ops := RunSeed(seed, Options{Mutant: m, KeepHistory: true, HistoryOnly: true}).History
			fast := CheckHistory(ops) == ""
			slow := porcupine.CheckOperations(historyModel.ToModel(), porcupineOps(ops))
			if fast != slow {
				t.Fatalf("seed %d mutant %q: fast path says linearizable=%v, porcupine %v", seed, m, fast, slow)
			}
			if !slow {
				bad++
			}
			model := historyModel.ToModel()
			for _, part := range model.Partition(porcupineOps(ops)) {
				var h []HistoryOp
				for _, op := range part {
					h = append(h, op.Input.(HistoryOp))
				}
				if got, want := searchLinearizable(h), porcupine.CheckOperations(model, part); got != want && len(h) <= 30 {
					t.Fatalf("seed %d mutant %q entry %s: search says %v, porcupine %v", seed, m, Short(h[0].Entry), got, want)
				}
			}
		}
	}
	if bad == 0 {
		t.Fatal("no non-linearizable history among the seeds: the comparison showed nothing")
	}
	t.Logf("%d non-linearizable histories agreed on", bad)
}

// TestHistoryGroupingAgrees: on random histories whose calls do not
// decrease (as a run records them), grouping operations by entry
// (groupByEntry) leaves to porcupine the same operations of each entry, in
// the same order, as sorting them (sortByEntry), so CheckHistory's verdict
// and description are the same either way.
func TestHistoryGroupingAgrees(t *testing.T) {
	const seed = 20261205
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	results := []int64{ResOK, ResSpent, ResAborted, ResAlreadyFinished, ResUnavailable, ResCancelled}
	var entries []string
	for i := 0; i < 8; i++ {
		entries = append(entries, fmt.Sprintf("%032x", r.Uint64()))
	}
	failing := 0
	for n := 0; n < 3000; n++ {
		ops := make([]HistoryOp, r.IntN(40))
		call := int64(0)
		for i := range ops {
			call += int64(r.IntN(3))
			ret := call + int64(r.IntN(20))
			if r.IntN(6) == 0 {
				ret = ReturnUnknown
			}
			ops[i] = HistoryOp{
				Client: r.IntN(4), Race: r.IntN(8) == 0, Kind: OpKind(1 + r.IntN(3)),
				Entry: entries[r.IntN(1+r.IntN(len(entries)))], Call: call, Return: ret,
				Result: results[r.IntN(len(results))], MayLapse: r.IntN(5) == 0, Probe: r.IntN(10) == 0,
			}
		}
		if !callsInOrder(ops) {
			t.Fatalf("history %d: calls out of order", n)
		}
		sb := new(sequentialBufs)
		order, ok := sb.groupByEntry(ops)
		if !ok {
			t.Fatalf("history %d: not grouped", n)
		}
		grouped := slices.Clone(sb.replay(ops, order))
		sorted := sb.replay(ops, slices.Clone(sb.sortByEntry(ops)))
		// The same operations of each entry, in the same order.
		byEntry := slices.Clone(grouped)
		slices.SortStableFunc(byEntry, func(a, b HistoryOp) int { return strings.Compare(a.Entry, b.Entry) })
		if !slices.Equal(byEntry, sorted) {
			t.Fatalf("history %d: grouped rest %v, sorted rest %v", n, grouped, sorted)
		}
		if len(sorted) == 0 {
			continue
		}
		failing++
		if g, s := describeIllegal(grouped), describeIllegal(sorted); g != s {
			t.Fatalf("history %d: grouped %q, sorted %q", n, g, s)
		}
		model := historyModel.ToModel()
		if g, s := porcupine.CheckOperations(model, porcupineOps(grouped)), porcupine.CheckOperations(model, porcupineOps(sorted)); g != s {
			t.Fatalf("history %d: porcupine says %v grouped, %v sorted", n, g, s)
		}
	}
	if failing == 0 {
		t.Fatal("no history left operations to porcupine: the comparison showed nothing")
	}
	// More entries than maxGroups, or calls out of order: sortByEntry's order.
	var many []HistoryOp
	for i := 0; i <= maxGroups; i++ {
		many = append(many, HistoryOp{Kind: OpPublish, Entry: fmt.Sprintf("%032x", i), Call: int64(i), Return: int64(i), Result: ResOK})
	}
	if _, ok := new(sequentialBufs).groupByEntry(many); ok {
		t.Fatalf("%d entries grouped, want sortByEntry's order", len(many))
	}
	many[1].Call = 5
	if _, ok := new(sequentialBufs).groupByEntry(many[:3]); ok {
		t.Fatal("calls out of order grouped, want sortByEntry's order")
	}
	if msg := CheckHistory(many); msg != "" {
		t.Fatalf("%d publishes: %s", len(many), msg)
	}
	t.Logf("%d histories with operations left to porcupine agreed on", failing)
}

// TestPendingCallsPastFew: calls not yet answered past history.few's
// room go to the map, and each call is found once, wherever it is kept.
func TestPendingCallsPastFew(t *testing.T) {
	h := &history{pending: map[opKey]int{}}
	n := 3*pendingInline + 1
	key := func(i int) opKey { k, _ := newOpKey(int32(i%3), int64(i), OpRelease); return k }
	for i := 0; i < n; i++ {
		h.putPending(key(i), i)
	}
	h.putPending(key(1), 100) // a second call of the same key replaces the first
	for _, i := range []int{5, 1, n - 1, 0, pendingInline, 7} {
		op, ok := h.takePending(int32(i%3), int64(i), OpRelease)
		want := i
		if i == 1 {
			want = 100
		}
		if !ok || op != want {
			t.Fatalf("call %d: %d %v, want %d", i, op, ok, want)
		}
		if _, ok := h.takePending(int32(i%3), int64(i), OpRelease); ok {
			t.Fatalf("call %d found twice", i)
		}
	}
	for i := 0; i < n; i++ {
		h.takePending(int32(i%3), int64(i), OpRelease)
	}
	if h.nFew != 0 || len(h.pending) != 0 {
		t.Fatalf("left %d in few, %d in the map", h.nFew, len(h.pending))
	}
}
