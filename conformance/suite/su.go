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
		consumers := make([]target.Engine, su1Consumers)
		for i := range consumers {
			consumers[i] = h.cons
		}
		h.expectOneWinner(fmt.Sprintf("%d concurrent Consume(ref=%s) on the consumer, round %d", su1Consumers, refLabel(ref), round), prompt, ref, consumers)
	}
}

// raceConsumes sends one consume of ref per engine of consumers, released
// together, and returns the answers in order (an E+P+D winner's KV session
// carried on to D). A harness failure ends the case.
func (h *harness) raceConsumes(prompt string, ref *pb.EncoderCacheRef, consumers []target.Engine) []*target.GenerateResult {
	h.t.Helper()
	results := make([]*target.GenerateResult, len(consumers))
	errs := make([]error, len(consumers))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, e := range consumers {
		req := h.consumeRequest(prompt, ref)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = e.Generate(h.ctx, req)
		}()
	}
	close(start) // release all consumes at once
	wg.Wait()
	for i := range results {
		if errs[i] != nil || results[i] == nil || results[i].Status == nil {
			HarnessError(h.t, "concurrent Generate %d: %v", i, errs[i])
		}
		results[i] = h.onDecode(h.ctx, results[i], prompt) // E+P+D: the winner's KV session goes on to D
	}
	return results
}

// expectOneWinner races one consume of ref per engine of consumers and
// reports (Errorf) unless exactly one gets tokens and every other is
// INVALID_ARGUMENT before any token (a loser presents a reference the
// winner spent: SU-2's code).
func (h *harness) expectOneWinner(race, prompt string, ref *pb.EncoderCacheRef, consumers []target.Engine) {
	h.t.Helper()
	winners := 0
	var summary []string
	for i, res := range h.raceConsumes(prompt, ref, consumers) {
		summary = append(summary, describe(res))
		switch {
		case res.Code() == codes.OK && len(res.TokenIDs()) > 0:
			winners++
		case res.Code() == codes.InvalidArgument && len(res.TokenIDs()) == 0:
		default:
			h.t.Errorf("%s: consume %d of %d = %s; want tokens (the one winner) or INVALID_ARGUMENT before any token", race, i+1, len(consumers), describe(res))
		}
	}
	if winners != 1 {
		h.t.Errorf("%s: %d got tokens; want exactly 1 [%s]", race, winners, strings.Join(summary, "; "))
	}
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

// SU3AbortReleasesOnce aborts a published reference: ABORTED, then ALREADY_FINISHED on every repeat, and a sibling entry is untouched (SU-3). That the released reference no longer consumes is SU-2's (SU2ReleasedRejected).
func SU3AbortReleasesOnce(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	sibling := h.publish(fixture(t, "basn2c08.png")).GetRef()
	h.expectAbortStatus(ref, "first", pb.AbortStatus_ABORT_STATUS_ABORTED)
	h.expectAbortStatus(ref, "second", pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED)
	h.expectAbortStatus(ref, "third", pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED)
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

// SU4MalformedConsumeRejected presents malformed imitations of a valid reference to the consumer: each INVALID_ARGUMENT before any token, and the valid reference still consumes (SU-4). Well-formed alterations (a flipped byte, a truncation, an altered tag) are SU-5's (SU5TamperedReferencesRejected).
func SU4MalformedConsumeRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	for _, v := range h.su4Variants(ref) {
		h.consumeRejected(prompt, withOpaque(ref, v.opaque), v.name, codes.InvalidArgument)
	}
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
	h.consumeOK(prompt, ref, "the valid reference the malformed aborts imitated")
}

// su5Images are pixel-distinct PNG and JPEG fixtures (formats every
// engine decodes), so no two publishes may be one idempotent entry (SU-6
// allows that for equal media).
var su5Images = []string{
	"video-001.png", "basn6a08.png", "basn3p08.png", "basn0g08.png",
	"basn2c16.png", "one-pixel.png", "video-001.jpeg", "blue-purple-pink.png",
}

// su5Publish publishes every su5Images fixture and returns the EncoderReadys in order.
func (h *harness) su5Publish() []*pb.EncoderReady {
	h.t.Helper()
	readies := make([]*pb.EncoderReady, len(su5Images))
	for i, name := range su5Images {
		readies[i] = h.publish(fixture(h.t, name))
	}
	return readies
}

// SU5DistinctReferences publishes 8 distinct images: their references' opaque states all differ, whatever the format (SU-5: a reference per entry, nothing a second publish could share).
func SU5DistinctReferences(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	seen := map[string]string{}
	for i, r := range h.su5Publish() {
		op := string(r.GetRef().GetOpaqueState())
		if prev, dup := seen[op]; dup {
			t.Errorf("Publish(image=%s) = the same opaque_state as Publish(image=%s); want a distinct reference per entry", su5Images[i], prev)
		}
		seen[op] = su5Images[i]
	}
}

// SU5ReferenceIDsUnguessable publishes 8 distinct images and reads the ids of the declared baton-json-v1 format: 32 lowercase hex, distinct, sharing no 32-bit prefix and not derived from content hashes (SU-5).
func SU5ReferenceIDsUnguessable(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()

	readies := h.su5Publish()
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

// SU5ForgedReferenceRejected presents entry A's opaque state with entry B's id, and A's with one hex digit of its tag altered (baton-json-v1 declared): INVALID_ARGUMENT on consumer and producer, and A and B still consume (SU-5).
func SU5ForgedReferenceRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	refA := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	refB := h.publish(fixture(t, "basn2c08.png")).GetRef()
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
	h.expectRefused(prompt, forged, note, codes.InvalidArgument)
	tagged, err := refWithTagAltered(refA.GetOpaqueState())
	if err != nil {
		t.Fatalf("Publish = reference %s: %v; the profile declares reference_format %q", refLabel(refA), err, FormatBatonJSONv1)
	}
	h.expectRefused(prompt, withOpaque(refA, tagged), "one hex digit of the tag altered", codes.InvalidArgument)
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
		h.expectRefusedUnlessSU4(prompt, withOpaque(ref, v.opaque), v.note, codes.InvalidArgument)
	}
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
		h.expectRefused(prompt, foreign, fmt.Sprintf("producer_instance_id %q", id), codes.InvalidArgument)
	}
	h.consumeOK(prompt, ref, "the original after the re-addressed copies")
}
