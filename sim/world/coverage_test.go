package world

import (
	"bytes"
	"testing"
)

// TestCoverageLeavesTracesAlone: counting coverage draws nothing and
// writes nothing, so a run with Options.Coverage writes the same trace
// bytes as one without (and the counts are not empty).
func TestCoverageLeavesTracesAlone(t *testing.T) {
	for _, tc := range determinismSeeds {
		var plain, counted bytes.Buffer
		Run(tc.seed, DrawSettings(tc.seed), Options{Mutant: tc.mutant, Trace: &plain})
		cov := &Coverage{}
		Run(tc.seed, DrawSettings(tc.seed), Options{Mutant: tc.mutant, Trace: &counted, Coverage: cov})
		if !bytes.Equal(plain.Bytes(), counted.Bytes()) {
			t.Errorf("seed %d mutant %q: the trace changed with coverage on (%d vs %d bytes)", tc.seed, tc.mutant, plain.Len(), counted.Len())
		}
		var steps int64
		for _, n := range cov.Points() {
			steps += n
		}
		if cov.Runs != 1 || steps == 0 {
			t.Errorf("seed %d: coverage counted %d runs, %d steps", tc.seed, cov.Runs, steps)
		}
	}
}

// TestCoverageMatchesTheRuns: a site's fires by point add up to what the
// runs report in Result.Fired, its seeds to the runs it fired in, and the
// steps per point to the runs' events; a sweep's coverage does not depend
// on its job count.
func TestCoverageMatchesTheRuns(t *testing.T) {
	const from, to = 1, 60
	cov := &Coverage{}
	fired, seeds := map[Site]int64{}, map[Site]int64{}
	var events int64
	for seed := uint64(from); seed <= to; seed++ {
		r := RunSeed(seed, Options{Coverage: cov})
		events += r.Events
		for s, n := range r.Fired {
			fired[s] += int64(n)
			seeds[s]++
		}
	}
	for _, row := range cov.Sites() {
		var sum int64
		for _, n := range row.ByPoint {
			sum += n
		}
		if row.Fired != fired[row.Site] || sum != row.Fired || row.Seeds != seeds[row.Site] {
			t.Errorf("site %s: coverage fired %d (by point %d) in %d seeds; the runs say %d in %d", row.Site, row.Fired, sum, row.Seeds, fired[row.Site], seeds[row.Site])
		}
	}
	var steps int64
	for _, n := range cov.Points() {
		steps += n
	}
	if steps != events || cov.Runs != to-from+1 {
		t.Errorf("coverage counted %d steps in %d runs; the runs took %d events", steps, cov.Runs, events)
	}
	a := Sweep(SweepConfig{From: from, To: to, Jobs: 1}).Coverage
	b := Sweep(SweepConfig{From: from, To: to, Jobs: 3}).Coverage
	if *a != *b || a.Runs != cov.Runs || a.Points()["collect"] != cov.Points()["collect"] {
		t.Errorf("sweep coverage depends on the job count or differs from the runs' (%d, %d, %d runs)", a.Runs, b.Runs, cov.Runs)
	}
}

// TestSometimesStatesAreNamed: every sometimes state has a unique name, a
// rule and a text (the gate's message names them).
func TestSometimesStatesAreNamed(t *testing.T) {
	seen := map[string]bool{}
	for i, st := range SometimesStates {
		if st.Name == "" || st.Rule == "" || st.Text == "" || seen[st.Name] {
			t.Errorf("state %d: %+v", i, st)
		}
		seen[st.Name] = true
	}
}
