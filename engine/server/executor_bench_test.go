package server

import (
	"bytes"
	"context"
	"image"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/fixtures"
)

// BenchmarkExecutorOverhead runs 64 requests in flight through the
// executor (batches of at most 8, one encoder step at a time: the engine's
// defaults; continuous batching makes the first batch a batch of one) and,
// in the same iteration, the same 64 images straight through the encoder in
// batches of 8. It reports the executor's bookkeeping (submit, batch, pack,
// scatter, consume, release every decode step, free and poison) as a share
// of the executor's wall time: wall time minus the time spent inside the
// encoder's Encode calls. Run with -benchtime 1x for the base preset (64
// images take ~8 s on 2 cores).
func BenchmarkExecutorOverhead(b *testing.B) {
	src, err := fixtures.ImageByName("video-001.png")
	if err != nil {
		b.Fatal(err)
	}
	img, _, err := image.Decode(bytes.NewReader(src.Data))
	if err != nil {
		b.Fatal(err)
	}
	const inFlight, batch = 64, 8
	for _, preset := range []string{"tiny", "base"} {
		b.Run(preset, func(b *testing.B) {
			e, err := New(Config{Role: RoleAggregated, Preset: preset, MaxBatchRequests: batch}, nil)
			if err != nil {
				b.Fatal(err)
			}
			var direct, through time.Duration
			e.exec.encodeNanos.Store(0)
			for b.Loop() {
				start := time.Now()
				for range inFlight / batch {
					imgs := make([]image.Image, batch)
					for i := range imgs {
						imgs[i] = img
					}
					if _, err := e.encoder.Encode(imgs); err != nil {
						b.Fatal(err)
					}
				}
				direct += time.Since(start)

				start = time.Now()
				var wg sync.WaitGroup
				for range inFlight {
					wg.Go(func() {
						xr, view, err := e.exec.encode(context.Background(), "bench", requestHooks{}, []image.Image{img})
						if err != nil {
							b.Error(err)
							return
						}
						_ = view[0].Data[0]
						xr.contextComputed()
						for range 16 { // a decode loop releasing every step
							xr.release()
						}
						xr.end()
					})
				}
				wg.Wait()
				through += time.Since(start)
			}
			if e.exec.core.LiveStorages() != 0 {
				b.Fatalf("%d storages left", e.exec.core.LiveStorages())
			}
			n := float64(b.N)
			encoding := time.Duration(e.exec.encodeNanos.Load())
			steps := float64(e.exec.core.Counters().BatchesFormed)
			b.ReportMetric(100*(through-encoding).Seconds()/through.Seconds(), "bookkeeping-%")
			b.ReportMetric(float64((through-encoding).Microseconds())/steps, "bookkeeping-µs/step")
			b.ReportMetric(float64(encoding.Microseconds())/steps, "encoder-µs/step")
			b.ReportMetric(float64(direct.Microseconds())/n/float64(inFlight/batch), "direct-encoder-µs/batch8")
			b.ReportMetric(float64(inFlight)*n/through.Seconds(), "requests/s")
		})
	}
}
