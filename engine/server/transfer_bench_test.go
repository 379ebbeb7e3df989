package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/handoff"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
)

// BenchmarkTransferControlOverhead measures the per-handoff control
// overhead of the tcp backend: the consumer's whole receive (preflight,
// register, TransferEncoderCache, the producer's checks and WRITE, the
// completion) for entries of 1 and 8 tiny-preset items, fitted as
// time = overhead + bytes * per-byte cost, so the intercept is what a
// handoff costs beyond moving its data. Next to it, in the same run, one
// unary gRPC round trip (Health) to the producer. Target (issue #4):
// overhead <= 2x the unary round trip.
func BenchmarkTransferControlOverhead(b *testing.B) {
	_, prod := startEngine(b, Config{Role: RoleEncoder, Backend: BackendTCP})
	cons, _ := startEngine(b, Config{Role: RolePD})
	ctx := context.Background()
	receive := func(items int) (time.Duration, int64) {
		ref, wire := publishFor(b, prod, cons, items)
		start := time.Now()
		if _, err := cons.Engine.receive(ctx, "bench", ref, wire, benchAddress(b, wire), false); err != nil {
			b.Fatal(err)
		}
		return time.Since(start), ref.PayloadBytes()
	}
	var one, eight, rtt time.Duration
	var oneBytes, eightBytes int64
	for range 3 { // warm up connections and pools
		receive(1)
		prod.Health(ctx)
	}
	for b.Loop() {
		d, n := receive(1)
		one, oneBytes = one+d, n
		d, n = receive(8)
		eight, eightBytes = eight+d, n
		start := time.Now()
		if _, err := prod.Health(ctx); err != nil {
			b.Fatal(err)
		}
		rtt += time.Since(start)
	}
	n := float64(b.N)
	t1, t8, unary := one.Seconds()/n, eight.Seconds()/n, rtt.Seconds()/n
	perByte := (t8 - t1) / float64(eightBytes-oneBytes)
	overhead := t1 - perByte*float64(oneBytes)
	b.ReportMetric(overhead*1e6, "overhead-µs")
	b.ReportMetric(unary*1e6, "unary-rtt-µs")
	b.ReportMetric(overhead/unary, "overhead/rtt")
	b.ReportMetric(float64(oneBytes)/(1<<20)/t1, "MiB/s-1item")
	b.ReportMetric(float64(eightBytes)/(1<<20)/t8, "MiB/s-8items")
	b.Logf("1 item %d bytes %.0f µs, 8 items %d bytes %.0f µs: %s", oneBytes, t1*1e6, eightBytes, t8*1e6, fmt.Sprintf("overhead %.0f µs, unary RTT %.0f µs", overhead*1e6, unary*1e6))
}

// BenchmarkTransferLatencyBase is the tcp handoff latency of one base-preset
// output ([576, 1024] float32, 2.25 MiB): the consumer's whole receive, p50
// and p99 over the iterations (run with -benchtime 50x or more).
func BenchmarkTransferLatencyBase(b *testing.B) {
	_, prod := startEngine(b, Config{Role: RoleEncoder, Backend: BackendTCP, Preset: "base"})
	cons, _ := startEngine(b, Config{Role: RolePD, Preset: "base"})
	ctx := context.Background()
	var samples []time.Duration
	for b.Loop() {
		b.StopTimer()
		ref, wire := publishFor(b, prod, cons, 1)
		b.StartTimer()
		start := time.Now()
		if _, err := cons.Engine.receive(ctx, "bench", ref, wire, benchAddress(b, wire), false); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	slices.Sort(samples)
	at := func(q float64) float64 {
		return float64(samples[min(len(samples)-1, int(q*float64(len(samples))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// publishFor publishes items copies of a fixture on prod and returns the
// reference as cons parsed it, and as it came on the wire.
func publishFor(b *testing.B, prod *target.GRPCEngine, cons *Server, items int) (handoff.Reference, *pb.EncoderCacheRef) {
	b.Helper()
	req := &pb.GenerateRequest{Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}}
	for range items {
		req.Media = append(req.Media, imageItem(b, "basn6a08.png"))
	}
	res, err := prod.Generate(context.Background(), req)
	if err != nil || res.EncoderReady() == nil {
		b.Fatalf("publish: %v %v", err, res)
	}
	wire := res.EncoderReady().GetRef()
	ref, _, err := cons.Engine.parseReference(wire)
	if err != nil {
		b.Fatal(err)
	}
	return ref, wire
}

// benchAddress is the producer control address of a reference (trusted).
func benchAddress(b *testing.B, wire *pb.EncoderCacheRef) string {
	b.Helper()
	ep := wire.GetProducerEndpoint()
	return net.JoinHostPort(ep.GetHost(), strconv.Itoa(int(ep.GetPort())))
}
