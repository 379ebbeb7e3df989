package world

import (
	"testing"
	"time"
)

// BenchmarkSimulator reports the world's events/s per core and simulated time
// per wall time, the same with coverage counted as a sweep counts it, and a
// bare event loop (the same queue, no handlers) in the same run.
func BenchmarkSimulator(b *testing.B) {
	b.Run("world", func(b *testing.B) {
		var events, ticks int64
		start := time.Now()
		for i := 0; i < b.N; i++ {
			r := RunSeed(uint64(i%1000)+1, Options{})
			events += r.Events
			ticks += r.Ticks
		}
		wall := time.Since(start).Seconds()
		b.ReportMetric(float64(events)/wall, "events/s")
		b.ReportMetric(float64(ticks)/1000/wall, "sim-s/wall-s")
		b.ReportMetric(float64(events)/float64(b.N), "events/run")
	})
	b.Run("world-coverage", func(b *testing.B) {
		// As a sweep runs: coverage added up across runs (coverage.go).
		var events int64
		cov := &Coverage{}
		start := time.Now()
		for i := 0; i < b.N; i++ {
			events += RunSeed(uint64(i%1000)+1, Options{Coverage: cov}).Events
		}
		b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
	})
	b.Run("bare-loop", func(b *testing.B) {
		var q queue
		r := newRNG(1, subWorkload)
		for i := 0; i < 64; i++ {
			q.push(Event{Tick: r.Int64N(100)})
		}
		start := time.Now()
		var sink int64
		for i := 0; i < b.N; i++ {
			ev, _ := q.Pop()
			sink += ev.Tick
			q.push(Event{Tick: ev.Tick + 1 + r.Int64N(100), Kind: EvCollect})
		}
		wall := time.Since(start).Seconds()
		b.ReportMetric(float64(b.N)/wall, "events/s")
		_ = sink
	})
}
