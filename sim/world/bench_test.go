package world

import (
	"testing"
	"time"
)

// BenchmarkSimulator reports the world's events/s per core and simulated time
// per wall time, the same with coverage counted as a sweep counts it, the
// two interleaved with a bare event loop and their ratio (#16: the world at
// least 10% of the bare loop's events/s), and the bare event loop (the same
// queue, no handlers) alone.
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
	b.Run("world-vs-bare", func(b *testing.B) {
		// #16's number, taken so that a load that comes and goes hits
		// both sides alike: every 10 world runs, the bare loop (the same
		// queue as bare-loop below, no handlers) runs as many events as
		// they took, each side timed on its own; ratio-% is the world's
		// events/s as a percentage of the bare loop's (at least 10).
		var q queue
		r := newRNG(1, subWorkload)
		for i := 0; i < 64; i++ {
			q.push(Event{Tick: r.Int64N(100)})
		}
		var worldEvents, bareEvents, pending, sink int64
		var worldWall, bareWall time.Duration
		bare := func() {
			start := time.Now()
			for j := int64(0); j < pending; j++ {
				ev, _ := q.Pop()
				sink += ev.Tick
				q.push(Event{Tick: ev.Tick + 1 + r.Int64N(100), Kind: EvCollect})
			}
			bareWall += time.Since(start)
			bareEvents += pending
			pending = 0
		}
		for i := 0; i < b.N; i++ {
			start := time.Now()
			n := RunSeed(uint64(i%1000)+1, Options{}).Events
			worldWall += time.Since(start)
			worldEvents += n
			if pending += n; i%10 == 9 {
				bare()
			}
		}
		bare()
		worldRate := float64(worldEvents) / worldWall.Seconds()
		bareRate := float64(bareEvents) / bareWall.Seconds()
		b.ReportMetric(worldRate, "world-events/s")
		b.ReportMetric(bareRate, "bare-events/s")
		b.ReportMetric(100*worldRate/bareRate, "ratio-%")
		_ = sink
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
