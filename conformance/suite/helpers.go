package suite

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Settings every case uses.
const (
	// maxTokens bounds every generation (greedy defaults otherwise) to keep cases fast.
	maxTokens = 16
	// cleanupTimeout bounds the deferred releases of one case; they run on a
	// context detached from the case's, so they also run after a timeout.
	cleanupTimeout = 10 * time.Second
	// ttlMarginMs is how long (ms of the harness's monotonic clock) a case
	// waits past a reference's TTL before presenting it as expired. The
	// engine's TTL starts before EncoderReady reaches the harness, so by
	// then the engine's own clock is past the TTL by at least this much.
	ttlMarginMs = 250
)

// Prompt names of fixtures.Prompts used by the cases.
const (
	promptMarker   = "dominant-colour" // "<image> What colour dominates?": one marker
	promptNoMarker = "describe"        // "Describe the image.": embeddings go before the prompt
	promptTwo      = "compare"         // "Compare <image> and <image>.": two images in order
	promptTextOnly = "text-hello"      // text-only
)

// Observable keys in LoadInfo.attributes (CONTRACT section 4); values are numbers.
const (
	ObservableExportsEntries     = "encoder.exports.entries"      // published entries held by a producer
	ObservableExportsBytes       = "encoder.exports.bytes"        // bytes of those entries (the L-5 quantity)
	ObservableReceivesInflight   = "encoder.receives.inflight"    // consumer receives in flight
	ObservableQuarantineBuffers  = "encoder.quarantine.buffers"   // quarantined buffers
	ObservableQuarantineBytes    = "encoder.quarantine.bytes"     // quarantined bytes
	ObservableCleanupPending     = "encoder.cleanup.pending"      // pending cleanup tasks
	ObservableStorageLiveBatches = "encoder.storage.live_batches" // packed batch storages alive (C-3)
)

// Observables lists the CONTRACT section 4 keys in the contract's order.
func Observables() []string {
	return []string{
		ObservableExportsEntries, ObservableExportsBytes, ObservableReceivesInflight,
		ObservableQuarantineBuffers, ObservableQuarantineBytes, ObservableCleanupPending,
		ObservableStorageLiveBatches,
	}
}

// harness is one case's view of the target: the engines of its roles (nil
// when the target has none), the context and TB of the case, and the
// references and KV sessions the case created, released by cleanup.
type harness struct {
	ctx     context.Context
	t       TB
	profile target.Profile
	model   string

	prod, cons, base, pre, dec target.Engine
	// viaPrefill: an E+P+D copy of a consumer case. cons is P, and every
	// answer of the consumer (consumerAnswer) is P's PrefillReady carried
	// on to D, whose tokens are the answer.
	viaPrefill bool

	refs     []*pb.EncoderCacheRef
	sessions []*pb.KvSessionRef
}

// newHarness collects the engines of tg. It checks nothing.
func newHarness(ctx context.Context, t TB, tg target.Target) *harness {
	h := &harness{ctx: ctx, t: t, profile: tg.Profile(), model: tg.Profile().Model}
	get := func(r target.Role) target.Engine {
		if e, ok := tg.Engine(r); ok {
			return e
		}
		return nil
	}
	h.prod, h.cons, h.base = get(target.RoleProducer), get(target.RoleConsumer), get(target.RoleBaseline)
	h.pre, h.dec = get(target.RolePrefill), get(target.RoleDecode)
	return h
}

// requireRoles ends the case as a harness error unless the target has an
// endpoint for every role: Case.Execute has checked the case's Needs, so a
// missing role means the case ran without it, or declares too little.
func (h *harness) requireRoles(roles ...target.Role) {
	h.t.Helper()
	byRole := map[target.Role]target.Engine{
		target.RoleProducer: h.prod, target.RoleConsumer: h.cons, target.RoleBaseline: h.base,
		target.RolePrefill: h.pre, target.RoleDecode: h.dec,
	}
	var missing []string
	for _, r := range roles {
		if byRole[r] == nil {
			missing = append(missing, string(r))
		}
	}
	if len(missing) > 0 {
		HarnessError(h.t, "the case needs endpoints for %s: run it through Case.Execute, which checks its Needs first", strings.Join(missing, ", "))
	}
}

// needEPD returns the harness of an E+PD case (Needs.Topology E+PD). In
// the E+P+D copy of a case (Case.ViaPrefill) it is an E+P+D harness whose
// P stands in for the consumer.
func needEPD(ctx context.Context, t TB, tg target.Target) *harness {
	t.Helper()
	if viaPrefill(ctx) {
		h := needEPPD(ctx, t, tg)
		h.cons, h.viaPrefill = h.pre, true
		return h
	}
	h := newHarness(ctx, t, tg)
	h.requireRoles(TopologyRoles(target.TopologyEPD)...)
	return h
}

// needProducer returns the harness of a case that checks E alone (Needs
// with no Topology): every topology has E, so it runs once on any target,
// whichever topologies its profile declares.
func needProducer(ctx context.Context, t TB, tg target.Target) *harness {
	t.Helper()
	h := newHarness(ctx, t, tg)
	h.requireRoles(target.RoleProducer)
	return h
}

// needEPPD returns the harness of an E+P+D case (Needs.Topology E+P+D).
func needEPPD(ctx context.Context, t TB, tg target.Target) *harness {
	t.Helper()
	h := newHarness(ctx, t, tg)
	h.requireRoles(TopologyRoles(target.TopologyEPPD)...)
	return h
}

// formatDeclared reports whether the profile declares the baton-json-v1 reference format.
func (h *harness) formatDeclared() bool { return h.profile.ReferenceFormat == FormatBatonJSONv1 }

// cleanup releases, on the producer, every reference the case published
// (Abort; ALREADY_FINISHED for consumed ones is expected) and, on the
// prefill engine, every KV session it made. It runs on a context detached
// from the case's (bounded by cleanupTimeout) and only logs: a cleanup
// answer is never the case's verdict.
func (h *harness) cleanup() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), cleanupTimeout)
	defer cancel()
	for _, ref := range h.refs {
		if h.prod == nil {
			break
		}
		resp, err := h.prod.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}})
		if err != nil {
			h.t.Logf("cleanup: Abort(encoder_cache=%s) = code %s", refLabel(ref), codeName(status.Code(err)))
			continue
		}
		if resp.GetStatus() != pb.AbortStatus_ABORT_STATUS_ABORTED && resp.GetStatus() != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
			h.t.Logf("cleanup: Abort(encoder_cache=%s) = %s", refLabel(ref), resp.GetStatus())
		}
	}
	for _, s := range h.sessions {
		if h.pre == nil {
			break
		}
		if _, err := h.pre.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_KvSession{KvSession: s}}); err != nil {
			h.t.Logf("cleanup: Abort(kv_session=%s) = code %s", s.GetSessionId(), codeName(status.Code(err)))
		}
	}
	h.refs, h.sessions = nil, nil
}

// track records ref for cleanup.
func (h *harness) track(ref *pb.EncoderCacheRef) {
	if ref != nil {
		h.refs = append(h.refs, ref)
	}
}

// --- requests ---------------------------------------------------------------

// stopping bounds a generation to maxTokens tokens.
func stopping() *pb.StoppingOptions { return &pb.StoppingOptions{MaxTokens: proto.Uint32(maxTokens)} }

// newRequestID returns "baton-<kind>-<16 hex>" (64 random bits): unique per request.
func newRequestID(kind string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "baton-" + kind + "-" + hex.EncodeToString(b[:])
}

// newUUID returns a random (version 4) UUID in lowercase text form.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// mimeOf returns the MIME type of a fixture format ("png" -> "image/png").
func mimeOf(format string) string {
	if format == "" {
		return "application/octet-stream"
	}
	return "image/" + format
}

// imageItem is a MODALITY_IMAGE item carrying img's bytes.
func imageItem(img fixtures.Image) *pb.MediaItem {
	return &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: img.Data}, MimeType: mimeOf(img.Format)}
}

// imageItems returns one imageItem per image, in order.
func imageItems(imgs ...fixtures.Image) []*pb.MediaItem {
	items := make([]*pb.MediaItem, len(imgs))
	for i, im := range imgs {
		items[i] = imageItem(im)
	}
	return items
}

// publishRequest asks the producer to publish items; ttlMs nil leaves the
// producer's default TTL.
func (h *harness) publishRequest(ttlMs *uint32, items ...*pb.MediaItem) *pb.GenerateRequest {
	return &pb.GenerateRequest{
		RequestId: newRequestID("publish"),
		Model:     h.model,
		Media:     items,
		Encoder:   &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{TtlMs: ttlMs}}},
	}
}

// consumeRequest asks a consumer to generate from prompt with the embeddings of ref (no media).
func (h *harness) consumeRequest(prompt string, ref *pb.EncoderCacheRef) *pb.GenerateRequest {
	return &pb.GenerateRequest{
		RequestId: newRequestID("consume"),
		Model:     h.model,
		Input:     &pb.GenerateRequest_Prompt{Prompt: prompt},
		Stopping:  stopping(),
		Encoder:   &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}},
	}
}

// baselineRequest is a prompt with media and no encoder options (the
// aggregated baseline's request); with no items it is a text-only request.
func (h *harness) baselineRequest(prompt string, items ...*pb.MediaItem) *pb.GenerateRequest {
	kind := "text"
	if len(items) > 0 {
		kind = "media"
	}
	return &pb.GenerateRequest{
		RequestId: newRequestID(kind),
		Model:     h.model,
		Input:     &pb.GenerateRequest_Prompt{Prompt: prompt},
		Stopping:  stopping(),
		Media:     items,
	}
}

// --- calls --------------------------------------------------------------------

// generate runs req on e. A transport failure of the harness (the Engine's
// error) ends the case as a harness error; the engine's own answer, however
// bad, is returned.
func (h *harness) generate(e target.Engine, req *pb.GenerateRequest) *target.GenerateResult {
	h.t.Helper()
	return h.generateCtx(h.ctx, e, req)
}

// generateCtx is generate on ctx.
func (h *harness) generateCtx(ctx context.Context, e target.Engine, req *pb.GenerateRequest) *target.GenerateResult {
	h.t.Helper()
	res, err := e.Generate(ctx, req)
	if err != nil {
		HarnessError(h.t, "Generate(request_id=%s): %v", req.GetRequestId(), err)
	}
	if res == nil || res.Status == nil {
		HarnessError(h.t, "Generate(request_id=%s) returned no status", req.GetRequestId())
	}
	if res.Overflow {
		// The target's wrong answer, whatever the case expected (a
		// rejection it checks by a non-OK code would pass otherwise).
		h.t.Errorf("Generate(request_id=%s): %s", req.GetRequestId(), res.Status.Message())
	}
	// Whatever the case expected, a reference that came back is released
	// at cleanup, so a wrongly accepted publish cannot leak into other cases.
	if ready := res.EncoderReady(); ready != nil {
		h.track(ready.GetRef())
	}
	if pr := prefillReady(res); pr != nil && pr.GetKvSession() != nil {
		h.sessions = append(h.sessions, pr.GetKvSession())
	}
	return res
}

// generateWithin is generate bounded by timeout (or the case's own deadline if sooner).
func (h *harness) generateWithin(e target.Engine, req *pb.GenerateRequest, timeout time.Duration) *target.GenerateResult {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, timeout)
	defer cancel()
	return h.generateCtx(ctx, e, req)
}

// publish publishes imgs (one item each, in order) on the producer with the
// default TTL and returns the EncoderReady; see publishItems.
func (h *harness) publish(imgs ...fixtures.Image) *pb.EncoderReady {
	h.t.Helper()
	names := make([]string, len(imgs))
	for i, im := range imgs {
		names[i] = im.Name
	}
	return h.publishItems(nil, "image="+strings.Join(names, ","), imageItems(imgs...)...)
}

// publishItems publishes items on the producer and returns its EncoderReady,
// recording the reference for cleanup. It ends the case (Fatalf) unless the
// producer answers as CONTRACT "How requests look" requires: status OK,
// exactly one EncoderReady with a reference, no token. It reports (Errorf)
// an item count other than len(items), a content hash that is not 64
// lowercase hex, or a non-zero Usage.
func (h *harness) publishItems(ttlMs *uint32, what string, items ...*pb.MediaItem) *pb.EncoderReady {
	h.t.Helper()
	res := h.generate(h.prod, h.publishRequest(ttlMs, items...))
	ready := res.EncoderReady()
	call := fmt.Sprintf("Publish(%s)", what)
	if res.Code() != codes.OK || ready == nil || ready.GetRef() == nil || len(ready.GetRef().GetOpaqueState()) == 0 {
		h.t.Fatalf("%s = %s; want OK with one EncoderReady carrying a reference", call, describe(res))
	}
	if n := len(res.TokenIDs()); n > 0 {
		h.t.Errorf("%s = %s; want no token (E never generates text)", call, describe(res))
	}
	if got, want := len(ready.GetItems()), len(items); got != want {
		h.t.Errorf("%s = EncoderReady with %d items; want %d (one EncodedItem per item, in order)", call, got, want)
	}
	for i, it := range ready.GetItems() {
		if !contentHashPattern.MatchString(it.GetContentHash()) {
			h.t.Errorf("%s = item %d content_hash %q; want 64 lowercase hex digits", call, i, it.GetContentHash())
		}
	}
	if u := res.Usage(); u != nil && (u.GetPromptTokens() != 0 || u.GetCompletionTokens() != 0 || u.GetTotalTokens() != 0) {
		h.t.Errorf("%s = usage %s; want a zero Usage (the encoder's own usage is not counted)", call, usageString(u))
	}
	return ready
}

// contentHashPattern is the form of a content hash (WIRE.md EncodedItem).
var contentHashPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// consume runs prompt with ref on the consumer and returns the raw result.
func (h *harness) consume(prompt string, ref *pb.EncoderCacheRef) *target.GenerateResult {
	h.t.Helper()
	return h.consumerAnswer(h.ctx, h.consumeRequest(prompt, ref))
}

// consumerAnswer runs req (a consume or a text-only request) on the
// consumer. In an E+P+D copy the consumer is P: a PrefillReady is carried
// on to D with the prompt of req, and D's result is the answer; P's
// rejection is the answer as it is.
func (h *harness) consumerAnswer(ctx context.Context, req *pb.GenerateRequest) *target.GenerateResult {
	h.t.Helper()
	return h.onDecode(ctx, h.generateCtx(ctx, h.cons, req), req.GetPrompt())
}

// onDecode carries P's answer res on to D with prompt, in an E+P+D copy
// of a case; otherwise (or when P did not end with a KV session) it
// returns res as it is. Call it from the case's goroutine.
func (h *harness) onDecode(ctx context.Context, res *target.GenerateResult, prompt string) *target.GenerateResult {
	h.t.Helper()
	pr := prefillReady(res)
	if !h.viaPrefill || res.Code() != codes.OK || pr == nil || pr.GetKvSession() == nil {
		return res
	}
	h.sessions = append(h.sessions, pr.GetKvSession())
	return h.generateCtx(ctx, h.dec, h.decodeRequest(prompt, pr.GetKvSession(), pr.GetDecodePreparation()))
}

// consumeOK consumes ref on the consumer and reports (Errorf) unless the
// answer has tokens; it returns the result and whether it had tokens.
func (h *harness) consumeOK(prompt string, ref *pb.EncoderCacheRef, note string) (*target.GenerateResult, bool) {
	h.t.Helper()
	res := h.consume(prompt, ref)
	return res, expectTokens(h.t, consumeCall(ref, note), res)
}

// consumeMust consumes ref on the consumer and ends the case (Fatalf)
// unless the answer has tokens: for a consume the rest of the case builds on.
func (h *harness) consumeMust(prompt string, ref *pb.EncoderCacheRef, note string) *target.GenerateResult {
	h.t.Helper()
	res := h.consume(prompt, ref)
	if res.Code() != codes.OK || len(res.TokenIDs()) == 0 || res.Finished() == nil || res.EngineError() != nil {
		h.t.Fatalf("%s = %s; want OK with tokens and GenerationFinished", consumeCall(ref, note), describe(res))
	}
	return res
}

// consumeRejected presents ref to the consumer and reports (Errorf) unless
// it is rejected with want and no token.
func (h *harness) consumeRejected(prompt string, ref *pb.EncoderCacheRef, note string, want codes.Code) bool {
	h.t.Helper()
	return expectRejected(h.t, consumeCall(ref, note), h.consume(prompt, ref), want)
}

// handoff publishes img, consumes it with prompt on the consumer and
// reports (Errorf) unless the consumer answers with tokens ("the next valid
// handoff succeeds").
func (h *harness) handoff(img fixtures.Image, prompt string) (*target.GenerateResult, bool) {
	h.t.Helper()
	ready := h.publish(img)
	return h.consumeOK(prompt, ready.GetRef(), "fresh reference of "+img.Name)
}

// abort sends Abort(encoder_cache=ref) to e.
func (h *harness) abort(e target.Engine, ref *pb.EncoderCacheRef) (pb.AbortStatus, error) {
	resp, err := e.Abort(h.ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}})
	return resp.GetStatus(), err
}

// expectAbortStatus sends Abort(encoder_cache=ref) to the producer and
// reports (Errorf) unless it answers OK with want.
func (h *harness) expectAbortStatus(ref *pb.EncoderCacheRef, note string, want pb.AbortStatus) bool {
	h.t.Helper()
	got, err := h.abort(h.prod, ref)
	call := abortCall(ref, note)
	if err != nil {
		h.t.Errorf("%s = %s; want %s", call, statusString(err), abortName(want))
		return false
	}
	if got != want {
		h.t.Errorf("%s = %s; want %s", call, abortName(got), abortName(want))
		return false
	}
	return true
}

// expectRefused presents ref to the consumer and to the producer's Abort
// and reports (Errorf) unless each is rejected with want (no token;
// nothing released).
func (h *harness) expectRefused(prompt string, ref *pb.EncoderCacheRef, note string, want codes.Code) {
	h.t.Helper()
	h.consumeRejected(prompt, ref, note, want)
	h.expectAbortCode(h.prod, ref, note, want)
}

// codeIsSU4s reports whether the rejection code of a reference with opaque
// state opaque belongs to SU-4 rather than to the rule of the case
// presenting it: the profile declares baton-json-v1 and opaque does not
// match its grammar, so SU-4 decides the code (CONTRACT precedence SU-4
// before H-3, N-1, SE-3, SU-5), and SU-4's own cases judge it. Without a
// declared format the harness cannot tell; the consequence SU-5/SU-4 is
// documented (Consequences).
func (h *harness) codeIsSU4s(opaque []byte) bool {
	if !h.formatDeclared() {
		return false
	}
	_, err := decodeRef(opaque)
	return err != nil
}

// expectRefusedUnlessSU4 is expectRefused for the case of a rule other than
// SU-4: when the code of ref is SU-4's (codeIsSU4s), only what the case's
// own rule asks is asserted (a rejection before any token on the consumer,
// an error from the producer's Abort: nothing consumed, nothing released),
// and a code other than want is logged for SU-4's cases to judge.
func (h *harness) expectRefusedUnlessSU4(prompt string, ref *pb.EncoderCacheRef, note string, want codes.Code) {
	h.t.Helper()
	if !h.codeIsSU4s(ref.GetOpaqueState()) {
		h.expectRefused(prompt, ref, note, want)
		return
	}
	res := h.consume(prompt, ref)
	if res.Code() == codes.OK || len(res.TokenIDs()) > 0 || res.EncoderReady() != nil || hasPrefillReady(res) {
		h.t.Errorf("%s = %s; want a rejection before any token", consumeCall(ref, note), describe(res))
	} else if res.Code() != want {
		h.t.Logf("%s = %s: rejected, with a code that is SU-4's to judge (the opaque_state is not %s)", consumeCall(ref, note), describe(res), FormatBatonJSONv1)
	}
	st, err := h.abort(h.prod, ref)
	if err == nil {
		h.t.Errorf("%s = %s; want a rejection (nothing released)", abortCall(ref, note), abortName(st))
	} else if status.Code(err) != want {
		h.t.Logf("%s = %s: rejected, with a code that is SU-4's to judge", abortCall(ref, note), statusString(err))
	}
}

// inFlight runs job(0), ..., job(n-1), at most limit at once, and returns
// once all ended. Jobs run in goroutines of their own: they must not call
// the case's TB (collect their results and check them after).
func inFlight(n, limit int, job func(i int)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			job(i)
		}()
	}
	wg.Wait()
}

// expectReleased sends Abort(encoder_cache=ref) to the producer and
// reports (Errorf) unless it answers ABORTED or ALREADY_FINISHED: ref was
// delivered to a client that cancelled its stream, which E may have
// released on its own (C-7) or kept.
func (h *harness) expectReleased(ref *pb.EncoderCacheRef, note string) bool {
	h.t.Helper()
	got, err := h.abort(h.prod, ref)
	if err == nil && (got == pb.AbortStatus_ABORT_STATUS_ABORTED || got == pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED) {
		return true
	}
	h.t.Errorf("%s = %s; want ABORTED or ALREADY_FINISHED", abortCall(ref, note), abortAnswer(got, err))
	return false
}

// expectAbortCode sends Abort(encoder_cache=ref) to e and reports (Errorf)
// unless it fails with gRPC code want.
func (h *harness) expectAbortCode(e target.Engine, ref *pb.EncoderCacheRef, note string, want codes.Code) bool {
	h.t.Helper()
	got, err := h.abort(e, ref)
	call := abortCall(ref, note)
	if err == nil {
		h.t.Errorf("%s = %s; want code %s (nothing released)", call, abortName(got), codeName(want))
		return false
	}
	if c := status.Code(err); c != want {
		h.t.Errorf("%s = %s; want code %s", call, statusString(err), codeName(want))
		return false
	}
	return true
}

// expectReady reports (Errorf) unless e's Health says READY.
func (h *harness) expectReady(who string, e target.Engine) bool {
	h.t.Helper()
	resp, err := e.Health(h.ctx)
	if err != nil {
		h.t.Errorf("Health(%s) = %s; want READY", who, statusString(err))
		return false
	}
	if resp.GetState() != pb.HealthState_HEALTH_STATE_READY {
		h.t.Errorf("Health(%s) = %s%s; want READY", who, resp.GetState(), healthChecks(resp))
		return false
	}
	return true
}

// waitMs waits ms milliseconds of the harness's monotonic clock, or ends
// the case if its context ends first.
func (h *harness) waitMs(ms int64, why string) {
	h.t.Helper()
	timer := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-h.ctx.Done():
		h.t.Fatalf("case context ended while waiting %d ms (%s): %v", ms, why, h.ctx.Err())
	}
}

// --- observables ---------------------------------------------------------------

// counters are the CONTRACT section 4 observables of one engine, by key.
type counters map[string]float64

// ErrObservablesMissing is wrapped by the error of CheckObservables: a
// LoadInfo lacks a CONTRACT section 4 key, or holds one that is not a
// number.
var ErrObservablesMissing = errors.New("suite: LoadInfo.attributes lacks the CONTRACT section 4 observables")

// CheckObservables checks that info.attributes holds every CONTRACT
// section 4 key of Observables() as a number (the executor.* keys an engine
// without an in-engine executor may omit are not among them). It returns
// nil, or an error wrapping ErrObservablesMissing naming each missing key
// and each key that is not a number. A runner that checks a target
// declaring observables before any case runs calls it on every endpoint's
// GetLoad; the Lifecycle cases read their counters through the same check.
func CheckObservables(info *pb.LoadInfo) error {
	_, err := countersOf(info)
	return err
}

// counters returns e's observables (CONTRACT section 4), for a case whose
// Needs declare Observables (Case.Execute has checked the profile). A
// target that declared them but whose GetLoad is UNIMPLEMENTED or lacks a
// key ends the case `not verifiable` (its profile contradicts its
// answers); any other GetLoad failure ends it as a failure (the engine
// stopped answering during the case).
func (h *harness) counters(who string, e target.Engine) counters {
	h.t.Helper()
	if !h.profile.Observables {
		HarnessError(h.t, "the case reads counters but its Needs do not declare Observables")
	}
	info, err := e.GetLoad(h.ctx)
	if status.Code(err) == codes.Unimplemented {
		NotVerifiable(h.t, fmt.Sprintf("GetLoad(%s) = %s although the profile declares observables", who, statusString(err)))
	}
	if err != nil {
		h.t.Fatalf("GetLoad(%s) = %s; want the CONTRACT section 4 observables", who, statusString(err))
	}
	c, err := countersOf(info)
	if err != nil {
		NotVerifiable(h.t, fmt.Sprintf("GetLoad(%s): %v although the profile declares observables", who, err))
	}
	return c
}

// ObservableQuarantineEntered is an optional observable beyond CONTRACT
// section 4 (the reference engine offers it): the quarantines an engine has
// entered since it started, so that one which Q-6 ended before anyone
// looked (nothing was written, the consumer closed the connections that
// carried the request) still shows.
const ObservableQuarantineEntered = "encoder.quarantine.entered"

// quarantinesEntered reads ObservableQuarantineEntered from e; false when
// the profile declares no observables, GetLoad fails or e does not offer
// it (a check that uses it then does not apply).
func (h *harness) quarantinesEntered(e target.Engine) (float64, bool) {
	h.t.Helper()
	if !h.profile.Observables {
		return 0, false
	}
	info, err := e.GetLoad(h.ctx)
	if err != nil {
		return 0, false
	}
	v, ok := info.GetAttributes().GetFields()[ObservableQuarantineEntered]
	if !ok {
		return 0, false
	}
	n, isNum := v.GetKind().(*structpb.Value_NumberValue)
	return n.NumberValue, isNum
}

// optionalCounters is counters when the profile declares observables, and
// (nil, false) when it does not: for a Lifecycle case whose check does not
// depend on them (Core cases never read a counter: CONTRACT section 4).
func (h *harness) optionalCounters(who string, e target.Engine) (counters, bool) {
	h.t.Helper()
	if !h.profile.Observables {
		return nil, false
	}
	return h.counters(who, e), true
}

// countersOf reads the CONTRACT section 4 keys from info.attributes; every
// key must be present and a number (errors wrap ErrObservablesMissing).
func countersOf(info *pb.LoadInfo) (counters, error) {
	fields := info.GetAttributes().GetFields()
	c := counters{}
	var missing, notNumbers []string
	for _, k := range Observables() {
		v, ok := fields[k]
		if !ok {
			missing = append(missing, k)
			continue
		}
		n, isNum := v.GetKind().(*structpb.Value_NumberValue)
		if !isNum {
			notNumbers = append(notNumbers, fmt.Sprintf("%s is %v", k, v.AsInterface()))
			continue
		}
		c[k] = n.NumberValue
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, "no "+strings.Join(missing, ", "))
	}
	if len(notNumbers) > 0 {
		problems = append(problems, strings.Join(notNumbers, ", ")+" (want numbers)")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrObservablesMissing, strings.Join(problems, "; "))
	}
	return c, nil
}

// diff lists the keys whose values differ between c and other, as
// "key a->b", in the order of Observables().
func (c counters) diff(other counters, keys ...string) []string {
	if len(keys) == 0 {
		keys = Observables()
	}
	var out []string
	for _, k := range keys {
		if c[k] != other[k] {
			out = append(out, fmt.Sprintf("%s %g->%g", k, c[k], other[k]))
		}
	}
	return out
}

// --- fixtures ---------------------------------------------------------------------

// fixture returns the fixture image called name, or ends the case as a harness error.
func fixture(t TB, name string) fixtures.Image {
	t.Helper()
	im, err := fixtures.ImageByName(name)
	if err != nil {
		HarnessError(t, "fixture: %v", err)
	}
	return im
}

// isOptionalFormat reports whether a fixture format is an optional image
// format (gif, webp: CONTRACT "How requests look").
func isOptionalFormat(format string) bool {
	return slices.Contains(target.OptionalMediaFormats(), format)
}

// declaredImages returns the fixtures called names whose format the
// profile declares, in order: a case never depends on an optional format
// the target does not declare (CONTRACT "How requests look").
func (h *harness) declaredImages(names ...string) []fixtures.Image {
	h.t.Helper()
	var out []fixtures.Image
	for _, name := range names {
		if img := fixture(h.t, name); h.profile.DeclaresMediaFormat(img.Format) {
			out = append(out, img)
		}
	}
	return out
}

// promptText returns the text of the fixture prompt called name, or ends
// the case as a harness error.
func promptText(t TB, name string) string {
	t.Helper()
	for _, p := range fixtures.Prompts() {
		if p.Name == name {
			return p.Text
		}
	}
	HarnessError(t, "fixture: no prompt %q", name)
	return ""
}

// pseudoBytes returns n deterministic bytes derived from label (ChaCha8
// keyed by the SHA-256 of label), so a garbage input is the same on every run.
func pseudoBytes(label string, n int) []byte {
	out := make([]byte, n)
	r := mrand.NewChaCha8(sha256.Sum256([]byte(label)))
	_, _ = r.Read(out) // ChaCha8.Read never fails
	return out
}

// withOpaque returns a copy of ref with opaque_state replaced.
func withOpaque(ref *pb.EncoderCacheRef, opaque []byte) *pb.EncoderCacheRef {
	c := proto.Clone(ref).(*pb.EncoderCacheRef)
	c.OpaqueState = opaque
	return c
}

// --- E+P+D ---------------------------------------------------------------------------

// multimodalAttribute is the KV-session attribute a multimodal prefill sets
// (WIRE.md conventions; CONTRACT L-2).
const multimodalAttribute = "baton.multimodal"

// prefill runs prompt with ref on the prefill engine and returns the KV
// session and decode preparation of its PrefillReady; it ends the case
// (Fatalf) unless the stream closes OK with a PrefillReady carrying a KV
// session. The session is released (Abort) at cleanup.
func (h *harness) prefill(prompt string, ref *pb.EncoderCacheRef) (*pb.KvSessionRef, []byte) {
	h.t.Helper()
	res := h.generate(h.pre, h.consumeRequest(prompt, ref))
	pr := prefillReady(res)
	if res.Code() != codes.OK || pr == nil || pr.GetKvSession() == nil {
		h.t.Fatalf("Prefill(ref=%s) = %s; want OK ending with PrefillReady carrying a KV session", refLabel(ref), describe(res))
	}
	return pr.GetKvSession(), pr.GetDecodePreparation()
}

// decodeRequest is a request to D: the prompt, P's KV session and the
// decode preparation (nil for none). It never carries media or a reference.
func (h *harness) decodeRequest(prompt string, session *pb.KvSessionRef, prep []byte) *pb.GenerateRequest {
	return &pb.GenerateRequest{
		RequestId:         newRequestID("decode"),
		Model:             h.model,
		Input:             &pb.GenerateRequest_Prompt{Prompt: prompt},
		Stopping:          stopping(),
		Kv:                &pb.KvOptions{Session: session},
		DecodePreparation: prep,
	}
}
