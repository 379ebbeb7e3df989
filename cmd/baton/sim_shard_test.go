package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-dev/baton/reports"
	"github.com/baton-dev/baton/sim"
	"github.com/baton-dev/baton/sim/executorworld"
)

// comparable is what a merge must share with one process's run of the
// same range (the shard layout itself differs).
func comparable(t *testing.T, r reports.SweepResult) string {
	t.Helper()
	r.Shard, r.Seeds, r.MergedShards = reports.ShardRef{}, nil, 0
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readSweep(t *testing.T, path string) reports.SweepResult {
	t.Helper()
	r, err := reports.ReadSweep(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSimShardsMergeToTheWholeRange: three shards of a range (two by
// --shard, one by JOB_COMPLETION_INDEX and BATON_SHARDS as a Kubernetes
// Indexed Job sets them) merge into exactly one process's result of the
// range: verdicts, failures, events, determinism sample and coverage.
func TestSimShardsMergeToTheWholeRange(t *testing.T) {
	dir := t.TempDir()
	common := []string{"--seeds", "1..90", "--progress", "off", "--mutant", "read-without-claim"}
	_, code := runSim(t, append(common, "--results", filepath.Join(dir, "whole.json"))...)
	if code != 1 {
		t.Fatalf("the whole range: exit %d", code)
	}
	shards := filepath.Join(dir, "shards")
	for _, i := range []string{"0", "2"} {
		if out, code := runSim(t, append(common, "--shard", i+"/3", "--results", filepath.Join(shards, i+".json"))...); code != 1 || !strings.Contains(out, "shard "+i+"/3 (seeds ") {
			t.Fatalf("shard %s/3: exit %d\n%s", i, code, out)
		}
	}
	t.Setenv(sim.EnvJobCompletionIndex, "1")
	t.Setenv(sim.EnvShards, "3")
	if out, code := runSim(t, append(common, "--results", filepath.Join(shards, "1.json"))...); code != 1 || !strings.Contains(out, "shard 1/3 (seeds 31..60)") {
		t.Fatalf("shard 1 from the environment: exit %d\n%s", code, out)
	}
	var out bytes.Buffer
	err := runReportMerge(&out, []string{shards}, mergeFlags{out: filepath.Join(dir, "merged.json"), allowUnstamped: true})
	var ex exitError
	if !asExit(err, &ex) || ex.code != 1 || !strings.Contains(out.String(), "seeds 1..90 (3 shards merged)") {
		t.Fatalf("merge: %v\n%s", err, out.String())
	}
	whole, merged := readSweep(t, filepath.Join(dir, "whole.json")), readSweep(t, filepath.Join(dir, "merged.json"))
	if merged.MergedShards != 3 || len(whole.Failures) == 0 {
		t.Fatalf("merged %d shards; the whole range has %d failures", merged.MergedShards, len(whole.Failures))
	}
	if a, b := comparable(t, whole), comparable(t, merged); a != b {
		t.Errorf("the merge differs from one process's run:\n--- whole\n%s\n--- merged\n%s", a, b)
	}
}

// TestSimShardFlagsMalformed: a shard out of range, --shard with --shards,
// a count without an index and a bad JOB_COMPLETION_INDEX are usage errors.
func TestSimShardFlagsMalformed(t *testing.T) {
	for _, args := range [][]string{{"--shard", "4/4"}, {"--shard", "1/4", "--shards", "4"}, {"--shards", "4"}, {"--shard", "x"}} {
		if out, code := runSim(t, append([]string{"--seeds", "1..4", "--progress", "off"}, args...)...); code != ExitUsage {
			t.Errorf("sim %v: exit %d, want %d\n%s", args, code, ExitUsage, out)
		}
	}
	t.Setenv(sim.EnvJobCompletionIndex, "x")
	if _, code := runSim(t, "--seeds", "1..4", "--shards", "2", "--progress", "off"); code != ExitUsage {
		t.Errorf("JOB_COMPLETION_INDEX=x: exit %d", code)
	}
}

// TestSimStoreAndReplayGate: --store keeps every failing seed of a mutant
// sweep under the commit with a trace that replays; --replay-store
// re-runs them before the range (they fail again, so the sweep fails even
// though its own range passes), split between shards; stored runs of
// another mutant are not re-run.
func TestSimStoreAndReplayGate(t *testing.T) {
	store := t.TempDir()
	out, code := runSim(t, "--seeds", "1..30", "--progress", "off", "--mutant", "read-without-claim", "--store", store)
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	recs, err := sim.ReadStore(store)
	if err != nil || len(recs) == 0 {
		t.Fatalf("store: %d records, %v", len(recs), err)
	}
	for _, r := range recs {
		if !r.Failing() || r.Mutant != sim.MutantReadWithoutClaim || r.Trace == "" {
			t.Errorf("record %+v", r)
		}
		if _, err := os.Stat(filepath.Join(store, sim.CommitDirName(r.Commit), r.Trace)); err != nil {
			t.Error(err)
		}
	}
	// Seed 1 passes under the mutant; the stored seeds do not.
	if r := sim.RunSeed(1, sim.Options{Mutant: sim.MutantReadWithoutClaim}); r.Verdict != sim.Passed {
		t.Fatalf("seed 1 fails under the mutant; the test needs a passing range")
	}
	out, code = runSim(t, "--seeds", "1..1", "--progress", "off", "--mutant", "read-without-claim", "--replay-store", store)
	if code != 1 || strings.Count(out, "FAIL (stored) seed=") != len(recs) || !strings.Contains(out, "replay: baton sim replay "+store) {
		t.Fatalf("replay gate: exit %d, want %d stored failures\n%s", code, len(recs), out)
	}
	seen := 0
	for _, sh := range []string{"0/2", "1/2"} {
		out, _ := runSim(t, "--seeds", "1..1", "--progress", "off", "--mutant", "read-without-claim", "--replay-store", store, "--shard", sh)
		seen += strings.Count(out, "FAIL (stored) seed=")
	}
	if seen != len(recs) {
		t.Errorf("two shards re-ran %d stored seeds, want %d", seen, len(recs))
	}
	if out, code := runSim(t, "--seeds", "1..1", "--progress", "off", "--replay-store", store); code != 0 || !strings.Contains(out, "store replay: 0 stored seeds re-run") {
		t.Errorf("without the mutant: exit %d\n%s", code, out)
	}
	bad := filepath.Join(store, "unknown", "seed-1.json")
	if err := os.WriteFile(bad, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code := runSim(t, "--seeds", "1..1", "--progress", "off", "--replay-store", store); code != ExitUsage {
		t.Errorf("a malformed record: exit %d, want %d", code, ExitUsage)
	}
}

// unstampedOK merges the results of this test binary, which is unstamped.
var unstampedOK = mergeFlags{allowUnstamped: true}

// TestReportMergeNamesProblems: `baton report merge` exits 3 naming a
// missing shard and a result from another commit.
func TestReportMergeNamesProblems(t *testing.T) {
	dir := t.TempDir()
	for _, i := range []string{"0", "1", "2"} {
		runSim(t, "--seeds", "1..12", "--progress", "off", "--shard", i+"/3", "--results", filepath.Join(dir, i+".json"))
	}
	if err := runReportMerge(&bytes.Buffer{}, []string{dir}, unstampedOK); err != nil {
		t.Fatalf("a complete merge: %v", err)
	}
	foreign := readSweep(t, filepath.Join(dir, "2.json"))
	foreign.Commit = "0123abcd"
	if err := reports.WriteSweep(filepath.Join(dir, "2.json"), foreign); err != nil {
		t.Fatal(err)
	}
	err := runReportMerge(&bytes.Buffer{}, []string{dir}, unstampedOK)
	var ex exitError
	if !asExit(err, &ex) || ex.code != ExitUsage || !strings.Contains(ex.msg, "2.json (shard 2/3) ran on commit 0123abcd") {
		t.Errorf("another commit: %v", err)
	}
	os.Remove(filepath.Join(dir, "2.json"))
	err = runReportMerge(&bytes.Buffer{}, []string{filepath.Join(dir, "0.json"), filepath.Join(dir, "1.json")}, unstampedOK)
	if !asExit(err, &ex) || ex.code != ExitUsage || !strings.Contains(ex.msg, "shard 2/3 missing (seeds 9..12 not covered)") {
		t.Errorf("a missing shard: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "1.json"), []byte(`{"format":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runReportMerge(&bytes.Buffer{}, []string{dir}, unstampedOK); !asExit(err, &ex) || ex.code != ExitUsage || !strings.Contains(ex.msg, "1.json") {
		t.Errorf("a malformed result: %v", err)
	}
}

// TestSimExecutorShardsMerge: the executor world's shards merge into one
// process's result of the range.
func TestSimExecutorShardsMerge(t *testing.T) {
	dir := t.TempDir()
	if out, code := runSim(t, "executor", "--seeds", "1..16", "--results", filepath.Join(dir, "whole.json")); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, i := range []string{"0", "1"} {
		if out, code := runSim(t, "executor", "--seeds", "1..16", "--shard", i+"/2", "--results", filepath.Join(dir, "s", i+".json")); code != 0 {
			t.Fatalf("shard %s: exit %d\n%s", i, code, out)
		}
	}
	if err := runReportMerge(&bytes.Buffer{}, []string{filepath.Join(dir, "s")}, mergeFlags{out: filepath.Join(dir, "merged.json"), allowUnstamped: true}); err != nil {
		t.Fatal(err)
	}
	if a, b := comparable(t, readSweep(t, filepath.Join(dir, "whole.json"))), comparable(t, readSweep(t, filepath.Join(dir, "merged.json"))); a != b {
		t.Errorf("merge differs:\n%s\n%s", a, b)
	}
}

// TestFuzzShardSplitsChecks: shard i of n runs its block of the checks
// with rapid seed --seed+i; a shard with no checks passes at once.
func TestFuzzShardSplitsChecks(t *testing.T) {
	f := fuzzFlags{checks: 10, seed: 5}
	var out bytes.Buffer
	if skip, err := applyFuzzShard(&out, sweepFlags{shard: "1/3"}, &f); skip || err != nil || f.checks != 3 || f.seed != 6 || !strings.Contains(out.String(), "checks 4..6 of 10") {
		t.Errorf("shard 1/3: skip %v err %v, checks %d seed %d, %q", skip, err, f.checks, f.seed, out.String())
	}
	f = fuzzFlags{checks: 2}
	if skip, err := applyFuzzShard(&out, sweepFlags{shard: "2/4"}, &f); !skip || err != nil {
		t.Errorf("an empty shard: skip %v, %v", skip, err)
	}
	t.Setenv(sim.EnvJobCompletionIndex, "2")
	t.Setenv(sim.EnvShards, "3")
	f = fuzzFlags{checks: 9}
	if skip, err := applyFuzzShard(&out, sweepFlags{}, &f); skip || err != nil || f.checks != 3 || f.seed != 0 {
		t.Errorf("shard 2/3 from the environment: %v %v, checks %d seed %d", skip, err, f.checks, f.seed)
	}
	if _, err := applyFuzzShard(&out, sweepFlags{shard: "9/3"}, &fuzzFlags{checks: 9}); err == nil {
		t.Error("shard 9/3 accepted")
	}
}

// TestKeepDivergences: a divergent seed's two traces are written and listed.
func TestKeepDivergences(t *testing.T) {
	var res reports.SweepResult
	d := sim.Divergence{Seed: 42, First: []byte("a\n"), Second: []byte("b\n")}
	dir := t.TempDir()
	if err := keepDivergences(&res, []sim.Divergence{d}, dir); err != nil {
		t.Fatal(err)
	}
	if len(res.Determinism.Divergences) != 1 || len(res.Determinism.Divergences[0].Traces) != 2 {
		t.Fatalf("%+v", res.Determinism)
	}
	for i, p := range res.Determinism.Divergences[0].Traces {
		if b, err := os.ReadFile(p); err != nil || string(b) != []string{"a\n", "b\n"}[i] {
			t.Errorf("%s: %q, %v", p, b, err)
		}
	}
}

// TestReportMergeUnstamped: this test binary is unstamped (commit
// reports.UnstampedCommit), so its shards are refused, each named, until
// --allow-unstamped.
func TestReportMergeUnstamped(t *testing.T) {
	dir := t.TempDir()
	for _, i := range []string{"0", "1"} {
		runSim(t, "--seeds", "1..4", "--progress", "off", "--shard", i+"/2", "--results", filepath.Join(dir, i+".json"))
	}
	if c := readSweep(t, filepath.Join(dir, "0.json")).Commit; c != reports.UnstampedCommit {
		t.Fatalf("a test binary ran on commit %q, want %q (unstamped)", c, reports.UnstampedCommit)
	}
	err := runReportMerge(&bytes.Buffer{}, []string{dir}, mergeFlags{})
	var ex exitError
	if !asExit(err, &ex) || ex.code != ExitUsage || !strings.Contains(ex.msg, "0.json (shard 0/2) ran on an unstamped build") ||
		!strings.Contains(ex.msg, "1.json (shard 1/2) ran on an unstamped build") || !strings.Contains(ex.msg, "--allow-unstamped") {
		t.Errorf("unstamped shards: %v", err)
	}
	if err := runReportMerge(&bytes.Buffer{}, []string{dir}, unstampedOK); err != nil {
		t.Errorf("with --allow-unstamped: %v", err)
	}
	if help := reportMergeCommand().Flags().Lookup("allow-unstamped"); help == nil || !strings.Contains(help.Usage, "unstamped") {
		t.Errorf("--allow-unstamped is not documented: %+v", help)
	}
}

// TestReportMergeJudgesEveryCoverageTarget: a handoff result without
// coverage is refused naming the file; a fault site or sometimes state
// that no shard's file names is in the merged table with 0 (the gate
// judges every site of sim.AllSites and state of sim.SometimesStates).
func TestReportMergeJudgesEveryCoverageTarget(t *testing.T) {
	dir := t.TempDir()
	for _, i := range []string{"0", "1"} {
		runSim(t, "--seeds", "1..6", "--progress", "off", "--shard", i+"/2", "--results", filepath.Join(dir, i+".json"))
	}
	site, state := string(sim.AllSites[0]), sim.SometimesStates[0].Name
	for _, i := range []string{"0", "1"} {
		r := readSweep(t, filepath.Join(dir, i+".json"))
		if len(r.Coverage.Sites) != len(sim.AllSites) || len(r.Coverage.Sometimes) != len(sim.SometimesStates) {
			t.Fatalf("shard %s counts %d sites and %d states, want every one of %d and %d", i, len(r.Coverage.Sites), len(r.Coverage.Sometimes), len(sim.AllSites), len(sim.SometimesStates))
		}
		delete(r.Coverage.Sites, site)
		delete(r.Coverage.Sometimes, state)
		r.Finish()
		if err := reports.WriteSweep(filepath.Join(dir, i+".json"), r); err != nil {
			t.Fatal(err)
		}
	}
	merged := filepath.Join(t.TempDir(), "merged.json")
	var out bytes.Buffer
	if err := runReportMerge(&out, []string{dir}, mergeFlags{out: merged, allowUnstamped: true}); err != nil {
		t.Fatalf("merge: %v\n%s", err, out.String())
	}
	m := readSweep(t, merged)
	if s, ok := m.Coverage.Sites[site]; !ok || s.Fired != 0 {
		t.Errorf("merged site %s: %+v, %v; want it with 0", site, s, ok)
	}
	if s, ok := m.Coverage.Sometimes[state]; !ok || s.Hits != 0 || s.Rule != sim.SometimesStates[0].Rule {
		t.Errorf("merged state %s: %+v, %v; want it with 0", state, s, ok)
	}
	r := readSweep(t, filepath.Join(dir, "1.json"))
	r.Coverage = nil
	raw, _ := json.Marshal(r)
	if err := os.WriteFile(filepath.Join(dir, "1.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	err := runReportMerge(&bytes.Buffer{}, []string{dir}, unstampedOK)
	var ex exitError
	if !asExit(err, &ex) || ex.code != ExitUsage || !strings.Contains(ex.msg, "1.json") || !strings.Contains(ex.msg, "without coverage") {
		t.Errorf("a handoff result without coverage: %v", err)
	}
}

// TestKeepExecutorDivergences: a divergent executor seed's two outcomes
// are kept as files (in --trace-dir, else a new temporary directory) and
// listed in the result, which then fails as nondeterministic.
func TestKeepExecutorDivergences(t *testing.T) {
	d := executorworld.Divergence{Seed: 7, First: []byte("seed=7 steps=3 err=<nil>\n"), Second: []byte("seed=7 steps=4 err=<nil>\n")}
	for _, dir := range []string{t.TempDir(), ""} {
		res, _, _, _ := newSweepResult(reports.SweepWorldExecutor, 7, 7, sim.Shard{}, "")
		res.Runs, res.Verdicts[reports.SweepPassed] = 1, 1
		res.Determinism.Sampled, res.Determinism.Diverged = 1, 1
		if err := keepExecutorDivergences(&res, []executorworld.Divergence{d}, dir); err != nil {
			t.Fatal(err)
		}
		if len(res.Determinism.Divergences) != 1 || len(res.Determinism.Divergences[0].Traces) != 2 {
			t.Fatalf("dir %q: %+v", dir, res.Determinism)
		}
		traces := res.Determinism.Divergences[0].Traces
		if dir == "" {
			t.Cleanup(func() { os.RemoveAll(filepath.Dir(traces[0])) })
		} else if filepath.Dir(traces[0]) != dir {
			t.Errorf("kept in %s, want --trace-dir %s", traces[0], dir)
		}
		for i, p := range traces {
			if b, err := os.ReadFile(p); err != nil || string(b) != string([][]byte{d.First, d.Second}[i]) || !strings.HasSuffix(p, []string{"executor-seed-7.run1.txt", "executor-seed-7.run2.txt"}[i]) {
				t.Errorf("%s: %q, %v", p, b, err)
			}
		}
		var out bytes.Buffer
		err := finishSweep(&out, res, sweepFlags{})
		var ex exitError
		if !asExit(err, &ex) || ex.code != ExitSimNondeterministic || !strings.Contains(out.String(), "NONDETERMINISTIC seed=7: two runs wrote different traces "+traces[0]+" "+traces[1]) {
			t.Errorf("dir %q: %v\n%s", dir, err, out.String())
		}
	}
	if err := keepExecutorDivergences(&reports.SweepResult{}, []executorworld.Divergence{d}, "/dev/null/x"); err == nil {
		t.Error("an unwritable --trace-dir: no error")
	}
}
