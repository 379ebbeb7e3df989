package props

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// Input limits of CONTRACT L-1 (WIRE.md).
const maxReferenceBytes = 64 << 10

// inputKind is one request the contract rejects before execution; run
// sends it (around r, a reference of the model, for the kinds that need
// one; nil for the others).
type inputKind struct {
	name string
	run  func(mc *machine, t *rapid.T, r *refRecord)
}

func init() { actionSets = append(actionSets, inputActions) }

// inputActions registers badInput, which sends every request the target
// can be asked to reject: a video or audio item (L-3) and a request to the
// wrong role (L-4) everywhere (Core, the wire alone); then, around one
// reference of the model (or one it publishes), the same reference to the
// wrong role (L-4), padded past the limit where the profile declares the
// baton-json-v1 format (L-1; random bytes are SU-4 too, the malformed
// action's), and for a backend the consumer does not accept where the
// profile declares its backends (N-1). Each must be rejected with the
// contract's code before any token, and the reference stays as the model
// has it: a live one may then be consumed. One action for all of them,
// each cheap, so that any of their mutants is found at the first badInput
// of a check, and the requests that need no reference go first, so a
// replay that fails there runs no encoder (shrinking replays it often).
func inputActions(mc *machine) map[string]func(*rapid.T) {
	before := []inputKind{{"video-or-audio", (*machine).videoOrAudio}, {"wrong-role", (*machine).wrongRole}}
	around := []inputKind{{"wrong-role", (*machine).wrongRole}}
	if mc.profile.ReferenceFormat == target.ReferenceFormatBatonJSONv1 {
		around = append(around, inputKind{"oversize-reference", (*machine).oversizeReference})
	}
	if len(mc.profile.Backends) > 0 {
		around = append(around, inputKind{"unaccepted-backend", (*machine).unacceptedBackend})
	}
	states := []refState{stateLive, stateConsumed, stateReleased}
	return map[string]func(*rapid.T){"badInput": func(t *rapid.T) {
		if mc.m.down["producer"] || mc.m.down["consumer"] || (len(mc.m.in(states...)) == 0 && mc.m.count(stateLive) >= mc.cfg.MaxLive) {
			t.SkipNow() // S-2 decides every answer now; or no reference to pick and the table is full
		}
		mc.step(t, "bad inputs")
		for _, k := range before {
			k.run(mc, t, nil)
		}
		r := mc.refIn(t, states...)
		t.Logf("[props] around %s (%s)", refLabel(r.ref), r.state)
		for _, k := range around {
			k.run(mc, t, r)
		}
		if r.state != stateLive || !rapid.Bool().Draw(t, "then consume it") {
			return
		}
		// A tamper-evident reference has no legal padded form (SU-5), so
		// only the original can be consumed.
		mc.consumeRef(t, r, "the original, which no rejected request may have consumed (L-1, L-4, N-1)")
	}}
}

// refIn returns a reference of the model in one of states, or publishes a
// fresh one (an action that carries its own setup, so a shrunk failure
// needs no earlier publish); it skips when neither is possible.
func (mc *machine) refIn(t *rapid.T, states ...refState) *refRecord {
	idx := mc.m.in(states...)
	full := mc.m.count(stateLive) >= mc.cfg.MaxLive
	if len(idx) > 0 && (full || !rapid.Bool().Draw(t, "publish a fresh one")) {
		return mc.m.refs[rapid.SampledFrom(idx).Draw(t, "ref")]
	}
	if full {
		t.SkipNow() // table full and nothing to pick
	}
	img := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "image")
	t.Logf("[props] setup: publish %s", mc.cfg.Images[img].Name) // part of the action that called refIn
	ctx, cancel := mc.ctx()
	defer cancel()
	mc.expectPublished(t, fmt.Sprintf("Publish(image=%s)", mc.cfg.Images[img].Name), mc.generate(t, ctx, mc.prod, mc.publishRequest(img)), img)
	return mc.m.refs[len(mc.m.refs)-1]
}

// expectRejectedBefore checks that e answered res with code, no token and
// no EncoderReady. call must name the request without random content (see
// failf). A reference e published anyway is released first, so the
// shrinker's replays do not fill the producer's quota (L-5).
func (mc *machine) expectRejectedBefore(t *rapid.T, e target.Engine, call string, res *target.GenerateResult, code codes.Code, rule string) {
	t.Helper()
	if res.Code() != code || len(res.TokenIDs()) > 0 || res.EncoderReady() != nil {
		if ref := res.EncoderReady().GetRef(); ref != nil {
			ctx, cancel := mc.ctx()
			_, _ = e.Abort(ctx, abortRequest(ref))
			_, _ = mc.prod.Abort(ctx, abortRequest(ref))
			cancel()
		}
		failf(t, describe(res), "%s = %s; want %s before any token or EncoderReady (%s)", call, brief(res), codeName(code), rule)
	}
}

// failf fails the check with a message that is the same on every replay of
// the same draws: rapid shrinks a failure only while each replay fails with
// the identical message, so references are named by their state and image
// (label) and engine status messages, which carry random ids, go to detail,
// logged before.
func failf(t *rapid.T, detail, format string, args ...any) {
	t.Helper()
	if detail != "" {
		t.Logf("[props] detail: %s", detail)
	}
	t.Fatalf(format, args...)
}

// label names r by its state and image, which stay the same on every
// replay of the same draws and do not change when the shrinker removes an
// unrelated earlier action (an index in the model would).
func (mc *machine) label(r *refRecord) string {
	return fmt.Sprintf("a %s reference to %s", r.state, mc.cfg.Images[r.image].Name)
}

// padReference returns opaque extended with spaces to exactly n bytes
// (the same JSON document, but other bytes: an oversize one is L-1
// whatever its content).
func padReference(t *rapid.T, opaque []byte, n int) []byte {
	if len(opaque) > n {
		t.Fatalf("opaque_state %q is longer than %d bytes", truncate(string(opaque), 60), n)
	}
	return append(append(make([]byte, 0, n), opaque...), bytes.Repeat([]byte{' '}, n-len(opaque))...)
}

// oversizeReference presents r padded to 65,537 bytes: INVALID_ARGUMENT
// before any token on the consumer and on Abort, whatever r's state (L-1
// decides before SU-4 and SU-2), and nothing is consumed or released.
func (mc *machine) oversizeReference(t *rapid.T, r *refRecord) {
	t.Logf("[props] input: a copy padded to 65537 bytes")
	over := proto.Clone(r.ref).(*pb.EncoderCacheRef)
	over.OpaqueState = padReference(t, r.ref.GetOpaqueState(), maxReferenceBytes+1)
	ctx, cancel := mc.ctx()
	defer cancel()
	mc.expectRejectedBefore(t, mc.cons, "Consume("+mc.label(r)+" padded with JSON spaces to 65537 bytes)",
		mc.generate(t, ctx, mc.cons, mc.consumeRequest(over)), codes.InvalidArgument, "L-1: opaque_state is at most 64 KiB")
	if _, err := mc.prod.Abort(ctx, abortRequest(over)); status.Code(err) != codes.InvalidArgument {
		failf(t, statusString(err), "Abort(%s padded to 65537 bytes) = %s; want INVALID_ARGUMENT, releasing nothing (L-1, SU-4)", mc.label(r), codeName(status.Code(err)))
	}
}

// l3Media are video and audio payloads: minimal containers, and an image's
// bytes labelled video (the modality decides, never the bytes).
func l3Media(img fixtures.Image) []*pb.MediaItem {
	return []*pb.MediaItem{
		{Modality: pb.Modality_MODALITY_VIDEO, MimeType: "video/mp4", Source: &pb.MediaItem_RawBytes{RawBytes: []byte("\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2")}},
		{Modality: pb.Modality_MODALITY_AUDIO, MimeType: "audio/wav", Source: &pb.MediaItem_RawBytes{RawBytes: []byte("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80\x3e\x00\x00\x00\x7d\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00")}},
		{Modality: pb.Modality_MODALITY_VIDEO, MimeType: "video/mp4", Source: &pb.MediaItem_RawBytes{RawBytes: img.Data}},
		{Modality: pb.Modality_MODALITY_AUDIO, MimeType: "audio/wav", Source: &pb.MediaItem_RawBytes{RawBytes: img.Data}},
	}
}

// videoOrAudio publishes a video or audio item, alone or after an image
// (and, with a baseline, asks the baseline about it): UNIMPLEMENTED before
// any token or EncoderReady, and nothing published (L-3; the producer's
// entries stay within the model's range, checked after the action).
func (mc *machine) videoOrAudio(t *rapid.T, _ *refRecord) {
	img := rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "image")
	items := l3Media(mc.cfg.Images[img])
	i := rapid.IntRange(0, len(items)-1).Draw(t, "item")
	item := items[i]
	afterImage := rapid.Bool().Draw(t, "after an image")
	what := fmt.Sprintf("%s item #%d", item.GetModality(), i)
	req := mc.publishRequest(img)
	if afterImage {
		req.Media = append(req.Media, item)
		what = mc.cfg.Images[img].Name + ", then " + what
	} else {
		req.Media = []*pb.MediaItem{item}
	}
	t.Logf("[props] input: publish %s", what)
	ctx, cancel := mc.ctx()
	defer cancel()
	mc.expectRejectedBefore(t, mc.prod, "Publish("+what+")", mc.generate(t, ctx, mc.prod, req), codes.Unimplemented, "L-3: video and audio are rejected before execution")
	if base, ok := mc.tg.Engine(target.RoleBaseline); ok {
		breq := mc.baselineRequest(mc.cfg.Prompt, item)
		mc.expectRejectedBefore(t, base, fmt.Sprintf("Baseline(prompt, %s item #%d)", item.GetModality(), i), mc.generate(t, ctx, base, breq), codes.Unimplemented, "L-3")
	}
}

// wrongRole sends a request to a role that does not serve it: without r,
// a text-only prompt to the producer, a publish or a prompt with media to
// the consumer (or, with a baseline, a publish to it); with r, r as a
// consume to the producer (or the baseline). FAILED_PRECONDITION before
// any token or EncoderReady (L-4, which decides before every other rule),
// and r is neither consumed nor released.
func (mc *machine) wrongRole(t *rapid.T, r *refRecord) {
	type wrong struct {
		what string
		role target.Role
		req  func(img int) *pb.GenerateRequest
	}
	var cases []wrong
	_, hasBase := mc.tg.Engine(target.RoleBaseline)
	if r == nil {
		cases = []wrong{
			{"text-only prompt sent to the producer", target.RoleProducer, func(int) *pb.GenerateRequest { return mc.baselineRequest(textPrompt) }},
			{"publish sent to the consumer", target.RoleConsumer, mc.publishRequest},
			{"prompt with media, no encoder options, sent to the consumer", target.RoleConsumer, func(img int) *pb.GenerateRequest {
				return mc.baselineRequest(mc.cfg.Prompt, mc.publishRequest(img).Media...)
			}},
		}
		if hasBase {
			cases = append(cases, wrong{"publish sent to the baseline", target.RoleBaseline, mc.publishRequest})
		}
	} else {
		consume := func(int) *pb.GenerateRequest { return mc.consumeRequest(r.ref) }
		cases = []wrong{{"consume sent to the producer", target.RoleProducer, consume}}
		if hasBase {
			cases = append(cases, wrong{"consume sent to the baseline", target.RoleBaseline, consume})
		}
	}
	c := rapid.SampledFrom(cases).Draw(t, "wrong")
	img := 0
	call := c.what
	switch {
	case r != nil:
		call = fmt.Sprintf("%s (%s)", c.what, mc.label(r))
	case c.role != target.RoleProducer:
		img = rapid.IntRange(0, len(mc.cfg.Images)-1).Draw(t, "image")
		call = fmt.Sprintf("%s (image=%s)", c.what, mc.cfg.Images[img].Name)
	}
	t.Logf("[props] input: %s", call)
	e, _ := mc.tg.Engine(c.role)
	ctx, cancel := mc.ctx()
	defer cancel()
	mc.expectRejectedBefore(t, e, call, mc.generate(t, ctx, e, c.req(img)), codes.FailedPrecondition, "L-4: a request sent to the wrong role")
}

// unacceptedBackend re-labels a reference with a backend the consumer
// accepts neither by its profile nor by GetModelInfo:
// FAILED_PRECONDITION before any token, whatever the reference's state
// (N-1 decides after SU-4, before SU-2), and the original is neither
// consumed nor released.
func (mc *machine) unacceptedBackend(t *rapid.T, r *refRecord) {
	ctx, cancel := mc.ctx()
	defer cancel()
	accepted := slices.Clone(mc.profile.Backends)
	if info, err := mc.cons.GetModelInfo(ctx, mc.profile.Model); err == nil {
		accepted = append(accepted, info.GetEncoder().GetBackends()...)
	}
	unlisted := rapid.SampledFrom([]string{"props-unlisted-backend", "nixl", "shared_dir_v0"}).Draw(t, "backend")
	for slices.Contains(accepted, unlisted) {
		unlisted += "-x"
	}
	t.Logf("[props] input: a copy labelled backend %q", unlisted)
	bad := proto.Clone(r.ref).(*pb.EncoderCacheRef)
	bad.Backend = unlisted
	mc.expectRejectedBefore(t, mc.cons, fmt.Sprintf("Consume(%s labelled backend %q; the consumer accepts %v)", mc.label(r), unlisted, accepted),
		mc.generate(t, ctx, mc.cons, mc.consumeRequest(bad)), codes.FailedPrecondition, "N-1: a backend the consumer does not accept")
}

// textPrompt is a prompt without image marker (fixtures "text-hello").
const textPrompt = "Hello! Say something short."

// baselineRequest is a prompt with media and no encoder options (the
// aggregated baseline's request); with no items a text-only request.
func (mc *machine) baselineRequest(prompt string, items ...*pb.MediaItem) *pb.GenerateRequest {
	return &pb.GenerateRequest{
		RequestId: newRequestID("props-baseline"),
		Model:     mc.profile.Model,
		Input:     &pb.GenerateRequest_Prompt{Prompt: prompt},
		Stopping:  &pb.StoppingOptions{MaxTokens: proto.Uint32(maxTokens)},
		Media:     items,
	}
}
