package suite

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Limits and validation cases (CONTRACT L-1..L-6).

// l1Oversizes are the opaque_state sizes of the L-1 case: one byte over
// the 64 KiB bound, and 1 MiB, far over it yet under any gRPC receive limit
// an engine may set (CONTRACT L-6: at least the media bound plus 1 MiB).
var l1Oversizes = []int{maxReferenceBytes + 1, 1 << 20}

// L1OversizeReferenceRejected presents references whose opaque_state is over 64 KiB, of any content (random bytes, and the valid reference followed by random bytes or by spaces), at 65,537 bytes and at 1 MiB, to the consumer and to the producer's Abort: INVALID_ARGUMENT before any token, and the valid reference still consumes (L-1, any reference format).
func L1OversizeReferenceRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	op := ref.GetOpaqueState()
	for _, size := range l1Oversizes {
		random := withOpaque(ref, pseudoBytes(fmt.Sprintf("L-1 oversize reference %d", size), size))
		prefixed := withOpaque(ref, append(append([]byte(nil), op...), pseudoBytes(fmt.Sprintf("L-1 oversize tail %d", size), size-len(op))...))
		spaced := withOpaque(ref, append(append([]byte(nil), op...), bytes.Repeat([]byte{' '}, size-len(op))...))
		for _, v := range []struct {
			note string
			ref  *pb.EncoderCacheRef
		}{
			{fmt.Sprintf("opaque_state %d random bytes", size), random},
			{fmt.Sprintf("opaque_state the valid %d bytes followed by random bytes to %d", len(op), size), prefixed},
			{fmt.Sprintf("opaque_state the valid %d bytes followed by spaces to %d (a lenient reader would skip them)", len(op), size), spaced},
		} {
			h.expectRefused(prompt, v.ref, v.note, codes.InvalidArgument)
		}
	}
	h.consumeOK(prompt, ref, "the valid reference after the oversize ones")
}

// L1PaddedReferenceAtTheBound pads a valid baton-json-v1 reference with JSON whitespace to 65,537 bytes and re-labels its backend to one the consumer does not accept: INVALID_ARGUMENT, not FAILED_PRECONDITION, since the size bound decides before the backend (CONTRACT "which code wins": L-1 before N-1), and the valid reference still consumes (L-1). Only a well-formed oversize reference tells the bound from the SU-4 parse, so this needs the declared format.
func L1PaddedReferenceAtTheBound(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	over, err := padRef(ref.GetOpaqueState(), maxReferenceBytes+1)
	if err != nil {
		t.Fatalf("Publish = reference %s: %v; the profile declares reference_format %q", refLabel(ref), err, FormatBatonJSONv1)
	}
	padded := withOpaque(ref, over)
	h.consumeRejected(prompt, padded, "valid reference padded with spaces to 65537 bytes", codes.InvalidArgument)
	relabelled := proto.Clone(padded).(*pb.EncoderCacheRef)
	relabelled.Backend = unlistedBackend(h.encoderCaps("consumer", h.cons).GetBackends())
	h.consumeRejected(prompt, relabelled, fmt.Sprintf("padded to 65537 bytes, backend %q the consumer does not accept (L-1 decides before N-1)", relabelled.Backend), codes.InvalidArgument)
	h.consumeOK(prompt, ref, "the valid reference after its padded copies")
}

// L1OversizeDecodePreparationRejected sends D a decode preparation of 2 MiB + 1 bytes: INVALID_ARGUMENT before any token; the session still decodes with its own preparation (L-1, E+P+D).
func L1OversizeDecodePreparationRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	session, prep := h.prefill(prompt, ref)
	over := pseudoBytes("L-1 oversize decode preparation", maxDecodePreparationBytes+1)
	res := h.generate(h.dec, h.decodeRequest(prompt, session, over))
	expectRejected(t, fmt.Sprintf("Decode(session=%s, decode_preparation %d random bytes)", session.GetSessionId(), len(over)), res, codes.InvalidArgument)
	res = h.generate(h.dec, h.decodeRequest(prompt, session, prep))
	expectTokens(t, fmt.Sprintf("Decode(session=%s, its own decode preparation, after the oversize one)", session.GetSessionId()), res)
}

// L2DecodeWithoutPreparationRejected sends D a multimodal prefill's KV session without, then with a malformed, decode preparation: INVALID_ARGUMENT before any token; with its own preparation it decodes (L-2, E+P+D).
func L2DecodeWithoutPreparationRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	session, prep := h.prefill(prompt, ref)
	if len(prep) == 0 {
		t.Errorf("Prefill(ref=%s) = PrefillReady without decode_preparation; want P's decode preparation for a multimodal prefill", refLabel(ref))
	}
	if v, ok := session.GetAttributesStruct().GetFields()[multimodalAttribute]; !ok || !v.GetBoolValue() {
		t.Errorf("Prefill(ref=%s) = kv_session attributes %v; want %s = true (WIRE.md conventions)", refLabel(ref), session.GetAttributesStruct().AsMap(), multimodalAttribute)
	}
	call := func(what string) string { return fmt.Sprintf("Decode(session=%s, %s)", session.GetSessionId(), what) }
	expectRejected(t, call("no decode preparation"), h.generate(h.dec, h.decodeRequest(prompt, session, nil)), codes.InvalidArgument)
	expectRejected(t, call("64 garbage bytes as decode preparation"), h.generate(h.dec, h.decodeRequest(prompt, session, pseudoBytes("L-2 garbage", 64))), codes.InvalidArgument)
	expectTokens(t, call("its own decode preparation"), h.generate(h.dec, h.decodeRequest(prompt, session, prep)))
}

// l3Media are minimal, well-formed-looking video and audio payloads, small
// enough that no L-6 byte bound applies, so only the modality decides.
var l3Media = []struct {
	name     string
	modality pb.Modality
	mime     string
	data     []byte
}{
	{"video item", pb.Modality_MODALITY_VIDEO, "video/mp4", []byte("\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2")},
	{"audio item", pb.Modality_MODALITY_AUDIO, "audio/wav", []byte("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80\x3e\x00\x00\x00\x7d\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00")},
}

// L3VideoAudioUnimplemented sends video and audio items (alone and after an image) to the producer and the baseline: UNIMPLEMENTED before any token or EncoderReady (L-3; Core: the wire only, no counter).
func L3VideoAudioUnimplemented(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	img := fixture(t, "video-001.png")

	for _, m := range l3Media {
		item := &pb.MediaItem{Modality: m.modality, Source: &pb.MediaItem_RawBytes{RawBytes: m.data}, MimeType: m.mime}
		expectRejected(t, fmt.Sprintf("Publish(%s)", m.name), h.generate(h.prod, h.publishRequest(nil, item)), codes.Unimplemented)
		expectRejected(t, fmt.Sprintf("Publish(image, then %s)", m.name), h.generate(h.prod, h.publishRequest(nil, imageItem(img), item)), codes.Unimplemented)
		if h.base != nil {
			expectRejected(t, fmt.Sprintf("Baseline(prompt, %s)", m.name), h.generate(h.base, h.baselineRequest(prompt, item)), codes.Unimplemented)
		}
	}
}

// L4WrongRoleRejected sends requests to roles that do not serve them (publish to the consumer or baseline, a reference to the producer or baseline, media to the consumer, text to the producer, a decode without a KV session): FAILED_PRECONDITION before any token; the reference still consumes (L-4).
func L4WrongRoleRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	img := fixture(t, "video-001.png")
	truncated := fixture(t, "truncated.png")

	ref := h.publish(img).GetRef()
	garbage := withOpaque(ref, pseudoBytes("L-4 garbage reference", 64))
	type wrong struct {
		call string
		e    target.Engine
		req  *pb.GenerateRequest
	}
	cases := []wrong{
		{"Publish(image) to the consumer", h.cons, h.publishRequest(nil, imageItem(img))},
		{"Publish(truncated image) to the consumer (L-4 decides before L-6)", h.cons, h.publishRequest(nil, imageItem(truncated))},
		{"prompt with media, no encoder options, to the consumer", h.cons, h.baselineRequest(prompt, imageItem(img))},
		{consumeCall(ref, "sent to the producer"), h.prod, h.consumeRequest(prompt, ref)},
		{consumeCall(garbage, "garbage reference sent to the producer (L-4 decides before SU-4)"), h.prod, h.consumeRequest(prompt, garbage)},
		{"text-only request to the producer", h.prod, h.baselineRequest(promptText(t, promptTextOnly))},
	}
	if h.base != nil {
		cases = append(cases,
			wrong{consumeCall(ref, "sent to the baseline"), h.base, h.consumeRequest(prompt, ref)},
			wrong{"Publish(image) to the baseline", h.base, h.publishRequest(nil, imageItem(img))},
		)
	}
	if h.dec != nil {
		cases = append(cases, wrong{"text-only request without a KV session to the decode engine", h.dec, h.baselineRequest(promptText(t, promptTextOnly))})
	}
	for _, c := range cases {
		expectRejected(t, c.call, h.generate(c.e, c.req), codes.FailedPrecondition)
	}
	h.consumeOK(prompt, ref, "after it was sent to the wrong roles")
}

// l5MaxAttempts bounds the publishes of L-5: a quota needing more is not
// checked at Core speed (the case reports `not verifiable`).
const l5MaxAttempts = 2048

// L5ProducerQuotaEnforced publishes until RESOURCE_EXHAUSTED (within ceil(quota/entry)+2 publishes when the declared baton-json-v1 format sizes an entry, else within 2048), checks the refused publish returned nothing, then releases one entry and publishes again: the refusal is retryable and left nothing partial behind (L-5; Core: the wire only, no counter).
func L5ProducerQuotaEnforced(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	quotaBytes := h.profile.ProducerQuotaBytes
	img := fixture(t, "video-001.png")

	first := h.publish(img)
	bound := int64(l5MaxAttempts)
	entry := "an entry of unknown size (no declared reference format)"
	if h.formatDeclared() {
		entryBytes, err := refPayloadBytes(first.GetRef().GetOpaqueState())
		if err != nil || entryBytes <= 0 {
			t.Fatalf("Publish(image=%s) = reference %s: %v (%d bytes); the profile declares reference_format %q", img.Name, refLabel(first.GetRef()), err, entryBytes, FormatBatonJSONv1)
		}
		if entryBytes > quotaBytes {
			t.Fatalf("Publish(image=%s) = OK for a %d-byte entry; want RESOURCE_EXHAUSTED over the %d-byte quota", img.Name, entryBytes, quotaBytes)
		}
		bound = (quotaBytes+entryBytes-1)/entryBytes + 2
		entry = fmt.Sprintf("%d-byte entries", entryBytes)
		if bound > l5MaxAttempts {
			discovered(t, fmt.Sprintf("a %d-byte quota of %s needs up to %d publishes; the case allows %d (declare a smaller producer_quota_bytes)", quotaBytes, entry, bound, l5MaxAttempts))
		}
	}

	published := int64(1)
	var exhausted *target.GenerateResult
	for attempt := int64(2); attempt <= bound && exhausted == nil; attempt++ {
		res := h.generate(h.prod, h.publishRequest(nil, imageItem(img)))
		switch {
		case res.Code() == codes.OK && res.EncoderReady() != nil:
			published++
		case res.Code() == codes.ResourceExhausted:
			exhausted = res
		default:
			t.Fatalf("Publish #%d(image=%s) = %s; want OK or RESOURCE_EXHAUSTED", attempt, img.Name, describe(res))
		}
	}
	if exhausted == nil {
		if !h.formatDeclared() {
			discovered(t, fmt.Sprintf("%d publishes of %s all fit in the declared %d-byte quota, and without a declared reference format the case cannot tell how many should", published, img.Name, quotaBytes))
		}
		t.Fatalf("%d Publish(image=%s) of %s = all OK; want RESOURCE_EXHAUSTED past the %d-byte quota", published, img.Name, entry, quotaBytes)
	}
	expectRejected(t, fmt.Sprintf("Publish #%d(image=%s) past the quota", published+1, img.Name), exhausted, codes.ResourceExhausted)

	// Retryable, nothing partial: one entry released makes room for one publish.
	last := h.refs[len(h.refs)-1]
	h.expectAbortStatus(last, "releasing one entry of the full quota", pb.AbortStatus_ABORT_STATUS_ABORTED)
	res := h.generate(h.prod, h.publishRequest(nil, imageItem(img)))
	if res.Code() != codes.OK || res.EncoderReady() == nil {
		t.Errorf("Publish(image=%s) after releasing one of %d entries = %s; want OK (RESOURCE_EXHAUSTED is retryable, and the refused publish held nothing)", img.Name, published, describe(res))
	}
}

// l6CallTimeout bounds one L-6 request: a decompression bomb must be
// rejected from its header, not decoded.
const l6CallTimeout = 20 * time.Second

// l6Medium is one L-6 input and the code it must get.
type l6Medium struct {
	name string
	item *pb.MediaItem
	want codes.Code
}

// l6Media returns the L-6 inputs for a target declaring p: every
// fixtures.Malformed() medium (truncated, corrupt, decompression bombs, a
// BMP: a format outside the contract's list, "anything else") except
// those of an optional format p does not declare, empty bytes, bad data
// URIs (INVALID_ARGUMENT) and url sources (UNIMPLEMENTED: the Core profile
// has fetching disabled). The url targets are harmless (a closed local
// port, a procfs file) in case a broken engine fetches them.
func l6Media(p target.Profile) []l6Medium {
	var out []l6Medium
	for _, m := range fixtures.Malformed() {
		if isOptionalFormat(m.Format) && !p.DeclaresMediaFormat(m.Format) {
			continue
		}
		out = append(out, l6Medium{fmt.Sprintf("%s (%s)", m.Name, m.Want), imageItem(m), codes.InvalidArgument})
	}
	truncatedPNG := ""
	for _, m := range fixtures.Malformed() {
		if m.Name == "truncated.png" {
			truncatedPNG = base64.StdEncoding.EncodeToString(m.Data)
		}
	}
	dataURI := func(s string) *pb.MediaItem {
		return &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_DataUri{DataUri: s}, MimeType: "image/png"}
	}
	url := func(s string) *pb.MediaItem {
		return &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_Url{Url: s}, MimeType: "image/png"}
	}
	out = append(out,
		l6Medium{"empty raw bytes", &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: []byte{}}, MimeType: "image/png"}, codes.InvalidArgument},
		l6Medium{"data URI with bad base64", dataURI("data:image/png;base64,!!!!not-base64!!!!"), codes.InvalidArgument},
		l6Medium{"data URI without a comma", dataURI("data:image/png;base64"), codes.InvalidArgument},
		l6Medium{"data URI field holding an http URL", dataURI("http://127.0.0.1:9/baton-l6.png"), codes.InvalidArgument},
		l6Medium{"data URI of a truncated PNG", dataURI("data:image/png;base64," + truncatedPNG), codes.InvalidArgument},
		l6Medium{"url source to a closed local port", url("http://127.0.0.1:9/baton-l6.png"), codes.Unimplemented},
		l6Medium{"url source to a local file", url("file:///proc/self/status"), codes.Unimplemented},
	)
	return out
}

// L6MalformedMediaRejected sends malformed media, decompression bombs, bad data URIs and url sources to the producer and the baseline: INVALID_ARGUMENT (UNIMPLEMENTED for url) before any token or EncoderReady, and the producer stays READY (L-6: "no request can take the engine offline"; Core: the wire only, no counter). Malformed media of an optional format are sent only when the profile declares it.
func L6MalformedMediaRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	for _, m := range l6Media(h.profile) {
		res := h.generateWithin(h.prod, h.publishRequest(nil, m.item), l6CallTimeout)
		expectRejected(t, fmt.Sprintf("Publish(%s)", m.name), res, m.want)
		if h.base != nil {
			res = h.generateWithin(h.base, h.baselineRequest(prompt, m.item), l6CallTimeout)
			expectRejected(t, fmt.Sprintf("Baseline(prompt, %s)", m.name), res, m.want)
		}
	}
	h.expectReady("producer", h.prod)
}
