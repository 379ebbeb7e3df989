package suite

import (
	"context"
	"fmt"
	"slices"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Negotiation cases (CONTRACT N-1, N-2).

// encoderCaps returns e's ModelInfo.encoder, or ends the case when GetModelInfo fails.
func (h *harness) encoderCaps(who string, e target.Engine) *pb.EncoderCapabilities {
	h.t.Helper()
	info, err := e.GetModelInfo(h.ctx, h.model)
	if err != nil {
		h.t.Fatalf("GetModelInfo(%s, model=%q) = %s; want ModelInfo with encoder capabilities", who, h.model, statusString(err))
	}
	if info.GetEncoder() == nil {
		h.t.Fatalf("GetModelInfo(%s, model=%q) = ModelInfo without encoder (field 100); want encoder capabilities", who, h.model)
	}
	return info.GetEncoder()
}

// N1CapabilitiesAdvertised checks GetModelInfo: the producer is PRODUCER with supports_abort_cleanup, the consumer CONSUMER with requires_handoff and the backends it accepts, including the backend of a fresh reference (N-1).
func N1CapabilitiesAdvertised(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()

	p := h.encoderCaps("producer", h.prod)
	if p.GetRole() != pb.EncoderRole_ENCODER_ROLE_PRODUCER {
		t.Errorf("GetModelInfo(producer).encoder.role = %s; want ENCODER_ROLE_PRODUCER", p.GetRole())
	}
	if p.SupportsAbortCleanup == nil || !p.GetSupportsAbortCleanup() {
		t.Errorf("GetModelInfo(producer).encoder.supports_abort_cleanup = %v; want true", optBool(p.SupportsAbortCleanup))
	}
	c := h.encoderCaps("consumer", h.cons)
	if c.GetRole() != pb.EncoderRole_ENCODER_ROLE_CONSUMER {
		t.Errorf("GetModelInfo(consumer).encoder.role = %s; want ENCODER_ROLE_CONSUMER", c.GetRole())
	}
	if c.RequiresHandoff == nil || !c.GetRequiresHandoff() {
		t.Errorf("GetModelInfo(consumer).encoder.requires_handoff = %v; want true", optBool(c.RequiresHandoff))
	}
	if len(c.GetBackends()) == 0 {
		t.Errorf("GetModelInfo(consumer).encoder.backends = []; want the backends it accepts")
	}
	for _, b := range h.profile.Backends {
		if !slices.Contains(c.GetBackends(), b) {
			t.Logf("profile declares backend %q, GetModelInfo(consumer).encoder.backends = %v", b, c.GetBackends())
		}
	}
	ref := h.publish(fixture(t, "video-001.png")).GetRef()
	if !slices.Contains(c.GetBackends(), ref.GetBackend()) {
		t.Errorf("Publish = reference with backend %q; want one the consumer advertises %v", ref.GetBackend(), c.GetBackends())
	}
}

func optBool(b *bool) string {
	if b == nil {
		return "<unset>"
	}
	return fmt.Sprint(*b)
}

// N1UnacceptedBackendRejected re-labels a valid reference with a backend the consumer does not list: FAILED_PRECONDITION before any token (after SU-4, before SU-2), and the original still consumes (N-1).
func N1UnacceptedBackendRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	accepted := h.encoderCaps("consumer", h.cons).GetBackends()
	unlisted := unlistedBackend(accepted)
	ref := h.publish(fixture(t, "video-001.png")).GetRef()
	relabelled := proto.Clone(ref).(*pb.EncoderCacheRef)
	relabelled.Backend = unlisted
	note := fmt.Sprintf("backend %q, consumer accepts %v", unlisted, accepted)

	h.consumeRejected(prompt, relabelled, note, codes.FailedPrecondition)
	// Precedence SU-4 before N-1: N-1's own failure here is deciding first
	// (FAILED_PRECONDITION) or consuming; another rejection code is SU-4's
	// to judge (its cases present malformed references).
	garbage := withOpaque(relabelled, pseudoBytes("N-1 garbage", 64))
	garbageNote := "backend unlisted and opaque_state garbage: SU-4 decides before N-1"
	switch res := h.consume(prompt, garbage); {
	case res.Code() == codes.OK || len(res.TokenIDs()) > 0 || res.EncoderReady() != nil || hasPrefillReady(res):
		t.Errorf("%s = %s; want INVALID_ARGUMENT before any token", consumeCall(garbage, garbageNote), describe(res))
	case res.Code() == codes.FailedPrecondition:
		t.Errorf("%s = %s; want INVALID_ARGUMENT: N-1 decided before SU-4 (CONTRACT precedence)", consumeCall(garbage, garbageNote), describe(res))
	case res.Code() != codes.InvalidArgument:
		t.Logf("%s = %s: rejected, with a code that is SU-4's to judge", consumeCall(garbage, garbageNote), describe(res))
	}
	h.consumeOK(prompt, ref, "the original after its re-labelled copies")
	h.consumeRejected(prompt, relabelled, "spent and backend unlisted: N-1 decides before SU-2", codes.FailedPrecondition)
}

// unlistedBackend returns a backend name not in accepted.
func unlistedBackend(accepted []string) string {
	unlisted := "baton-conformance-unlisted"
	for slices.Contains(accepted, unlisted) {
		unlisted += "-x"
	}
	return unlisted
}

// N2TextOnlyBypassesEncoder sends text-only requests to the consumer and the baseline: tokens and no encoder event (expectTokens rejects an EncoderReady) (N-2; Core: the wire only, no counter).
func N2TextOnlyBypassesEncoder(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	for _, name := range []string{promptTextOnly, "text-count", "text-unicode"} {
		text := promptText(t, name)
		expectTokens(t, fmt.Sprintf("Text(prompt=%q) on the consumer", text), h.consumerAnswer(h.ctx, h.baselineRequest(text)))
		if h.base != nil {
			expectTokens(t, fmt.Sprintf("Text(prompt=%q) on the baseline", text), h.generate(h.base, h.baselineRequest(text)))
		}
	}
}
