package world

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
)

// DefaultKeepFailures is how many failing runs a Summary keeps by default:
// the ones with the lowest seeds (the rest are counted in FailuresOmitted),
// so a sweep's memory does not grow with its range even under a mutant
// that fails every seed.
const DefaultKeepFailures = 1000

// MaxDivergences is how many divergent seeds a Summary keeps with their
// two traces (the rest are counted in Diverged).
const MaxDivergences = 8

// DeterminismOneIn is the determinism sample's rate: one passing seed in
// DeterminismOneIn is run a second time and its trace compared byte for
// byte with the first run's (madsim's check).
const DeterminismOneIn = 100

// determinismSalt makes the sample a hash of the seed unrelated to the
// subsystem streams.
const determinismSalt = 0x5851f42d4c957f2d

// DeterminismSampled reports whether seed is in the determinism sample: a
// function of the seed alone, so every shard, every --jobs and every
// re-run of a range pick the same seeds.
func DeterminismSampled(seed uint64) bool { return mix64(seed^determinismSalt)%DeterminismOneIn == 0 }

// Divergence is a sampled seed whose two runs wrote different traces (a
// determinism bug: a replay of it would not reproduce).
type Divergence struct {
	Seed     uint64
	Mutant   Mutant
	Settings Settings
	// First and Second are the two runs' JSONL traces.
	First, Second []byte
}

// Summary is the outcome of exploring a seed range.
type Summary struct {
	// From and To are the range explored (inclusive); Runs the number of seeds run.
	From, To uint64
	Runs     int
	// ByVerdict counts runs per verdict.
	ByVerdict map[Verdict]int
	// Failures are the failing runs with the lowest seeds (at most the
	// sweep's KeepFailures), in seed order; FailuresOmitted the others.
	Failures        []Result
	FailuresOmitted int
	// Events and Ticks are summed over all runs.
	Events, Ticks int64
	// Coverage is the fault sites, lifecycle points and sometimes states
	// the runs reached (coverage.go).
	Coverage *Coverage
	// Sampled is the number of passing seeds run twice (DeterminismSampled);
	// Diverged how many of them wrote two different traces, Divergences the
	// first few of those (lowest seeds), with both traces.
	Sampled     int
	Diverged    int
	Divergences []Divergence
}

// SweepConfig configures Sweep.
type SweepConfig struct {
	// From and To are the seeds to run (inclusive; To < From runs none).
	From, To uint64
	// Jobs is the number of goroutines (each run is single-threaded); < 1 is 1.
	Jobs int
	// Mutant is injected into every run.
	Mutant Mutant
	// Progress, if set, is called after each run from the worker that ran
	// it (it must be safe for concurrent use).
	Progress func(Result)
	// OnFailure, if set, is called with each failing run from the worker
	// that ran it, before Progress (it must be safe for concurrent use:
	// the seed store records them as they come).
	OnFailure func(Result)
	// KeepFailures bounds Summary.Failures (0: DefaultKeepFailures).
	KeepFailures int
}

// rerun is the determinism sample's second run (a variable so a test can
// make it diverge).
var rerun = Run

// Explore runs seeds from..to (inclusive) on jobs goroutines with mutant
// m; progress, if set, is called after each run (see SweepConfig). The
// summary does not depend on jobs.
func Explore(from, to uint64, jobs int, m Mutant, progress func(Result)) Summary {
	return Sweep(SweepConfig{From: from, To: to, Jobs: jobs, Mutant: m, Progress: progress})
}

// Sweep runs cfg's seeds and returns their summary, which does not depend
// on cfg.Jobs. Memory is independent of the range's length: seeds are
// handed out by a counter, each worker adds its runs into its own counts
// and keeps only failing runs (at most KeepFailures of them) and the
// determinism sample's traces of the seed it is on.
func Sweep(cfg SweepConfig) Summary {
	jobs := max(cfg.Jobs, 1)
	keep := cfg.KeepFailures
	if keep <= 0 {
		keep = DefaultKeepFailures
	}
	var n uint64
	if cfg.To >= cfg.From {
		n = cfg.To - cfg.From + 1 // 0 for all 2^64 seeds: not supported, runs none
	}
	var next atomic.Uint64
	parts := make([]sweepPart, jobs)
	var wg sync.WaitGroup
	for j := range parts {
		wg.Add(1)
		go func(p *sweepPart) {
			defer wg.Done()
			p.init(keep)
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				p.run(cfg, cfg.From+i)
			}
		}(&parts[j])
	}
	wg.Wait()
	s := Summary{From: cfg.From, To: cfg.To, ByVerdict: map[Verdict]int{}, Coverage: &Coverage{}}
	for i := range parts {
		p := &parts[i]
		s.Runs += p.runs
		for v, c := range p.byVerdict {
			if c != 0 {
				s.ByVerdict[Verdict(v)] += c
			}
		}
		s.Events += p.events
		s.Ticks += p.ticks
		s.Coverage.Add(p.cov)
		s.Failures = append(s.Failures, p.failures...)
		s.Sampled += p.sampled
		s.Diverged += p.diverged
		s.Divergences = append(s.Divergences, p.divergences...)
	}
	sort.Slice(s.Failures, func(i, j int) bool { return s.Failures[i].Seed < s.Failures[j].Seed })
	failing := s.Runs - s.ByVerdict[Passed]
	if len(s.Failures) > keep {
		s.Failures = s.Failures[:keep]
	}
	s.FailuresOmitted = failing - len(s.Failures)
	sort.Slice(s.Divergences, func(i, j int) bool { return s.Divergences[i].Seed < s.Divergences[j].Seed })
	if len(s.Divergences) > MaxDivergences {
		s.Divergences = s.Divergences[:MaxDivergences]
	}
	return s
}

// sweepPart is one worker's share of a sweep.
type sweepPart struct {
	keep          int
	runs          int
	byVerdict     [Crash + 1]int
	events, ticks int64
	cov           *Coverage
	failures      []Result
	sampled       int
	diverged      int
	divergences   []Divergence
	first, second bytes.Buffer
}

func (p *sweepPart) init(keep int) {
	p.keep = keep
	p.cov = &Coverage{}
}

// run runs one seed (twice, comparing traces, when it is in the sample and passes).
func (p *sweepPart) run(cfg SweepConfig, seed uint64) {
	s := DrawSettings(seed)
	opts := Options{Mutant: cfg.Mutant, Coverage: p.cov}
	sampled := DeterminismSampled(seed)
	if sampled {
		p.first.Reset()
		opts.Trace = &p.first
	}
	r := Run(seed, s, opts)
	if sampled && r.Verdict == Passed {
		p.sampled++
		p.second.Reset()
		rerun(seed, s, Options{Mutant: cfg.Mutant, Trace: &p.second})
		if !bytes.Equal(p.first.Bytes(), p.second.Bytes()) {
			p.diverged++
			if len(p.divergences) < MaxDivergences {
				p.divergences = append(p.divergences, Divergence{Seed: seed, Mutant: cfg.Mutant, Settings: s,
					First: bytes.Clone(p.first.Bytes()), Second: bytes.Clone(p.second.Bytes())})
			}
		}
	}
	p.runs++
	if r.Verdict >= Passed && r.Verdict <= Crash {
		p.byVerdict[r.Verdict]++
	}
	p.events += r.Events
	p.ticks += r.Ticks
	if r.Verdict != Passed {
		if cfg.OnFailure != nil {
			cfg.OnFailure(r)
		}
		p.failures = append(p.failures, r)
		if len(p.failures) >= 2*p.keep {
			sort.Slice(p.failures, func(i, j int) bool { return p.failures[i].Seed < p.failures[j].Seed })
			clear(p.failures[p.keep:])
			p.failures = p.failures[:p.keep]
		}
	}
	if cfg.Progress != nil {
		cfg.Progress(r)
	}
}

// WriteTrace re-runs r's seed (with its settings and mutant) writing the
// JSONL trace to dir/seed-<N>.jsonl, and returns the path. Error: the file
// could not be written, or the re-run did not reproduce r's verdict (a
// determinism bug).
func WriteTrace(dir string, r Result) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("seed-%d.jsonl", r.Seed))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	again := Run(r.Seed, r.Settings, Options{Mutant: r.Mutant, Trace: f})
	if err := f.Close(); err != nil {
		return "", err
	}
	if again.Verdict != r.Verdict || again.Events != r.Events {
		return path, fmt.Errorf("sim: seed %d did not reproduce: %v after %d events, then %v after %d", r.Seed, r.Verdict, r.Events, again.Verdict, again.Events)
	}
	return path, nil
}

// WriteDivergence writes d's two traces to dir/seed-<N>.run1.jsonl and
// dir/seed-<N>.run2.jsonl and returns the paths.
func WriteDivergence(dir string, d Divergence) ([2]string, error) {
	return WriteRunPair(dir, fmt.Sprintf("seed-%d", d.Seed), "jsonl", d.First, d.Second)
}

// WriteRunPair writes a sampled seed's two runs to dir/<name>.run1.<ext>
// and dir/<name>.run2.<ext>, creating dir.
func WriteRunPair(dir, name, ext string, first, second []byte) ([2]string, error) {
	var paths [2]string
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return paths, err
	}
	for i, b := range [][]byte{first, second} {
		paths[i] = filepath.Join(dir, fmt.Sprintf("%s.run%d.%s", name, i+1, ext))
		if err := os.WriteFile(paths[i], b, 0o644); err != nil {
			return paths, err
		}
	}
	return paths, nil
}
