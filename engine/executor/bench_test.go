package executor

import (
	"fmt"
	"testing"
)

// BenchmarkCoreStep64InFlight is the core's own cost for 64 requests in
// flight: submit, batches of 8, completion with scatter, consume, context,
// 16 releases each (a decode loop), finish. It reports ns per request.
func BenchmarkCoreStep64InFlight(b *testing.B) {
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%d", i)
	}
	for b.Loop() {
		x := New(Config{MaxBatchRequests: 8})
		for _, id := range ids {
			if err := x.Submit(id, 1); err != nil {
				b.Fatal(err)
			}
		}
		for x.Queued() > 0 {
			for _, a := range x.Schedule() {
				if _, err := x.EncoderDone(a.(RunEncoder).Batch); err != nil {
					b.Fatal(err)
				}
			}
		}
		for _, id := range ids {
			if _, err := x.Consume(id); err != nil {
				b.Fatal(err)
			}
			x.ContextComputed(id)
			for range 16 {
				x.Release(id)
			}
			x.Finish(id)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/request")
}
