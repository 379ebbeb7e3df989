package world

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// failingSeeds returns the first n seeds mutant m fails, with their results.
func failingSeeds(t *testing.T, m Mutant, n int) []Result {
	t.Helper()
	var out []Result
	for seed := uint64(1); len(out) < n && seed < 2000; seed++ {
		if r := RunSeed(seed, Options{Mutant: m}); r.Verdict != Passed {
			out = append(out, r)
		}
	}
	if len(out) < n {
		t.Fatalf("mutant %s failed only %d seeds", m, len(out))
	}
	return out
}

// TestStoreRecordsFailingSeeds: a failing seed is stored under its commit
// with its settings, mutant and a trace that replays to the same failure;
// a passing run of the same seed replaces it without a trace.
func TestStoreRecordsFailingSeeds(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenStore(dir, "abc123-dirty", 0)
	if err != nil {
		t.Fatal(err)
	}
	r := failingSeeds(t, MutantReadWithoutClaim, 1)[0]
	rec, kept, err := st.Record(r)
	if err != nil || !kept {
		t.Fatalf("Record: kept %v, %v", kept, err)
	}
	base := filepath.Join(dir, "abc123-dirty", storeName(r.Seed, r.Mutant))
	raw, err := os.ReadFile(base + ".json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseStoreRecord(raw)
	if err != nil || got.Seed != r.Seed || got.Mutant != r.Mutant || got.Commit != "abc123-dirty" || got.Verdict != "correctness" || got.Rule != r.Rule || got.Trace != filepath.Base(base)+".jsonl" || got.Events != r.Events {
		t.Fatalf("record %+v, %v (Record returned %+v)", got, err, rec)
	}
	again, err := Replay(base+".jsonl", Options{})
	if err != nil || again.Verdict != r.Verdict || again.Failure != r.Failure {
		t.Fatalf("the stored trace replays to %v %q, %v; want %v %q", again.Verdict, again.Failure, err, r.Verdict, r.Failure)
	}
	pass := RunSeed(r.Seed, Options{Mutant: r.Mutant})
	pass.Verdict, pass.Rule, pass.Failure = Passed, "", ""
	if _, kept, err := st.Record(pass); err != nil || !kept {
		t.Fatalf("Record(passing): %v %v", kept, err)
	}
	recs, err := ReadStore(dir)
	if err != nil || len(recs) != 1 || recs[0].Failing() || recs[0].Trace != "" {
		t.Fatalf("after the passing run: %+v, %v", recs, err)
	}
	if _, err := os.Stat(base + ".jsonl"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failing trace outlived its record: %v", err)
	}
}

// TestStoreKeepsTheMergeRuleOrder: per commit, at most keep records stay:
// failing before passing, fewer events before more; the pruned records'
// traces go with them; a record that ranks after a full store is not written.
func TestStoreKeepsTheMergeRuleOrder(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenStore(dir, "c1", 3)
	if err != nil {
		t.Fatal(err)
	}
	fails := failingSeeds(t, MutantReadWithoutClaim, 5)
	passing := RunSeed(fails[0].Seed+1000, Options{Mutant: MutantReadWithoutClaim})
	passing.Verdict, passing.Rule, passing.Failure = Passed, "", ""
	passing.Events = 1 // the fastest run of all, yet passing ranks last
	if _, _, err := st.Record(passing); err != nil {
		t.Fatal(err)
	}
	for _, r := range fails {
		if _, _, err := st.Record(r); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := ReadStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	byEvents := append([]Result(nil), fails...)
	for i := range byEvents {
		for j := i + 1; j < len(byEvents); j++ {
			if byEvents[j].Events < byEvents[i].Events || byEvents[j].Events == byEvents[i].Events && byEvents[j].Seed < byEvents[i].Seed {
				byEvents[i], byEvents[j] = byEvents[j], byEvents[i]
			}
		}
	}
	if len(recs) != 3 {
		t.Fatalf("%d records kept, want 3", len(recs))
	}
	for i, rec := range recs {
		if rec.Seed != byEvents[i].Seed || !rec.Failing() {
			t.Errorf("record %d: seed %d (%d events, failing %v), want seed %d (%d events)", i, rec.Seed, rec.Events, rec.Failing(), byEvents[i].Seed, byEvents[i].Events)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "c1", "seed-*"))
	if len(files) != 6 {
		t.Errorf("files %v: want 3 records and 3 traces", files)
	}
	slowest := byEvents[len(byEvents)-1]
	if _, kept, err := st.Record(slowest); err != nil || kept {
		t.Errorf("a record ranking after a full store: kept %v, %v", kept, err)
	}
}

// TestStoreSharedByProcesses: two stores on one directory (two shards'
// processes) recording concurrently keep one consistent, bounded set.
func TestStoreSharedByProcesses(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenStore(dir, "c", 4)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenStore(dir, "c", 4)
	if err != nil {
		t.Fatal(err)
	}
	fails := failingSeeds(t, MutantReadWithoutClaim, 8)
	var wg sync.WaitGroup
	for i, r := range fails {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := st.Record(r); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	recs, err := ReadStore(dir)
	if err != nil || len(recs) != 4 {
		t.Fatalf("%d records, %v; want 4", len(recs), err)
	}
	traces, _ := filepath.Glob(filepath.Join(dir, "c", "*.jsonl"))
	if len(traces) != 4 {
		t.Errorf("%d traces for 4 records", len(traces))
	}
}

// TestReplaySet: the records of one mutant, one per (seed, settings),
// failing first; StoreOwner gives each stored seed to one shard.
func TestReplaySet(t *testing.T) {
	s := DrawSettings(9)
	other := s
	other.Handoffs++
	recs := []StoreRecord{
		{Seed: 9, Settings: s, Verdict: "passed", Commit: "new"},
		{Seed: 9, Settings: s, Verdict: "correctness", Commit: "old"},
		{Seed: 9, Settings: other, Verdict: "correctness", Commit: "older"},
		{Seed: 3, Settings: DrawSettings(3), Verdict: "liveness"},
		{Seed: 4, Settings: DrawSettings(4), Verdict: "crash", Mutant: MutantFreeOnCancel},
	}
	got := ReplaySet(recs, MutantNone)
	if len(got) != 3 || got[0].Seed != 3 || got[1].Seed != 9 || got[2].Seed != 9 || got[1].Commit+","+got[2].Commit != "old,older" && got[1].Commit+","+got[2].Commit != "older,old" {
		t.Fatalf("ReplaySet = %+v", got)
	}
	if m := ReplaySet(recs, MutantFreeOnCancel); len(m) != 1 || m[0].Seed != 4 {
		t.Errorf("ReplaySet(free-on-cancel) = %+v", m)
	}
	counts := make([]int, 4)
	for seed := uint64(1); seed <= 4000; seed++ {
		counts[StoreOwner(seed, 4)]++
	}
	for i, n := range counts {
		if n < 800 || n > 1200 {
			t.Errorf("shard %d/4 owns %d of 4000 stored seeds", i, n)
		}
	}
}

// TestStoreMalformed: a malformed record is an error naming its file.
func TestStoreMalformed(t *testing.T) {
	good := StoreRecord{Format: StoreFormat, Seed: 5, Commit: "c", Settings: DrawSettings(5), Verdict: "correctness", Events: 3, Trace: "seed-5.jsonl", Replay: "baton sim --seed 5"}
	raw, _ := json.Marshal(good)
	if _, err := ParseStoreRecord(raw); err != nil {
		t.Fatalf("the good record: %v", err)
	}
	mutate := func(f func(map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	bad := map[string][]byte{
		"not JSON":        []byte("{"),
		"trailing":        append(append([]byte{}, raw...), []byte(" {}")...),
		"unknown field":   mutate(func(m map[string]any) { m["extra"] = 1 }),
		"format":          mutate(func(m map[string]any) { m["format"] = "v0" }),
		"verdict":         mutate(func(m map[string]any) { m["verdict"] = "failed" }),
		"mutant":          mutate(func(m map[string]any) { m["mutant"] = "nope" }),
		"settings":        mutate(func(m map[string]any) { m["settings"].(map[string]any)["backend"] = "x" }),
		"negative events": mutate(func(m map[string]any) { m["events"] = -1 }),
		"foreign trace":   mutate(func(m map[string]any) { m["trace"] = "../seed-6.jsonl" }),
	}
	for name, b := range bad {
		if _, err := ParseStoreRecord(b); !errors.Is(err, ErrBadStore) {
			t.Errorf("%s: %v, want ErrBadStore", name, err)
		}
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c", "seed-5.json")
	if err := os.WriteFile(path, bad["verdict"], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStore(dir); !errors.Is(err, ErrBadStore) || !strings.Contains(err.Error(), path) {
		t.Errorf("ReadStore: %v, want ErrBadStore naming %s", err, path)
	}
	if err := os.WriteFile(path, mutate(func(m map[string]any) { m["seed"] = 6; m["trace"] = "" }), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStore(dir); !errors.Is(err, ErrBadStore) {
		t.Errorf("a record under another seed's name: %v", err)
	}
	if recs, err := ReadStore(filepath.Join(dir, "missing")); err != nil || recs != nil {
		t.Errorf("a missing store: %v, %v", recs, err)
	}
	if got := CommitDirName("a/../b c"); got != "a_.._b_c" {
		t.Errorf("CommitDirName = %q", got)
	}
}

// FuzzParseStoreRecord: never panics; what it accepts re-encodes to a
// record it accepts again, equal to the first.
func FuzzParseStoreRecord(f *testing.F) {
	good := StoreRecord{Format: StoreFormat, Seed: 5, Commit: "c", Settings: DrawSettings(5), Verdict: "correctness", Events: 3, Trace: "seed-5.jsonl", Replay: "baton sim --seed 5"}
	raw, _ := json.Marshal(good)
	f.Add(raw)
	f.Add([]byte(`{"format":"baton-sim-seed-v1"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseStoreRecord(b)
		if err != nil {
			if !errors.Is(err, ErrBadStore) {
				t.Fatalf("error does not wrap ErrBadStore: %v", err)
			}
			return
		}
		again, _ := json.Marshal(r)
		r2, err := ParseStoreRecord(again)
		if err != nil {
			t.Fatalf("an accepted record does not re-parse: %v", err)
		}
		b2, _ := json.Marshal(r2)
		if string(b2) != string(again) {
			t.Fatalf("re-encoding changed the record:\n%s\n%s", again, b2)
		}
	})
}
