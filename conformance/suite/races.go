package suite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Races the other cases never try (CONTRACT SU-1, SU-3, X-2, C-7): one
// reference raced by two consumer processes, Abort raced against a
// consume, a consume raced against the entry's expiry, and a burst of
// publishes cancelled at random moments.

// su1ProcessRounds is how many references SU-1 races across two consumer
// processes. A claim that is not atomic across processes loses one round
// in a few (its window is the read of the entry, about a millisecond), so
// ten rounds catch it nearly always at a cost of ten handoffs.
const su1ProcessRounds = 10

// SU1TwoConsumerProcessesOneWins races one reference across the consumer and a second consumer process (endpoints key consumer2), ten rounds: exactly one gets tokens, the other INVALID_ARGUMENT before any token (SU-1: "by at most one consumer"; a claim guarded inside one process is not enough).
func SU1TwoConsumerProcessesOneWins(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	second, ok := tg.Engine(target.RoleSecondConsumer)
	if !ok || second == nil {
		HarnessError(t, "the case needs a %s endpoint (Needs.SecondConsumer): run it through Case.Execute", target.RoleSecondConsumer)
	}
	defer h.cleanup()
	img := fixture(t, "video-001.png")
	prompt := promptText(t, promptMarker)
	for round := 1; round <= su1ProcessRounds; round++ {
		ref := h.publish(img).GetRef()
		h.expectOneWinner(fmt.Sprintf("Consume(ref=%s) on the consumer and on %s at once, round %d of %d", refLabel(ref), target.RoleSecondConsumer, round, su1ProcessRounds),
			prompt, ref, []target.Engine{h.cons, second})
	}
}

// su3RaceLags are the rounds of SU-3's race, one reference each: how long
// after the consume the Abort starts (before it when negative). The middle
// rounds race in earnest, both orders; the outer ones give one side a
// head start no scheduler undoes, so a consume that claimed first meets
// the Abort on a loaded 2-core machine too (with lags within 2 ms, CI once
// saw the Abort win all eight rounds and su3-release-answers-from-table
// survive).
var su3RaceLags = []time.Duration{-100 * time.Millisecond, -time.Millisecond, -500 * time.Microsecond, 0,
	500 * time.Microsecond, time.Millisecond, 10 * time.Millisecond, 200 * time.Millisecond}

// SU3AbortRacesConsume sends Abort(encoder_cache=ref) to the producer and a consume of ref to the consumer at once, eight rounds (su3RaceLags: the Abort from 100 ms before the consume to 200 ms after it): exactly one wins, and the answers agree: ABORTED and no token, or tokens and ALREADY_FINISHED (SU-3: ABORTED only for the call that released a published entry, ALREADY_FINISHED for one already consumed).
func SU3AbortRacesConsume(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	img := fixture(t, "video-001.png")
	prompt := promptText(t, promptMarker)
	tally := map[string]int{}
	for i, lag := range su3RaceLags {
		round := i + 1
		ref := h.publish(img).GetRef()
		req := h.consumeRequest(prompt, ref)
		var (
			res      *target.GenerateResult
			genErr   error
			st       pb.AbortStatus
			abortErr error
			wg       sync.WaitGroup
		)
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			time.Sleep(-min(lag, 0))
			res, genErr = h.cons.Generate(ctx, req)
		}()
		go func() {
			defer wg.Done()
			<-start
			time.Sleep(max(lag, 0))
			st, abortErr = h.abort(h.prod, ref)
		}()
		close(start)
		wg.Wait()
		if genErr != nil || res == nil || res.Status == nil {
			HarnessError(t, "Generate racing an Abort: %v", genErr)
		}
		res = h.onDecode(ctx, res, prompt)
		race := fmt.Sprintf("round %d of %d: %s and %s %v apart", round, len(su3RaceLags), abortCall(ref, ""), consumeCall(ref, ""), lag)
		consumed := res.Code() == codes.OK && len(res.TokenIDs()) > 0
		switch {
		case abortErr != nil:
			t.Errorf("%s: Abort = %s; want ABORTED or ALREADY_FINISHED", race, statusString(abortErr))
		case st == pb.AbortStatus_ABORT_STATUS_ABORTED && consumed:
			t.Errorf("%s: Abort = ABORTED and the consume = %s; want one winner (ABORTED only for the release of an entry nobody consumed)", race, describe(res))
		case st == pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED && !consumed:
			t.Errorf("%s: Abort = ALREADY_FINISHED and the consume = %s; want one winner (ALREADY_FINISHED only once the entry was consumed)", race, describe(res))
		case st != pb.AbortStatus_ABORT_STATUS_ABORTED && st != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED:
			t.Errorf("%s: Abort = %s; want ABORTED or ALREADY_FINISHED", race, abortName(st))
		case consumed:
			tally["consume won"]++
		default:
			tally["Abort won"]++
		}
	}
	t.Logf("SU-3 Abort against consume, %d rounds: %v", len(su3RaceLags), tally)
}

// The X-2 race: publishes with a short TTL, consumed at offsets around it.
const (
	// x2RaceTTLMs is the TTL of the raced publishes: long enough that the
	// earliest consume lands well inside it on a loaded machine.
	x2RaceTTLMs = 1000
	// x2RaceQuietMs is how long the case leaves the producer alone after
	// the last consume (no GetLoad, Abort or publish, which would make it
	// look at claims), so its collector meets the claimed entries itself
	// (the reference engine collects every 200 ms).
	x2RaceQuietMs = 800
	// x2AfterTTLMs is the TTL of the entry published after the race, whose
	// collection shows the collector still works.
	x2AfterTTLMs = 300
)

// x2RaceOffsetsMs are the consumes' times relative to the TTL, in ms of
// the harness's clock after EncoderReady arrived (the engine's TTL started
// earlier, so "0" is already past the TTL for the engine).
var x2RaceOffsetsMs = []int64{-800, -300, -100, -20, 0, 20, 100}

// X2ConsumeRacesExpiry publishes seven entries with a 1 s TTL and consumes each at a time around its expiry, with no other call to the producer until its collector has run: each consume gets tokens or the spent-reference rejection (INVALID_ARGUMENT before any token), the producer stays READY, its exports return exactly to their values before (each entry left the table once), and a later short-TTL entry is still collected (X-2: "collection tolerates entries that vanish concurrently").
func X2ConsumeRacesExpiry(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	img := fixture(t, "video-001.png")
	prompt := promptText(t, promptMarker)
	keys := []string{ObservableExportsEntries, ObservableExportsBytes}

	before := h.counters("producer", h.prod)
	type round struct {
		offsetMs  int64
		ref       *pb.EncoderCacheRef
		published time.Time // when its EncoderReady arrived
		res       *target.GenerateResult
		err       error
	}
	rounds := make([]*round, len(x2RaceOffsetsMs))
	var wg sync.WaitGroup
	for i, off := range x2RaceOffsetsMs {
		ref := h.publishItems(proto.Uint32(x2RaceTTLMs), fmt.Sprintf("image=%s, ttl_ms=%d", img.Name, x2RaceTTLMs), imageItem(img)).GetRef()
		r := &round{offsetMs: off, ref: ref, published: time.Now()}
		rounds[i] = r
		req := h.consumeRequest(prompt, r.ref)
		wg.Add(1)
		go func() { // from its own EncoderReady on, whatever the publishes after it take
			defer wg.Done()
			at := r.published.Add(time.Duration(x2RaceTTLMs+r.offsetMs) * time.Millisecond)
			select {
			case <-time.After(time.Until(at)):
			case <-ctx.Done():
				r.err = ctx.Err()
				return
			}
			r.res, r.err = h.cons.Generate(ctx, req)
		}()
	}
	wg.Wait()
	var outcomes []string
	for _, r := range rounds {
		if r.err != nil || r.res == nil || r.res.Status == nil {
			HarnessError(t, "Generate at %+d ms of the TTL: %v", r.offsetMs, r.err)
		}
		r.res = h.onDecode(ctx, r.res, prompt)
		switch {
		case r.res.Code() == codes.OK && len(r.res.TokenIDs()) > 0:
			outcomes = append(outcomes, fmt.Sprintf("%+d ms: tokens", r.offsetMs))
		case r.res.Code() == codes.InvalidArgument && len(r.res.TokenIDs()) == 0:
			outcomes = append(outcomes, fmt.Sprintf("%+d ms: spent", r.offsetMs))
		default:
			t.Errorf("%s = %s; want tokens, or INVALID_ARGUMENT before any token once the entry expired", consumeCall(r.ref, fmt.Sprintf("%+d ms around its %d ms TTL", r.offsetMs, x2RaceTTLMs)), describe(r.res))
		}
	}
	t.Logf("X-2 consumes around the TTL: %s", strings.Join(outcomes, "; "))
	h.waitMs(x2RaceQuietMs, "for the producer's collector to meet the raced entries")
	h.expectReady("producer", h.prod)
	if c, ok := h.settle("producer", h.prod, before, keys...); !ok {
		t.Errorf("X-2 GetLoad(producer) after entries consumed or expired around their TTL: %s; want each back to its value before (every entry leaves the table once)", strings.Join(before.diff(c, keys...), ", "))
	}
	// The collector still works after meeting claimed entries.
	later := h.counters("producer", h.prod)
	ref := h.publishItems(proto.Uint32(x2AfterTTLMs), fmt.Sprintf("image=%s, ttl_ms=%d, after the race", img.Name, x2AfterTTLMs), imageItem(img)).GetRef()
	if c, ok := h.settleWithin(x2Collect, "producer", h.prod, later, keys...); !ok {
		t.Errorf("X-2 GetLoad(producer) %v after a %d ms TTL, published after the race: %s; want the entry collected", x2Collect, x2AfterTTLMs, strings.Join(later.diff(c, keys...), ", "))
	}
	h.track(ref)
}

// The C-7 burst: publishes cancelled at random moments of their life.
const (
	// c7BurstSeed seeds the cancellation moments (printed by the case).
	c7BurstSeed = 7
	// c7BurstPublishes is the size of the burst; c7BurstInFlight how many
	// run at once.
	c7BurstPublishes = 24
	c7BurstInFlight  = 4
	// c7BurstTTLMs is the burst's TTL: long against the case's wait, so an
	// entry left behind shows, and short enough that one a broken engine
	// leaves expires soon after.
	c7BurstTTLMs = 30_000
	// c7BurstCalibrations is how many rounds of c7BurstInFlight uncancelled
	// publishes time a publish; c7BurstWindowPercent is the share of the
	// fastest the cancellation moments are drawn from.
	c7BurstCalibrations  = 2
	c7BurstWindowPercent = 80
	// c7BurstRacePercent: a cancellation this share or more into the
	// fastest publish's time may, on a loaded machine, reach E after its
	// handler returned; the entries such publishes leave are excused.
	c7BurstRacePercent = 50
)

// C7CancelledBurstLeavesNothing times publishes 4 at a time (the fastest of eight, to the arrival of its EncoderReady), then sends 24 publishes, 4 at a time, each cancelled at a moment drawn from a fixed, printed seed over the first 80% of that time: a publish whose client got no EncoderReady leaves nothing behind, and the producer's exports return to their values before within 5 s, far short of the 30 s TTL (C-7; those that did get one are released with Abort).
func C7CancelledBurstLeavesNothing(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	img := fixture(t, "video-001.png")
	keys := []string{ObservableExportsEntries, ObservableExportsBytes}

	// Time publishes as the burst runs them (c7BurstInFlight at once): the
	// fastest of them bounds the cancellation moments, so every cancel
	// lands before the earliest moment E could have sent an EncoderReady
	// and returned. A cancel after that would leave a conforming entry its
	// client may never have read (the send succeeded, the stream closed):
	// C-7 cannot ask that one to go before its TTL.
	fastest := time.Duration(0)
	for round := 0; round < c7BurstCalibrations; round++ {
		took := make([]time.Duration, c7BurstInFlight)
		readies := make([]*target.GenerateResult, c7BurstInFlight)
		inFlight(c7BurstInFlight, c7BurstInFlight, func(i int) {
			start := time.Now()
			readies[i], _ = h.prod.Generate(ctx, h.publishRequest(proto.Uint32(c7BurstTTLMs), imageItem(img)))
			took[i] = time.Since(start)
		})
		for i, res := range readies {
			if res == nil || res.Status == nil || res.Code() != codes.OK || res.EncoderReady() == nil {
				t.Fatalf("Publish(image=%s, timing %d at once) = %v; want OK with one EncoderReady", img.Name, c7BurstInFlight, res)
			}
			h.track(res.EncoderReady().GetRef()) // released at cleanup, and here: timing is no check
			_, _ = h.abort(h.prod, res.EncoderReady().GetRef())
			if fastest == 0 || took[i] < fastest {
				fastest = took[i]
			}
		}
	}
	before := h.counters("producer", h.prod)
	window := fastest * c7BurstWindowPercent / 100
	rng := rand.New(rand.NewPCG(c7BurstSeed, uint64(c7BurstPublishes)))
	delays := make([]time.Duration, c7BurstPublishes)
	for i := range delays {
		delays[i] = time.Duration(rng.Int64N(int64(window) + 1))
	}
	t.Logf("C-7 burst: seed %d, %d publishes, %d in flight, cancelled within %v of a %v publish", c7BurstSeed, c7BurstPublishes, c7BurstInFlight, window, fastest)

	results := make([]*target.GenerateResult, c7BurstPublishes)
	inFlight(c7BurstPublishes, c7BurstInFlight, func(i int) {
		cctx, cancel := context.WithCancel(ctx)
		timer := time.AfterFunc(delays[i], cancel)
		defer timer.Stop()
		defer cancel()
		res, err := h.prod.Generate(cctx, h.publishRequest(proto.Uint32(c7BurstTTLMs), imageItem(img)))
		if err != nil || res == nil {
			res = &target.GenerateResult{}
		}
		results[i] = res
	})
	delivered := 0
	for i, res := range results {
		if res.Status != nil && res.EncoderReady() != nil {
			delivered++
			h.track(res.EncoderReady().GetRef())
			h.expectReleased(res.EncoderReady().GetRef(), fmt.Sprintf("publish %d of the burst, cancelled after %v but delivered", i, delays[i]))
		}
	}
	t.Logf("C-7 burst: %d of %d publishes delivered their EncoderReady before the cancellation", delivered, c7BurstPublishes)
	if c, ok := h.settle("producer", h.prod, before, keys...); !ok {
		// A cancellation E had not yet observed when its handler returned
		// leaves a conforming entry (C-7: "a cancellation it has observed
		// by then"): the calibration bounds a publish's time only as well
		// as the load allows, so the cancellations drawn in the later part
		// of the window may have raced the end of theirs. Those are
		// excused, by count; an engine that ignores cancellations leaves
		// one per publish.
		left := int(c[ObservableExportsEntries] - before[ObservableExportsEntries])
		undelivered := make([]bool, len(results))
		for i, res := range results {
			undelivered[i] = res.Status == nil || res.EncoderReady() == nil
		}
		if late := c7RacedPublishes(delays, undelivered, fastest); left > 0 && left <= late {
			t.Logf("C-7 burst: %d entries left behind, at most the %d undelivered publishes cancelled %d%% or more into the fastest publish's time, which may have raced its end; excused", left, late, c7BurstRacePercent)
			return
		}
		t.Errorf("C-7 GetLoad(producer) %v after a burst of %d publishes cancelled before their EncoderReady (seed %d): %s; want every one back to its value before (nothing left behind until the %d ms TTL)",
			settleTimeout, c7BurstPublishes, c7BurstSeed, strings.Join(before.diff(c, keys...), ", "), c7BurstTTLMs)
	}
}

// c7RacedPublishes counts the burst's undelivered publishes whose
// cancellation came c7BurstRacePercent or more into fastest (the fastest
// calibrated publish): on a loaded machine their cancellation may reach E
// after its handler returned, which leaves a conforming entry (C-7).
func c7RacedPublishes(delays []time.Duration, undelivered []bool, fastest time.Duration) int {
	n := 0
	for i, d := range delays {
		if undelivered[i] && d >= fastest*c7BurstRacePercent/100 {
			n++
		}
	}
	return n
}
