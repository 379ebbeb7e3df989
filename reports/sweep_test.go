package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sweepPart builds shard i of n of seeds from..to as a simulator would
// write it: blocks as the simulator splits them, one correctness failure
// at the block's first seed, coverage proportional to its seeds.
func sweepPart(i, n int, from, to uint64) SweepResult {
	N := to - from + 1
	a, b := from+uint64(i)*N/uint64(n), from+uint64(i+1)*N/uint64(n)-1
	r := SweepResult{Format: SweepFormat, World: SweepWorldHandoff, Commit: "c0ffee", BatonVersion: "dev", Range: SeedRange{from, to},
		Shard: ShardRef{i, n}, Verdicts: map[string]int64{}, Failures: []SweepFailure{}, Determinism: Determinism{OneIn: 100}}
	r.Coverage = &SweepCoverage{GateMinSeeds: 10000, Sites: map[string]SiteCount{"net.drop": {}, "disk.vanish": {}}, Points: map[string]int64{},
		Sometimes: map[string]SometimesCount{"consumer.cancelled-mid-transfer": {Rule: "C-4", Text: "a cancel"}}}
	if b < a {
		r.Finish()
		return r
	}
	r.Seeds = &SeedRange{a, b}
	r.Runs = int64(b - a + 1)
	r.Verdicts[SweepPassed] = r.Runs - 1
	r.Verdicts[SweepCorrectness] = 1
	r.Events, r.Ticks = 10*r.Runs, 100*r.Runs
	r.Failures = []SweepFailure{{Seed: a, Verdict: SweepCorrectness, Rule: "SU-1", Failure: "SU-1 at tick 1", Events: 10, Replay: "baton sim --seed N"}}
	r.Determinism.Sampled = r.Runs / 100
	r.Coverage = &SweepCoverage{GateMinSeeds: 10000,
		Sites:     map[string]SiteCount{"net.drop": {Fired: 2 * r.Runs, Seeds: r.Runs, ByPoint: map[string]int64{"client-start": r.Runs, "consume-arrive": r.Runs}}, "disk.vanish": {}},
		Points:    map[string]int64{"collect": 5 * r.Runs},
		Sometimes: map[string]SometimesCount{"consumer.cancelled-mid-transfer": {Rule: "C-4", Text: "a cancel", Hits: r.Runs / 1000, Seeds: r.Runs / 1000}}}
	if i == 0 {
		r.Coverage.Sites["disk.vanish"] = SiteCount{Fired: 1, Seeds: 1, ByPoint: map[string]int64{"collect": 1}}
	}
	r.Finish()
	return r
}

// testTargets are sweepPart's fault sites and sometimes state.
var testTargets = CoverageTargets{GateMinSeeds: 10000, Sites: []string{"disk.vanish", "net.drop"},
	Sometimes: []SometimesTarget{{Name: "consumer.cancelled-mid-transfer", Rule: "C-4", Text: "a cancel"}}}

func named(rs ...SweepResult) []NamedSweep {
	out := make([]NamedSweep, len(rs))
	for i, r := range rs {
		out[i] = NamedSweep{Name: "shard-" + r.Shard.String() + ".json", Result: r}
	}
	return out
}

// TestMergeSweepsAddsShardsUp: the merge of 4 shards is the whole range
// with every count added and the failures in seed order; the gate judges
// the merged seed count, which no shard reached alone.
func TestMergeSweepsAddsShardsUp(t *testing.T) {
	parts := []SweepResult{sweepPart(2, 4, 1, 20000), sweepPart(0, 4, 1, 20000), sweepPart(3, 4, 1, 20000), sweepPart(1, 4, 1, 20000)}
	for _, p := range parts {
		if p.GateApplies() || p.Verdict != SweepCorrectness {
			t.Fatalf("shard %s: gate applies %v, verdict %s", p.Shard, p.GateApplies(), p.Verdict)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("shard %s: %v", p.Shard, err)
		}
	}
	m, err := mergeForTest(named(parts...), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if m.Runs != 20000 || m.Verdicts[SweepCorrectness] != 4 || m.Events != 200000 || *m.Seeds != m.Range || m.MergedShards != 4 || m.Shard != (ShardRef{0, 1}) {
		t.Fatalf("merged: %+v", m)
	}
	if len(m.Failures) != 4 || m.Failures[0].Seed != 1 || m.Failures[3].Seed != 15001 || m.FailuresOmitted != 0 {
		t.Errorf("failures %+v, omitted %d", m.Failures, m.FailuresOmitted)
	}
	if c := m.Coverage; c.Sites["net.drop"].Fired != 40000 || c.Sites["net.drop"].ByPoint["consume-arrive"] != 20000 || c.Points["collect"] != 100000 || c.Sometimes["consumer.cancelled-mid-transfer"].Hits != 20 || c.Sites["disk.vanish"].Fired != 1 {
		t.Errorf("coverage %+v", c)
	}
	if !m.GateApplies() || len(m.Unreached) != 0 || m.Verdict != SweepCorrectness || m.Determinism.Sampled != 200 {
		t.Errorf("gate %v unreached %v verdict %s", m.GateApplies(), m.Unreached, m.Verdict)
	}
	if err := m.Validate(); err != nil {
		t.Errorf("the merge does not validate: %v", err)
	}
	if m2, err := mergeForTest(named(parts...), 2); err != nil || len(m2.Failures) != 2 || m2.FailuresOmitted != 2 || m2.Failures[1].Seed != 5001 {
		t.Errorf("keep 2: %+v, %v", m2.Failures, err)
	}
}

// TestMergeSweepsGate: a merged sweep of at least GateMinSeeds seeds in
// which a site never fired or a sometimes state was never reached fails
// with the coverage verdict, naming each.
func TestMergeSweepsGate(t *testing.T) {
	var parts []SweepResult
	for i := 0; i < 4; i++ {
		p := sweepPart(i, 4, 1, 20000)
		p.Verdicts[SweepPassed]++
		p.Verdicts[SweepCorrectness] = 0
		p.Failures = []SweepFailure{}
		if i == 0 {
			p.Coverage.Sites["disk.vanish"] = SiteCount{}
		}
		st := p.Coverage.Sometimes["consumer.cancelled-mid-transfer"]
		st.Hits, st.Seeds = 0, 0
		p.Coverage.Sometimes["consumer.cancelled-mid-transfer"] = st
		p.Finish()
		parts = append(parts, p)
	}
	m, err := mergeForTest(named(parts...), 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fault site disk.vanish never fired", "sometimes state consumer.cancelled-mid-transfer (C-4) never reached: a cancel"}
	if m.Verdict != SweepCoverageGap || strings.Join(m.Unreached, "|") != strings.Join(want, "|") {
		t.Fatalf("verdict %s, unreached %q", m.Verdict, m.Unreached)
	}
	text := strings.Join(m.Lines(), "\n")
	for _, w := range append(want, "verdict: coverage", "gate: every fault site fires", "; applied)", "consumer.cancelled-mid-transfer              C-4") {
		if !strings.Contains(text, w) {
			t.Errorf("the summary lacks %q:\n%s", w, text)
		}
	}
}

// TestMergeSweepsNamesWhatIsWrong: a missing shard, a shard given twice, a
// shard from another commit, another range or world, and an earlier merge
// are each named; nothing is merged.
func TestMergeSweepsNamesWhatIsWrong(t *testing.T) {
	p := func(i int) SweepResult { return sweepPart(i, 4, 1, 1000) }
	other := p(3)
	other.Commit = "deadbeef"
	otherRange := p(3)
	otherRange.Range.To = 999
	merged, err := mergeForTest(named(p(0), p(1), p(2), p(3)), 10)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		in   []NamedSweep
		want []string
	}{
		"missing":     {named(p(0), p(1), p(3)), []string{"shard 2/4 missing (seeds 501..750 not covered)"}},
		"two missing": {named(p(0), p(3)), []string{"shards 1/4, 2/4 missing (seeds 251..750 not covered)"}},
		"last":        {named(p(0), p(1), p(2)), []string{"shard 3/4 missing (seeds 751..1000 not covered)"}},
		"twice":       {named(p(0), p(1), p(1), p(2), p(3)), []string{"shard 1/4 given twice"}},
		"commit":      {named(p(0), p(1), p(2), other), []string{"shard-3/4.json (shard 3/4) ran on commit deadbeef, the others on c0ffee"}},
		"range":       {named(p(0), p(1), p(2), otherRange), []string{"is shard 3/4 of handoff seeds 1..999", "shard 3/4 missing"}},
		"merge again": {append(named(p(0)), NamedSweep{"merged.json", merged}), []string{"merged.json is already a merge of 4 shards"}},
		"none":        {nil, []string{"no sweep results given"}},
	}
	for name, tc := range cases {
		_, err := mergeForTest(tc.in, 10)
		var me *MergeError
		if !errors.As(err, &me) || !errors.Is(err, ErrBadSweep) {
			t.Errorf("%s: %v, want a MergeError", name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", name, err, w)
			}
		}
	}
}

// TestMergeSweepsEmptyShards: with more shards than seeds the empty
// shards' results still count (a missing one is named) and the merge
// covers the range.
func TestMergeSweepsEmptyShards(t *testing.T) {
	var parts []SweepResult
	for i := 0; i < 5; i++ {
		parts = append(parts, sweepPart(i, 5, 10, 12))
	}
	m, err := mergeForTest(named(parts...), 10)
	if err != nil || m.Runs != 3 {
		t.Fatalf("merge: %+v, %v", m, err)
	}
	empty := -1
	for i, p := range parts {
		if p.Seeds == nil {
			empty = i
		}
	}
	rest := append(append([]SweepResult{}, parts[:empty]...), parts[empty+1:]...)
	if _, err := mergeForTest(named(rest...), 10); err == nil || !strings.Contains(err.Error(), "missing") || strings.Contains(err.Error(), "not covered") {
		t.Errorf("an empty shard missing: %v", err)
	}
}

// TestParseSweepMalformed: unknown fields, trailing data and inconsistent
// counts are rejected; a written result reads back equal.
func TestParseSweepMalformed(t *testing.T) {
	good := sweepPart(1, 4, 1, 1000)
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteSweep(path, good); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSweep(path)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(good)
	b, _ := json.Marshal(back)
	if string(a) != string(b) {
		t.Fatalf("round trip:\n%s\n%s", a, b)
	}
	raw, _ := os.ReadFile(path)
	mutate := func(f func(r *SweepResult)) []byte {
		r := good
		r.Verdicts = map[string]int64{}
		for k, v := range good.Verdicts {
			r.Verdicts[k] = v
		}
		f(&r)
		out, _ := json.Marshal(r)
		return out
	}
	bad := map[string][]byte{
		"not JSON":          []byte("{"),
		"trailing":          append(append([]byte{}, raw...), '{', '}'),
		"unknown field":     []byte(strings.Replace(string(raw), `"format"`, `"extra": 1, "format"`, 1)),
		"format":            mutate(func(r *SweepResult) { r.Format = "v0" }),
		"world":             mutate(func(r *SweepResult) { r.World = "mars" }),
		"shard":             mutate(func(r *SweepResult) { r.Shard.Index = 4 }),
		"block outside":     mutate(func(r *SweepResult) { r.Seeds = &SeedRange{900, 1100} }),
		"runs":              mutate(func(r *SweepResult) { r.Runs++ }),
		"verdict counts":    mutate(func(r *SweepResult) { r.Verdicts[SweepPassed]--; r.Verdicts[SweepLiveness] = 0 }),
		"unknown verdict":   mutate(func(r *SweepResult) { r.Verdicts["coverage"] = 0 }),
		"failure outside":   mutate(func(r *SweepResult) { r.Failures = []SweepFailure{{Seed: 1, Verdict: SweepCorrectness}} }),
		"failure verdict":   mutate(func(r *SweepResult) { r.Failures = []SweepFailure{{Seed: 300, Verdict: SweepPassed}} }),
		"omitted":           mutate(func(r *SweepResult) { r.FailuresOmitted = 3 }),
		"verdict":           mutate(func(r *SweepResult) { r.Verdict = SweepPassed }),
		"diverged > sample": mutate(func(r *SweepResult) { r.Determinism.Diverged = r.Determinism.Sampled + 1 }),
		"site by point": mutate(func(r *SweepResult) {
			r.Coverage = &SweepCoverage{Sites: map[string]SiteCount{"x": {Fired: 2, ByPoint: map[string]int64{"p": 1}}}}
		}),
		"only shard":               mutate(func(r *SweepResult) { r.Shard = ShardRef{0, 1} }),
		"handoff without coverage": mutate(func(r *SweepResult) { r.Coverage = nil }),
		"executor with coverage":   mutate(func(r *SweepResult) { r.World = SweepWorldExecutor }),
	}
	for name, b := range bad {
		if _, err := ParseSweep(b); !errors.Is(err, ErrBadSweep) {
			t.Errorf("%s: %v, want ErrBadSweep", name, err)
		}
	}
}

// FuzzParseSweep: never panics; what it accepts validates and re-encodes
// to an equal accepted result.
func FuzzParseSweep(f *testing.F) {
	for _, r := range []SweepResult{sweepPart(0, 2, 1, 30), sweepPart(1, 3, 5, 6)} {
		b, _ := json.Marshal(r)
		f.Add(b)
	}
	f.Add([]byte(`{"format":"baton-sim-sweep-v1"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseSweep(b)
		if err != nil {
			if !errors.Is(err, ErrBadSweep) {
				t.Fatalf("error does not wrap ErrBadSweep: %v", err)
			}
			return
		}
		again, _ := json.Marshal(r)
		r2, err := ParseSweep(again)
		if err != nil {
			t.Fatalf("an accepted result does not re-parse: %v", err)
		}
		if b2, _ := json.Marshal(r2); string(b2) != string(again) {
			t.Fatalf("re-encoding changed the result")
		}
	})
}

// mergeForTest is MergeSweeps as the gap tests call it.
func mergeForTest(in []NamedSweep, keep int) (SweepResult, error) {
	return MergeSweeps(in, MergeOptions{Keep: keep, Targets: testTargets})
}

// passingParts is the 4 shards of 1..20000 with no failure, each changed
// by edit (then finished again).
func passingParts(edit func(i int, r *SweepResult)) []SweepResult {
	var parts []SweepResult
	for i := 0; i < 4; i++ {
		p := sweepPart(i, 4, 1, 20000)
		p.Verdicts[SweepPassed]++
		p.Verdicts[SweepCorrectness] = 0
		p.Failures = []SweepFailure{}
		edit(i, &p)
		p.Finish()
		parts = append(parts, p)
	}
	return parts
}

// TestMergeSweepsMissingCoverageKeyCountsAsZero: a fault site or sometimes
// state that no shard's file names is one the sweep never reached: the
// merge's gate judges every target, not only the keys in the files.
func TestMergeSweepsMissingCoverageKeyCountsAsZero(t *testing.T) {
	parts := passingParts(func(i int, r *SweepResult) {
		delete(r.Coverage.Sites, "disk.vanish")
		delete(r.Coverage.Sometimes, "consumer.cancelled-mid-transfer")
	})
	m, err := mergeForTest(named(parts...), 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fault site disk.vanish never fired", "sometimes state consumer.cancelled-mid-transfer (C-4) never reached: a cancel"}
	if m.Verdict != SweepCoverageGap || strings.Join(m.Unreached, "|") != strings.Join(want, "|") {
		t.Fatalf("verdict %s, unreached %q; want coverage and %q", m.Verdict, m.Unreached, want)
	}
	if _, ok := m.Coverage.Sites["disk.vanish"]; !ok {
		t.Errorf("the merged table lacks the site nobody reached: %+v", m.Coverage.Sites)
	}
	if err := m.Validate(); err != nil {
		t.Errorf("the merge does not validate: %v", err)
	}
}

// TestMergeSweepsGateLengthFromTargets: shards that claim a gate of 0
// seeds (no gate) are still judged by the simulator's gate length.
func TestMergeSweepsGateLengthFromTargets(t *testing.T) {
	parts := passingParts(func(i int, r *SweepResult) {
		r.Coverage.GateMinSeeds = 0
		delete(r.Coverage.Sites, "disk.vanish")
	})
	m, err := mergeForTest(named(parts...), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !m.GateApplies() || m.Verdict != SweepCoverageGap {
		t.Errorf("gate applies %v, verdict %s; want the gate of 10000 seeds to fail the sweep", m.GateApplies(), m.Verdict)
	}
}

// TestMergeSweepsRejectsHandoffWithoutCoverage: a handoff result with no
// coverage would leave the gate blind to its seeds: the merge names it,
// and ParseSweep rejects it.
func TestMergeSweepsRejectsHandoffWithoutCoverage(t *testing.T) {
	parts := passingParts(func(i int, r *SweepResult) {
		if i == 2 {
			r.Coverage = nil
		}
	})
	_, err := mergeForTest(named(parts...), 1000)
	if !errors.Is(err, ErrBadSweep) || !strings.Contains(fmt.Sprint(err), "shard-2/4.json (shard 2/4) is a handoff result without coverage") {
		t.Errorf("merge: %v, want the shard without coverage named", err)
	}
	if _, err := MergeSweeps(named(sweepPart(0, 1, 1, 10)), MergeOptions{}); !errors.Is(err, ErrBadSweep) || !strings.Contains(err.Error(), "no coverage targets given") {
		t.Errorf("a handoff merge without targets: %v", err)
	}
	raw, _ := json.Marshal(parts[2])
	if _, err := ParseSweep(raw); !errors.Is(err, ErrBadSweep) || !strings.Contains(err.Error(), "without coverage") {
		t.Errorf("ParseSweep: %v, want ErrBadSweep for a handoff result without coverage", err)
	}
}

// TestMergeSweepsRejectsUnknownCoverageKey: a site or state the simulator
// does not have means the result came from another simulator: named.
func TestMergeSweepsRejectsUnknownCoverageKey(t *testing.T) {
	parts := passingParts(func(i int, r *SweepResult) {
		if i == 1 {
			r.Coverage.Sites["net.teleport"] = SiteCount{}
			r.Coverage.Sometimes["producer.dreams"] = SometimesCount{Rule: "Z-9"}
		}
	})
	_, err := mergeForTest(named(parts...), 1000)
	for _, w := range []string{"shard-1/4.json (shard 1/4) counts fault site net.teleport", "shard-1/4.json (shard 1/4) counts sometimes state producer.dreams"} {
		if !errors.Is(err, ErrBadSweep) || !strings.Contains(fmt.Sprint(err), w) {
			t.Errorf("merge: %v, want %q", err, w)
		}
	}
}

// TestMergeSweepsUnstamped: shards of an unstamped build (commit
// "unknown") cannot be told apart from another unstamped build's, so the
// merge names them unless the caller allows it.
func TestMergeSweepsUnstamped(t *testing.T) {
	parts := passingParts(func(i int, r *SweepResult) { r.Commit = UnstampedCommit })
	_, err := mergeForTest(named(parts...), 1000)
	if !errors.Is(err, ErrBadSweep) || !strings.Contains(fmt.Sprint(err), "shard-0/4.json (shard 0/4) ran on an unstamped build (commit unknown)") {
		t.Errorf("merge: %v, want the unstamped shards named", err)
	}
	m, err := mergeUnstampedForTest(named(parts...), 1000)
	if err != nil || m.Commit != UnstampedCommit || m.Runs != 20000 {
		t.Errorf("allowed: %v, commit %q, %d runs", err, m.Commit, m.Runs)
	}
}

func mergeUnstampedForTest(in []NamedSweep, keep int) (SweepResult, error) {
	return MergeSweeps(in, MergeOptions{Keep: keep, Targets: testTargets, AllowUnstamped: true})
}
