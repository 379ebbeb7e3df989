package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Summary is the outcome of exploring a seed range.
type Summary struct {
	// From and To are the range explored (inclusive); Runs the number of seeds run.
	From, To uint64
	Runs     int
	// ByVerdict counts runs per verdict.
	ByVerdict map[Verdict]int
	// Failures are the failing runs, in seed order.
	Failures []Result
	// Events and Ticks are summed over all runs.
	Events, Ticks int64
}

// Explore runs seeds from..to (inclusive) on jobs goroutines (each run is
// single-threaded and independent), with mutant m. progress, if set, is
// called after each run from the worker that ran it (it must be safe for
// concurrent use). The summary does not depend on jobs.
func Explore(from, to uint64, jobs int, m Mutant, progress func(Result)) Summary {
	if jobs < 1 {
		jobs = 1
	}
	n := int(to - from + 1)
	if to < from {
		n = 0
	}
	results := make([]Result, n)
	seeds := make(chan int)
	var wg sync.WaitGroup
	for j := 0; j < jobs; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range seeds {
				r := RunSeed(from+uint64(i), Options{Mutant: m})
				results[i] = r
				if progress != nil {
					progress(r)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		seeds <- i
	}
	close(seeds)
	wg.Wait()
	s := Summary{From: from, To: to, Runs: n, ByVerdict: map[Verdict]int{}}
	for _, r := range results {
		s.ByVerdict[r.Verdict]++
		s.Events += r.Events
		s.Ticks += r.Ticks
		if r.Verdict != Passed {
			s.Failures = append(s.Failures, r)
		}
	}
	return s
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
