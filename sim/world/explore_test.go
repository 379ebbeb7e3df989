package world

import (
	"bytes"
	"testing"
)

// TestSweepKeepsTheLowestFailures: under a mutant that fails many seeds, a
// sweep keeps only KeepFailures failing runs, the lowest seeds, whatever
// its job count, and counts the rest.
func TestSweepKeepsTheLowestFailures(t *testing.T) {
	m := MutantReadWithoutClaim
	all := Sweep(SweepConfig{From: 1, To: 120, Jobs: 1, Mutant: m, KeepFailures: 1000})
	if len(all.Failures) < 10 {
		t.Fatalf("the mutant failed only %d of 120 seeds", len(all.Failures))
	}
	for _, jobs := range []int{1, 3} {
		s := Sweep(SweepConfig{From: 1, To: 120, Jobs: jobs, Mutant: m, KeepFailures: 5})
		if len(s.Failures) != 5 || s.FailuresOmitted != len(all.Failures)-5 {
			t.Fatalf("jobs %d: kept %d failures, omitted %d; want 5 and %d", jobs, len(s.Failures), s.FailuresOmitted, len(all.Failures)-5)
		}
		for i, r := range s.Failures {
			if r.Seed != all.Failures[i].Seed {
				t.Errorf("jobs %d: failure %d is seed %d, want %d", jobs, i, r.Seed, all.Failures[i].Seed)
			}
		}
	}
}

// TestDeterminismSampleIsOnePercentOfTheSeeds: the sample is a function of
// the seed, about one seed in DeterminismOneIn.
func TestDeterminismSampleIsOnePercentOfTheSeeds(t *testing.T) {
	n := 0
	for seed := uint64(1); seed <= 100000; seed++ {
		if DeterminismSampled(seed) {
			n++
		}
	}
	if n < 900 || n > 1100 {
		t.Errorf("%d of 100000 seeds sampled, want about 1000", n)
	}
}

// TestSweepRunsTheSampleTwice: every sampled passing seed is run twice; a
// second run that writes another trace is a divergence with both traces
// kept (the second run is made to diverge here).
func TestSweepRunsTheSampleTwice(t *testing.T) {
	first := uint64(1)
	for !DeterminismSampled(first) {
		first++
	}
	from, to := max(first, 11)-10, first+40 // a short range around a sampled seed
	var sampled []uint64
	for seed := from; seed <= to; seed++ {
		if DeterminismSampled(seed) {
			sampled = append(sampled, seed)
		}
	}
	s := Sweep(SweepConfig{From: from, To: to, Jobs: 2})
	if s.Sampled != len(sampled) || s.Diverged != 0 || len(sampled) == 0 {
		t.Fatalf("sampled %d (want %d), diverged %d", s.Sampled, len(sampled), s.Diverged)
	}
	defer func() { rerun = Run }()
	rerun = func(seed uint64, st Settings, opts Options) Result {
		r := Run(seed, st, opts)
		if seed == sampled[0] {
			_, _ = opts.Trace.Write([]byte("{\"diverged\":true}\n"))
		}
		return r
	}
	s = Sweep(SweepConfig{From: from, To: to, Jobs: 2})
	if s.Diverged != 1 || len(s.Divergences) != 1 {
		t.Fatalf("diverged %d, kept %d, want the one seed %d", s.Diverged, len(s.Divergences), sampled[0])
	}
	d := s.Divergences[0]
	if d.Seed != sampled[0] || bytes.Equal(d.First, d.Second) || !bytes.HasPrefix(d.Second, d.First) {
		t.Errorf("divergence of seed %d: %d and %d trace bytes", d.Seed, len(d.First), len(d.Second))
	}
	if s.ByVerdict[Passed] != int(to-from+1) {
		t.Errorf("a divergence changed the run verdicts: %v", s.ByVerdict)
	}
	dir := t.TempDir()
	paths, err := WriteDivergence(dir, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if h, err := ReadTraceFile(p); err != nil || h.Seed != d.Seed {
			t.Errorf("%s: header %+v, %v", p, h, err)
		}
	}
}
