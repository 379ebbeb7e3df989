package suite

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Single-use cases (CONTRACT SU-1..SU-5).

// su1Rounds and su1Consumers size SU-1: each round publishes one reference
// and races su1Consumers consumes of it, released together.
const (
	su1Rounds    = 3
	su1Consumers = 4
)

// SU1ConcurrentConsumesOneWins races concurrent consumes of one reference: exactly one gets tokens, the rest INVALID_ARGUMENT before any token (SU-1).
func SU1ConcurrentConsumesOneWins(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	img := fixture(t, "video-001.png")
	prompt := promptText(t, promptMarker)

	for round := 1; round <= su1Rounds; round++ {
		ref := h.publish(img).GetRef()
		results := make([]*target.GenerateResult, su1Consumers)
		errs := make([]error, su1Consumers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range su1Consumers {
			req := h.consumeRequest(prompt, ref)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = h.cons.Generate(ctx, req)
			}()
		}
		close(start) // release all consumes at once
		wg.Wait()
		for i := range results {
			if errs[i] == nil && results[i] != nil && results[i].Status != nil {
				results[i] = h.onDecode(ctx, results[i], prompt) // E+P+D: the winner's KV session goes on to D
			}
		}

		winners := 0
		var summary []string
		for i, res := range results {
			if errs[i] != nil || res == nil || res.Status == nil {
				HarnessError(t, "concurrent Generate %d: %v", i, errs[i])
			}
			summary = append(summary, describe(res))
			switch {
			case res.Code() == codes.OK && len(res.TokenIDs()) > 0:
				winners++
			case res.Code() == codes.InvalidArgument && len(res.TokenIDs()) == 0:
			default:
				t.Errorf("%s = %s; want tokens (the one winner) or INVALID_ARGUMENT before any token",
					consumeCall(ref, fmt.Sprintf("round %d, concurrent %d of %d", round, i+1, su1Consumers)), describe(res))
			}
		}
		if winners != 1 {
			t.Errorf("%d concurrent Consume(ref=%s), round %d: %d got tokens; want exactly 1 [%s]",
				su1Consumers, refLabel(ref), round, winners, strings.Join(summary, "; "))
		}
	}
	h.expectReady("consumer", h.cons)
}

// SU2ReplayRejected consumes a reference, replays it (INVALID_ARGUMENT before any token), and checks the consumer stays READY and serves the next handoff (SU-2).
func SU2ReplayRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	h.consumeMust(prompt, ref, "first use")
	h.consumeRejected(prompt, ref, "replay after it was consumed", codes.InvalidArgument)
	h.expectReady("consumer", h.cons)
	h.handoff(fixture(t, "basn6a08.png"), prompt)
}

// SU2ReleasedRejected releases a reference with Abort, then presents it: INVALID_ARGUMENT before any token; the consumer stays READY (SU-2).
func SU2ReleasedRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	if st, err := h.abort(h.prod, ref); err != nil {
		t.Fatalf("%s = %s; want ABORTED (the release SU-2 is checked on)", abortCall(ref, ""), statusString(err))
	} else if st != pb.AbortStatus_ABORT_STATUS_ABORTED {
		t.Logf("%s = %s (SU-3 wants ABORTED); checking SU-2 anyway", abortCall(ref, ""), abortName(st))
	}
	h.consumeRejected(prompt, ref, "after it was released", codes.InvalidArgument)
	h.expectReady("consumer", h.cons)
	h.handoff(fixture(t, "basn6a08.png"), prompt)
}

// SU2ExpiredRejected publishes with ttl_ms=1, waits past the TTL, and presents the reference: INVALID_ARGUMENT before any token (SU-2).
func SU2ExpiredRejected(ctx context.Context, t TB, tg target.Target) {
	// The wait is on the harness's monotonic clock: the engine started the
	// TTL before EncoderReady reached the harness, so ttl_ms+ttlMarginMs
	// later the reference is expired by the engine's own clock. Only the
	// wire is used (Core); expiry is not collection, so no observable
	// is needed.
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	img := fixture(t, "video-001.jpeg")

	const ttlMs = 1
	ref := h.publishItems(proto.Uint32(ttlMs), "image="+img.Name+", ttl_ms=1", imageItem(img)).GetRef()
	h.waitMs(ttlMs+ttlMarginMs, "for the reference to expire")
	h.consumeRejected(prompt, ref, fmt.Sprintf("%d ms after a %d ms TTL", ttlMs+ttlMarginMs, ttlMs), codes.InvalidArgument)
	h.expectReady("consumer", h.cons)
	h.handoff(fixture(t, "basn6a08.png"), prompt)
}

// SU3AbortReleasesOnce aborts a published reference: ABORTED, then ALREADY_FINISHED on every repeat, the reference no longer consumes, and a sibling entry is untouched (SU-3).
func SU3AbortReleasesOnce(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	sibling := h.publish(fixture(t, "triangle-001.gif")).GetRef()
	h.expectAbortStatus(ref, "first", pb.AbortStatus_ABORT_STATUS_ABORTED)
	h.expectAbortStatus(ref, "second", pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED)
	h.expectAbortStatus(ref, "third", pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED)
	h.consumeRejected(prompt, ref, "after it was released", codes.InvalidArgument)
	h.consumeOK(prompt, sibling, "a sibling entry published before the abort")
}

// SU3AbortAfterConsume aborts a consumed reference: ALREADY_FINISHED, on every repeat (SU-3).
func SU3AbortAfterConsume(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	h.consumeMust(prompt, ref, "first use")
	h.expectAbortStatus(ref, "after it was consumed", pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED)
	h.expectAbortStatus(ref, "again after it was consumed", pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED)
}

// SU3AbortAfterExpiry aborts a reference past its TTL: ALREADY_FINISHED, on every repeat (SU-3).
func SU3AbortAfterExpiry(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	img := fixture(t, "video-001.jpeg")

	const ttlMs = 1
	ref := h.publishItems(proto.Uint32(ttlMs), "image="+img.Name+", ttl_ms=1", imageItem(img)).GetRef()
	h.waitMs(ttlMs+ttlMarginMs, "for the reference to expire")
	note := fmt.Sprintf("%d ms after a %d ms TTL", ttlMs+ttlMarginMs, ttlMs)
	h.expectAbortStatus(ref, note, pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED)
	h.expectAbortStatus(ref, "again, "+note, pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED)
}

// su4Variants returns the malformed imitations of ref's opaque state, or
// ends the case when a declared baton-json-v1 reference does not parse.
func (h *harness) su4Variants(ref *pb.EncoderCacheRef) []malformedVariant {
	h.t.Helper()
	vs, err := malformedOpaques(ref.GetOpaqueState(), h.formatDeclared())
	if err != nil {
		h.t.Fatalf("Publish = reference %s: %v; the profile declares reference_format %q", refLabel(ref), err, FormatBatonJSONv1)
	}
	return vs
}

// SU4MalformedConsumeRejected presents malformed imitations of a valid reference to the consumer: each INVALID_ARGUMENT before any token, and the valid reference still consumes (SU-4).
func SU4MalformedConsumeRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	for _, v := range h.su4Variants(ref) {
		h.consumeRejected(prompt, withOpaque(ref, v.opaque), v.name, codes.InvalidArgument)
	}
	h.expectReady("consumer", h.cons)
	h.consumeOK(prompt, ref, "the valid reference the malformed ones imitated")
}

// SU4MalformedAbortRejected sends Abort with malformed imitations of a valid reference to the producer: each INVALID_ARGUMENT, and the valid reference still consumes (SU-4).
func SU4MalformedAbortRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	for _, v := range h.su4Variants(ref) {
		h.expectAbortCode(h.prod, withOpaque(ref, v.opaque), v.name, codes.InvalidArgument)
	}
	h.expectReady("producer", h.prod)
	h.consumeOK(prompt, ref, "the valid reference the malformed aborts imitated")
}

// su5Images are pixel-distinct fixtures, so no two publishes may be one
// idempotent entry (SU-6 allows that for equal media).
var su5Images = []string{
	"video-001.png", "basn6a08.png", "basn3p08.png", "basn0g08.png",
	"basn2c16.png", "one-pixel.png", "triangle-001.gif", "blue-purple-pink.png",
}

// SU5ReferenceIDsUnguessable publishes 8 distinct images: opaque states differ, and (format declared) ids are 32 lowercase hex, distinct, share no 32-bit prefix and are not derived from content hashes (SU-5).
func SU5ReferenceIDsUnguessable(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()

	readies := make([]*pb.EncoderReady, len(su5Images))
	for i, name := range su5Images {
		readies[i] = h.publish(fixture(t, name))
	}
	seen := map[string]string{}
	for i, r := range readies {
		op := string(r.GetRef().GetOpaqueState())
		if prev, dup := seen[op]; dup {
			t.Errorf("Publish(image=%s) = the same opaque_state as Publish(image=%s); want a distinct reference per entry", su5Images[i], prev)
		}
		seen[op] = su5Images[i]
	}
	h.needFormat("checking that reference ids carry 128 random bits")

	ids := make([]string, len(readies))
	for i, r := range readies {
		id, err := refID(r.GetRef().GetOpaqueState())
		if err != nil {
			t.Fatalf("Publish(image=%s) = reference that is not %s: %v", su5Images[i], FormatBatonJSONv1, err)
		}
		ids[i] = id
		if !entryIDPattern.MatchString(id) {
			t.Errorf("Publish(image=%s) = id %q; want 32 lowercase hex digits (128 random bits)", su5Images[i], id)
		}
		for _, it := range r.GetItems() {
			if hash := it.GetContentHash(); len(id) >= 16 && strings.Contains(hash, id[:16]) {
				t.Errorf("Publish(image=%s) = id %q taken from content hash %q; want an id nobody can derive from the media", su5Images[i], id, hash)
			}
		}
	}
	for i := range ids {
		for j := i + 1; j < len(ids); j++ {
			if len(ids[i]) >= 8 && len(ids[j]) >= 8 && ids[i][:8] == ids[j][:8] {
				t.Errorf("Publish(image=%s) id %q and Publish(image=%s) id %q share the 32-bit prefix %q; want random ids (a counter or clock is guessable)",
					su5Images[i], ids[i], su5Images[j], ids[j], ids[i][:8])
			}
		}
	}
}

// SU5ForgedReferenceRejected presents entry A's opaque state with entry B's id (format declared): INVALID_ARGUMENT on consumer and producer, and A and B still consume (SU-5).
func SU5ForgedReferenceRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	h.needFormat("forging a reference from another entry's id")
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	refA := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	refB := h.publish(fixture(t, "triangle-001.gif")).GetRef()
	idB, err := refID(refB.GetOpaqueState())
	if err != nil {
		t.Fatalf("Publish = reference %s: %v; the profile declares reference_format %q", refLabel(refB), err, FormatBatonJSONv1)
	}
	forgedOpaque, err := refWith(refA.GetOpaqueState(), "id", idB)
	if err != nil {
		t.Fatalf("Publish = reference %s: %v; the profile declares reference_format %q", refLabel(refA), err, FormatBatonJSONv1)
	}
	forged := withOpaque(refA, forgedOpaque)
	note := fmt.Sprintf("forged: %s's state with %s's id", refLabel(refA), refLabel(refB))
	h.consumeRejected(prompt, forged, note, codes.InvalidArgument)
	h.expectAbortCode(h.prod, forged, note, codes.InvalidArgument)
	h.consumeOK(prompt, refB, "the entry whose id was forged")
	h.consumeOK(prompt, refA, "the entry whose state was forged")
}

// su5Paths are path-like reference contents. They point only at files no
// engine can rename or delete (/proc/self/...) or that do not exist, so a
// broken engine that follows them harms nothing on the machine running it.
var su5Paths = []string{
	"../../../../../../../../proc/self/status",
	"/proc/self/status",
	"/tmp/baton-su5-no-such-entry",
	"..",
	"../",
	"./entry",
	"entry/../../../../../../proc/self/status",
	`..\..\..\..\windows\win.ini`,
	"%2e%2e%2f%2e%2e%2f%2e%2e%2fproc%2fself%2fstatus",
}

// SU5PathReferencesRejected presents path-like references (as the whole opaque state and, format declared, as the id) to consumer and producer: each INVALID_ARGUMENT, and the valid reference still consumes (SU-5).
func SU5PathReferencesRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	type variant struct {
		note   string
		opaque []byte
	}
	var vs []variant
	for _, p := range su5Paths {
		vs = append(vs, variant{fmt.Sprintf("opaque_state %q", p), []byte(p)})
	}
	if h.formatDeclared() {
		for _, p := range su5Paths {
			op, err := refWith(ref.GetOpaqueState(), "id", p)
			if err != nil {
				t.Fatalf("Publish = reference %s: %v; the profile declares reference_format %q", refLabel(ref), err, FormatBatonJSONv1)
			}
			vs = append(vs, variant{fmt.Sprintf("id %q", p), op})
		}
	}
	for _, v := range vs {
		bad := withOpaque(ref, v.opaque)
		h.consumeRejected(prompt, bad, v.note, codes.InvalidArgument)
		h.expectAbortCode(h.prod, bad, v.note, codes.InvalidArgument)
	}
	h.expectReady("producer", h.prod)
	h.expectReady("consumer", h.cons)
	h.consumeOK(prompt, ref, "the valid reference after the path-like ones")
}

// SU5ForeignInstanceRejected presents a valid reference re-addressed to another producer instance (a random UUID, a path): INVALID_ARGUMENT on consumer and producer, and the original still consumes (SU-5).
func SU5ForeignInstanceRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	other := newUUID()
	for other == ref.GetProducerInstanceId() {
		other = newUUID()
	}
	for _, id := range []string{other, "../../../../../../proc/self", ""} {
		foreign := proto.Clone(ref).(*pb.EncoderCacheRef)
		foreign.ProducerInstanceId = id
		note := fmt.Sprintf("producer_instance_id %q", id)
		h.consumeRejected(prompt, foreign, note, codes.InvalidArgument)
		h.expectAbortCode(h.prod, foreign, note, codes.InvalidArgument)
	}
	h.consumeOK(prompt, ref, "the original after the re-addressed copies")
}
