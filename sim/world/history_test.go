package world

import (
	"os"
	"path/filepath"
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
