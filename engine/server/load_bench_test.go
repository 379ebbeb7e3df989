package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// The handoff load benchmark: loadHandoffs concurrent E+PD handoffs
// (publish, then consume), of which loadCancelShare are cancelled by their
// client at a random moment, over each backend, against in-process
// engines. Afterwards nothing may be left: no published entry or byte on
// the producer, no receive, quarantine or batch storage on the consumer,
// and no goroutine beyond those before the load.
const (
	loadHandoffs    = 1000
	loadCancelShare = 0.30
	// loadSeed draws which handoffs are cancelled and when (printed).
	loadSeed = 20261202
	// loadCancelWithin is the window a cancelled handoff's cancel falls in,
	// from its start: long enough to land in its publish, between, or in
	// its consume.
	loadCancelWithin = 200 * time.Millisecond
)

// BenchmarkHandoffLoad runs the load once per backend (-benchtime 1x) and
// reports handoffs/s and the p50/p99 latency of the handoffs that were not
// cancelled; it fails on a leak, or on an answer other than OK, CANCELLED
// (the cancelled ones) or INVALID_ARGUMENT (a consume of a reference its
// own client released after cancelling).
func BenchmarkHandoffLoad(b *testing.B) {
	for _, backend := range []string{BackendTCP, BackendSharedDir} {
		b.Run(backend, func(b *testing.B) {
			for b.Loop() {
				runHandoffLoad(b, backend)
			}
		})
	}
}

// loadOutcome is what one handoff of the load ended with.
type loadOutcome struct {
	cancelled bool
	code      codes.Code // the last call's code
	latency   time.Duration
}

func runHandoffLoad(b *testing.B, backend string) {
	dir := b.TempDir()
	prodCfg := Config{Role: RoleEncoder, Backend: backend, CacheDir: dir}
	consCfg := Config{Role: RolePD, AcceptBackends: []string{backend}}
	if backend == BackendSharedDir {
		consCfg.CacheDir = dir
	} else {
		prodCfg.CacheDir = ""
	}
	// Room for every entry of the load at once (tiny entries, ~100 KB).
	prodCfg.ProducerQuotaBytes, consCfg.ConsumerQuotaBytes = 1<<30, 1<<30
	prodSrv, producer := startEngine(b, prodCfg)
	consSrv, consumer := startEngine(b, consCfg)
	item := imageItem(b, "basn0g08.png")
	handoff := func(ctx context.Context) (codes.Code, *pb.EncoderCacheRef) {
		pub, err := producer.Generate(ctx, &pb.GenerateRequest{Media: []*pb.MediaItem{item},
			Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}})
		if err != nil {
			return codes.Unknown, nil
		}
		ref := pub.EncoderReady().GetRef()
		if pub.Code() != codes.OK || ref == nil {
			return pub.Code(), ref
		}
		res, err := consumer.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "<image> Describe."},
			Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(4)}, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}})
		if err != nil {
			return codes.Unknown, ref
		}
		return res.Code(), ref
	}
	// Warm up connections and pools, then count goroutines.
	if code, _ := handoff(context.Background()); code != codes.OK {
		b.Fatalf("warm-up handoff = %v", code)
	}
	settleEngines(b, prodSrv, consSrv)
	goroutines := runtime.NumGoroutine()

	rng := rand.New(rand.NewPCG(loadSeed, loadSeed^0x9e3779b97f4a7c15))
	cancelAt := make([]time.Duration, loadHandoffs) // 0: not cancelled
	for i := range cancelAt {
		if rng.Float64() < loadCancelShare {
			cancelAt[i] = 1 + time.Duration(rng.Int64N(int64(loadCancelWithin)))
		}
	}
	out := make([]loadOutcome, loadHandoffs)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range out {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if cancelAt[i] > 0 {
				t := time.AfterFunc(cancelAt[i], cancel)
				defer t.Stop()
			}
			t0 := time.Now()
			code, ref := handoff(ctx)
			out[i] = loadOutcome{cancelled: cancelAt[i] > 0, code: code, latency: time.Since(t0)}
			if code != codes.OK && ref != nil {
				// A client that gave up releases what it published (SU-3):
				// ABORTED, or ALREADY_FINISHED when the consume took it.
				_, _ = producer.Abort(context.Background(), &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}})
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	var lat []time.Duration
	byCode := map[string]int{}
	for i, o := range out {
		key := o.code.String()
		if o.cancelled {
			key += " (cancelled)"
		}
		byCode[key]++
		switch {
		case !o.cancelled && o.code == codes.OK:
			lat = append(lat, o.latency)
		case !o.cancelled:
			b.Errorf("handoff %d (not cancelled) = %v; want OK", i, o.code)
		case o.code != codes.OK && o.code != codes.Canceled:
			b.Errorf("cancelled handoff %d = %v; want OK or CANCELLED", i, o.code)
		}
	}
	leaks := settleEngines(b, prodSrv, consSrv)
	if backend == BackendSharedDir {
		files, _ := filepath.Glob(filepath.Join(dir, "*", "*.safetensors*"))
		if len(files) > 0 {
			leaks = append(leaks, fmt.Sprintf("%d entry files in the shared directory (%s...)", len(files), filepath.Base(files[0])))
		}
	}
	after := waitGoroutines(goroutines, 20*time.Second)
	slices.Sort(lat)
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	b.ReportMetric(float64(loadHandoffs)/elapsed.Seconds(), "handoffs/s")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	b.Logf("BENCH handoff load %s: %d concurrent handoffs, %.0f%% cancelled at random within %v (seed %d), in %v: %.0f handoffs/s, p50 %v p99 %v of the %d not cancelled; answers %v; leaks %v; goroutines %d before, %d after",
		backend, loadHandoffs, loadCancelShare*100, loadCancelWithin, loadSeed, elapsed.Round(time.Millisecond), float64(loadHandoffs)/elapsed.Seconds(),
		p50.Round(time.Microsecond), p99.Round(time.Microsecond), len(lat), byCode, leaks, goroutines, after)
	if len(leaks) > 0 {
		b.Errorf("left after the load: %v", leaks)
	}
	if after > goroutines {
		b.Errorf("%d goroutines after the load, %d before", after, goroutines)
	}
}

// settleEngines waits (at most 30 s) until neither engine holds anything
// and returns what is still held ("producer encoder.exports.entries=3").
func settleEngines(b *testing.B, prod, cons *Server) []string {
	b.Helper()
	keys := []string{"encoder.exports.entries", "encoder.exports.bytes", "encoder.receives.inflight", "encoder.quarantine.buffers",
		"encoder.quarantine.bytes", "encoder.storage.live_batches", "encoder.decode.inflight_bytes"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var held []string
		for _, s := range []struct {
			who string
			srv *Server
		}{{"producer", prod}, {"consumer", cons}} {
			obs := s.srv.Engine.Observables()
			for _, k := range keys {
				if obs[k] != 0 {
					held = append(held, fmt.Sprintf("%s %s=%g", s.who, k, obs[k]))
				}
			}
			s.srv.Engine.mu.Lock()
			if n := len(s.srv.Engine.requests); n != 0 {
				held = append(held, fmt.Sprintf("%s requests=%d", s.who, n))
			}
			s.srv.Engine.mu.Unlock()
		}
		if len(held) == 0 || time.Now().After(deadline) {
			return held
		}
		time.Sleep(10 * time.Millisecond) // polling state other goroutines change
	}
}

// waitGoroutines waits until at most want goroutines run (those of the
// load end shortly after their calls return) or timeout passes; it returns
// the last count.
func waitGoroutines(want int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond) // polling the runtime's count
	}
}
