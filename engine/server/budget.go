package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/engine/encoder"
	"golang.org/x/sync/semaphore"
)

// DecodeBudget bounds media decoding across all requests together
// (CONTRACT SE-4: "decode memory and CPU are bounded across all requests
// together (beyond the bound, RESOURCE_EXHAUSTED)"). The per-image and
// per-request bounds of L-6 (encoder.Limits, MaxRequestPixels) stop one
// request from holding too much; this stops many requests at once from
// holding too much together.
//
// A request reserves what decoding its images holds at the peak, from
// their headers (encoder.DecodePeakBytes: DecodedBytesPerPixel bytes for
// every pixel, more for a progressive JPEG), before any image is decoded,
// and holds the reservation until the request ends (its decoded images
// live that long). A request that does not fit waits up to Wait, first
// come first served, then fails with RESOURCE_EXHAUSTED (retryable); a
// request larger than MaxBytes alone fails at once, RESOURCE_EXHAUSTED
// too (SE-4's code), with a message that says retrying cannot help. Each decode then runs
// in one of MaxConcurrent slots, so decoding never takes every CPU and
// Health keeps answering; a decode that gets no slot within
// max(Wait, DecodeSlotWait) fails with RESOURCE_EXHAUSTED too, so a slow
// decode delays the others by a bounded time instead of until their
// deadlines (attack F1, stop 22).
type DecodeBudget struct {
	// MaxBytes bounds the decoded bytes reserved at once (--decode-budget-bytes;
	// default DefaultDecodeBudgetBytes). It must hold one request of the
	// largest size L-6 lets in (Config.MaxRequestPixels *
	// DecodedBytesPerPixel = 320 MB under the default media limits), so
	// every valid request is served once it has the budget to itself.
	MaxBytes int64
	// MaxConcurrent bounds the decodes running at once
	// (--max-concurrent-decodes; default: GOMAXPROCS-1, at least 1).
	MaxConcurrent int
	// Wait is how long a request waits for room in MaxBytes before
	// RESOURCE_EXHAUSTED (--decode-wait; default 500 ms; negative: no wait).
	Wait time.Duration
}

// DefaultDecodeBudgetBytes is the default DecodeBudget.MaxBytes: 512 MiB.
// It admits one request of the largest size (40 megapixels, 320 MB at
// DecodedBytesPerPixel) plus a few ordinary ones (a 12-megapixel camera
// JPEG reserves 96 MB), and with Go's garbage collector (whose heap may
// grow to about twice what is live) keeps decoding under about 1 GiB on
// the CI machines (2 cores, 24 GiB), far from what takes a machine down.
const DefaultDecodeBudgetBytes = 512 << 20

// DecodedBytesPerPixel is what one decoded pixel is charged at least: 8
// bytes, the 16-bit RGBA form (image.NRGBA64) of the H-1 content hash and
// the largest form a decoder returns (a 16-bit PNG); a progressive JPEG is
// charged more (encoder.DecodePeakBytes: up to 20 bytes for CMYK, so the
// largest of those need a budget above the default).
const DecodedBytesPerPixel = encoder.DecodedBytesPerPixel

// DecodeSlotWait is the least time a decode waits for one of the budget's
// slots before RESOURCE_EXHAUSTED (SE-4): long enough for a queue of
// ordinary images behind the slowest one L-6 lets in (a 40-megapixel
// progressive JPEG of encoder.MaxJPEGScans scans, under 2 s on the CI
// machine).
const DecodeSlotWait = 5 * time.Second

// DefaultDecodeWait is the default DecodeBudget.Wait.
const DefaultDecodeWait = 500 * time.Millisecond

// errDecodeBudget: the decode budget has no room for a request within its
// wait (RESOURCE_EXHAUSTED, rule SE-4).
var errDecodeBudget = errors.New("server: decode budget exhausted")

// decodeBudget is DecodeBudget at run time.
type decodeBudget struct {
	maxBytes int64
	wait     time.Duration
	slotWait time.Duration       // how long a decode waits for a slot: max(wait, DecodeSlotWait)
	bytes    *semaphore.Weighted // decoded bytes reserved
	cpu      *semaphore.Weighted // decodes running
	inflight atomic.Int64        // bytes reserved now (observable)
	waiting  atomic.Int64        // requests waiting for room now (observable)
	refused  atomic.Int64        // requests refused for want of room (observable)
}

// withDefaults fills zero fields.
func (b DecodeBudget) withDefaults() DecodeBudget {
	if b.MaxBytes == 0 {
		b.MaxBytes = DefaultDecodeBudgetBytes
	}
	if b.MaxConcurrent == 0 {
		b.MaxConcurrent = max(1, runtime.GOMAXPROCS(0)-1)
	}
	if b.Wait == 0 {
		b.Wait = DefaultDecodeWait
	}
	return b
}

// largestRequestPixels is the most pixels one request may declare under
// lim and the per-request bound maxRequest (L-6): maxRequest, or fewer when
// every item's own bound is low.
func largestRequestPixels(lim encoder.Limits, maxRequest int64) int64 {
	per := lim.MaxPixels
	if per <= 0 {
		per = encoder.DefaultMaxPixels
	}
	return min(maxRequest, int64(MaxItemsPerRequest)*per)
}

// check validates a filled budget against the largest request L-6 lets in.
func (b DecodeBudget) check(maxRequestPixels int64) error {
	if b.MaxConcurrent < 1 {
		return fmt.Errorf("server: --max-concurrent-decodes %d (want at least 1; 0 takes the default)", b.MaxConcurrent)
	}
	if need := maxRequestPixels * DecodedBytesPerPixel; b.MaxBytes < need {
		return fmt.Errorf("server: --decode-budget-bytes %d is below one request of the largest size (%d pixels * %d bytes = %d): such requests could never be served (lower --max-request-pixels with it)", b.MaxBytes, maxRequestPixels, DecodedBytesPerPixel, need)
	}
	return nil
}

func newDecodeBudget(b DecodeBudget) *decodeBudget {
	b = b.withDefaults()
	return &decodeBudget{
		maxBytes: b.MaxBytes,
		wait:     b.Wait,
		slotWait: max(b.Wait, DecodeSlotWait),
		bytes:    semaphore.NewWeighted(b.MaxBytes),
		cpu:      semaphore.NewWeighted(int64(b.MaxConcurrent)),
	}
}

// unbounded is the decode budget of the NoDecodeBudget mutant (hooks.go):
// room for every request at once and a decode slot for every image.
var unbounded = newDecodeBudget(DecodeBudget{MaxBytes: math.MaxInt64, MaxConcurrent: math.MaxInt32, Wait: -1})

// reserve takes n bytes of the budget (a request's encoder.DecodePeakBytes),
// waiting up to the budget's wait (or until ctx ends). It returns the
// release function (idempotent). Errors: errDecodeBudget
// (RESOURCE_EXHAUSTED), ctx's error.
func (d *decodeBudget) reserve(ctx context.Context, n int64) (release func(), err error) {
	if n <= 0 {
		return func() {}, nil
	}
	if n > d.maxBytes {
		d.refused.Add(1)
		return nil, fmt.Errorf("%w: SE-4 this request alone decodes to %d bytes, more than the engine's decode budget of %d: retrying cannot help; send smaller images", errDecodeBudget, n, d.maxBytes)
	}
	if !d.bytes.TryAcquire(n) {
		if d.wait < 0 {
			d.refused.Add(1)
			return nil, fmt.Errorf("%w: SE-4 no room for %d decoded bytes (budget %d, all in use); retry later", errDecodeBudget, n, d.maxBytes)
		}
		wctx, cancel := context.WithTimeout(ctx, d.wait)
		d.waiting.Add(1)
		err := d.bytes.Acquire(wctx, n)
		d.waiting.Add(-1)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			d.refused.Add(1)
			return nil, fmt.Errorf("%w: SE-4 no room for %d decoded bytes within %v (budget %d in use by other requests); retry later", errDecodeBudget, n, d.wait, d.maxBytes)
		}
	}
	d.inflight.Add(n)
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			d.inflight.Add(-n)
			d.bytes.Release(n)
		}
	}, nil
}

// run runs decode in one of the budget's CPU slots, waiting for one up to
// its slot wait (max(the budget's wait, DecodeSlotWait)) or until ctx ends. Errors:
// errDecodeBudget (RESOURCE_EXHAUSTED, SE-4) when no slot came in time,
// ctx's error.
func (d *decodeBudget) run(ctx context.Context, decode func()) error {
	if !d.cpu.TryAcquire(1) {
		wctx, cancel := context.WithTimeout(ctx, d.slotWait)
		err := d.cpu.Acquire(wctx, 1)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			d.refused.Add(1)
			return fmt.Errorf("%w: SE-4 no decode slot free within %v (every slot busy decoding other requests' media); retry later", errDecodeBudget, d.slotWait)
		}
	}
	defer d.cpu.Release(1)
	decode()
	return nil
}
