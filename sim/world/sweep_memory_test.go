package world

import (
	"runtime"
	"testing"
)

// TestSweepMemoryDoesNotGrowWithRange: a sweep's live heap (after a
// collection) stays within bytesPerSeed per seed from the end of a warm-up
// to the end of its range, so memory is constant in the seed count (issue
// #17): per seed a sweep adds to counts and keeps no run. The warm-up
// lets the bounded state reach its size (the determinism sample's trace
// buffers grow to the longest sampled trace, the kept failures to
// 2*KeepFailures); after it the heap moves by a few KB over thousands of
// seeds (printed). Under a mutant that fails some seeds, with KeepFailures
// 8, the failure path runs too. A run kept per seed (a Result holds its
// settings, failure text and fired-site map: hundreds of bytes) would
// exceed the bound tenfold. Fewer seeds under the race detector.
func TestSweepMemoryDoesNotGrowWithRange(t *testing.T) {
	const (
		bytesPerSeed = 32
		warmSeeds    = 1000
	)
	measured := 3000
	if raceEnabled || testing.Short() {
		measured = 1000
	}
	n := warmSeeds + measured
	liveHeap := func() uint64 {
		runtime.GC()
		if raceEnabled {
			// The race detector's sync.Pool drops a quarter of what is
			// put back, at random, so whether Run's pooled runBufs (tens
			// of KB) are live differs from one look to the next: a second
			// collection drops the victim cache the first left them in.
			// (Without it the pool holds the last run's, at both looks,
			// and a pooled buffer that grew with the seeds would show.)
			runtime.GC()
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var warm, end uint64
	done := 0
	s := Sweep(SweepConfig{From: 1, To: uint64(n), Jobs: 1, Mutant: MutantReadWithoutClaim, KeepFailures: 8, Progress: func(Result) {
		done++ // Jobs 1: the one worker calls Progress, run after run
		switch done {
		case warmSeeds:
			warm = liveHeap()
		case n:
			end = liveHeap()
		}
	}})
	if s.Runs != n || s.Runs-s.ByVerdict[Passed] <= 2*8 {
		t.Fatalf("%d runs, %d passed: want %d runs, more than 16 failing", s.Runs, s.ByVerdict[Passed], n)
	}
	growth := int64(end) - int64(warm)
	t.Logf("live heap %d bytes after %d seeds, %d after %d: %+d bytes over %d seeds", warm, warmSeeds, end, n, growth, measured)
	if growth > bytesPerSeed*int64(measured) {
		t.Errorf("the live heap grew %d bytes over %d seeds (%.0f per seed, bound %d): the sweep keeps something per seed",
			growth, measured, float64(growth)/float64(measured), bytesPerSeed)
	}
}
