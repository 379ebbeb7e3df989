package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/xfer"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
)

// errKVTransferFailed: D could not fetch or release a KV session for a
// reason other than the session being gone (P unreachable, the READ failed,
// the release's outcome unknown). gRPC UNAVAILABLE (retryable on a fresh
// prefill; upstream's ERROR_CODE_KV_TRANSFER_FAILED).
var errKVTransferFailed = errors.New("server: KV transfer failed")

// errKVSessionNotFound: the KV session was already decoded (by this or
// another decode engine), released or expired. INVALID_ARGUMENT, before any
// token (upstream's ERROR_CODE_KV_SESSION_NOT_FOUND).
var errKVSessionNotFound = fmt.Errorf("%w: KV session not found (already decoded, released or expired)", handoff.ErrBadRequest)

// runDecode is D's Generate (CONTRACT section 1, role D; L-1, L-2, N-2).
// checkRole has already required kv.session and refused media and encoder
// options (L-4). Everything below up to the fetch is checked before any
// execution, in the contract's order: L-1 (decode preparation over 2 MiB),
// a malformed kv.session, L-2 (a multimodal session without a decode
// preparation; a malformed one, with H-3 for a malformed content hash; one
// of another session or model; one that does not match the prompt), N-1
// (transfer_backend), then a replayed session. Then D READs the session
// from P's registered memory through its transfer agent, releases it on P
// (Abort(kv_session): only the decode engine that gets ABORTED decodes),
// and decodes: tokens, then GenerationFinished with Usage {prompt_tokens of
// the session, completion_tokens, total}. D never touches an encoder or an
// encoder cache (N-2).
func (e *Engine) runDecode(ctx context.Context, requestID string, req *pb.GenerateRequest, send func(*pb.GenerateResponse) error) error {
	raw := req.GetDecodePreparation()
	if len(raw) > handoff.MaxDecodePreparationBytes {
		return fmt.Errorf("%w: L-1 decode preparation of %d bytes (at most %d)", handoff.ErrTooLarge, len(raw), handoff.MaxDecodePreparationBytes)
	}
	lreq, err := lmRequest(req)
	if err != nil {
		return err
	}
	ref, err := parseKVSessionRef(req.GetKv().GetSession())
	if err != nil {
		return err
	}
	var prep *DecodePreparation
	switch {
	case len(raw) > 0:
		p, err := ParseDecodePreparation(raw)
		if err != nil {
			return err
		}
		if err := e.checkPreparation(p, ref, lreq); err != nil {
			return err
		}
		prep = &p
	case ref.Multimodal:
		return fmt.Errorf("%w: L-2 kv.session %s comes from a multimodal prefill (%s = true) and the request carries no decode_preparation", handoff.ErrBadRequest, ref.ID, AttrMultimodal)
	default:
		if err := e.checkStopping(lreq); err != nil {
			return err
		}
	}
	addr, err := e.trustedPrefill(ref)
	if err != nil {
		return err // SE-3: before any connection
	}
	if err := e.admitHandoff(); err != nil {
		return err
	}
	pc, err := e.producers.get(addr)
	if err != nil {
		return fmt.Errorf("%w: dial P at %s: %v", errKVTransferFailed, addr, err)
	}
	defer e.producers.put(pc)
	if !e.kv.Attach(ref.ID, e.cfg.MaxTTL) {
		return fmt.Errorf("%w: this decode engine already attached to kv.session %s", errKVSessionNotFound, ref.ID)
	}
	// ---- from here the session is spent for this decode engine ----
	b, readErr := e.kvDriver().Read(ctx, ref.ID, ref.AgentMD, ref.Region, e.cfg.TransferTimeout, "kv/"+ref.ID+"/"+mustRandomHex(4)) // engine/kvsession: D's READ (Q-1 on a READ in flight)
	st, relErr := e.releaseOnPrefill(ctx, pc.client(), ref)
	switch {
	case relErr == nil && st == pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED:
		// Not this D's session (another decode took it, it was released
		// or expired, or it never existed: a forged session): P answers
		// so for it from now on, so D need not remember it (A7).
		e.kv.Forget(ref.ID)
		return fmt.Errorf("%w: P answered ALREADY_FINISHED for kv.session %s", errKVSessionNotFound, ref.ID)
	case readErr != nil:
		return fmt.Errorf("%w: READ of kv.session %s: %v", errKVTransferFailed, ref.ID, readErr)
	case relErr != nil:
		return fmt.Errorf("%w: release of kv.session %s on P: outcome unknown: %v", errKVTransferFailed, ref.ID, relErr)
	}
	if prep != nil && SessionDigest(b) != prep.SessionSHA256 {
		return fmt.Errorf("%w: L-2 the fetched kv.session %s does not match session_sha256 of its decode preparation", handoff.ErrBadRequest, ref.ID)
	}
	session, err := lm.UnmarshalSession(b)
	if err != nil {
		return fmt.Errorf("server: kv.session %s: %w", ref.ID, err)
	}
	if got := session.ImageCount() > 0; got != ref.Multimodal {
		return fmt.Errorf("%w: kv.session %s says %s = %t, its session holds %d images", handoff.ErrBadRequest, ref.ID, AttrMultimodal, ref.Multimodal, session.ImageCount())
	}
	if prep != nil && (session.PromptTokens() != prep.PromptTokens || session.ImageCount() != len(prep.Items)) {
		return fmt.Errorf("%w: L-2 decode preparation (%d prompt tokens, %d items) does not match kv.session %s (%d, %d)",
			handoff.ErrBadRequest, prep.PromptTokens, len(prep.Items), ref.ID, session.PromptTokens(), session.ImageCount())
	}
	e.log.InfoContext(ctx, "KV session attached", "session", ref.ID, "prompt_tokens", session.PromptTokens(), "images", session.ImageCount())
	return e.streamDecode(ctx, requestID, session, lreq, send)
}

// trustedPrefill applies SE-3 to a KV session: D dials P's control
// endpoint and READs from P's transfer agent only when both are among its
// trusted producers (Config.TrustedProducers); otherwise
// FAILED_PRECONDITION before any connection. Agent metadata that is
// malformed, its address not in its canonical form included (a port with
// leading zeros, xfer.CanonicalAddress), is a malformed kv.session
// (INVALID_ARGUMENT). It returns the control address to dial.
func (e *Engine) trustedPrefill(ref kvSessionRef) (string, error) {
	addr, err := e.trustedProducers.endpoint("kv.session endpoint (P's control address)", ref.Endpoint.GetHost(), ref.Endpoint.GetPort())
	if err != nil {
		return "", err
	}
	md, err := xfer.ParseMetadata(ref.AgentMD)
	if err != nil || md.Backend != xfer.BackendTCP {
		return "", fmt.Errorf("%w: malformed kv.session: attribute %s is not tcp transfer-agent metadata", handoff.ErrBadRequest, AttrKVAgent)
	}
	if _, err := e.trustedProducers.address("kv.session transfer agent (P's)", md.Address); err != nil {
		return "", err
	}
	return addr, nil
}

// checkPreparation checks a well-formed decode preparation against the
// session it claims and the request, before anything is fetched (L-2).
func (e *Engine) checkPreparation(p DecodePreparation, ref kvSessionRef, r lm.Request) error {
	if p.SessionID != ref.ID {
		return fmt.Errorf("%w: L-2 decode preparation of kv.session %s sent with kv.session %s", handoff.ErrBadRequest, p.SessionID, ref.ID)
	}
	if want := ModelName(e.preset.Name); p.Model != want {
		return fmt.Errorf("%w: L-2 decode preparation for model %.60q (serving %s)", handoff.ErrBadRequest, p.Model, want)
	}
	if ref.Multimodal != (len(p.Items) > 0) {
		return fmt.Errorf("%w: L-2 decode preparation with %d items for a kv.session with %s = %t", handoff.ErrBadRequest, len(p.Items), AttrMultimodal, ref.Multimodal)
	}
	if r.Prompt == "" && len(r.TokenIDs) == 0 {
		return e.checkStopping(r) // D may decode from the KV session alone
	}
	rows := make([]int, len(p.Items))
	for i, it := range p.Items {
		rows[i] = int(it.Rows)
	}
	if err := e.validatePrompt(r, rows); err != nil {
		return err
	}
	if n := promptPositions(r, rows); n != uint64(p.PromptTokens) {
		return fmt.Errorf("%w: L-2 the request's prompt has %d prompt positions, its decode preparation %d", handoff.ErrBadRequest, n, p.PromptTokens)
	}
	return nil
}

// checkStopping validates the stopping options of a request without a
// prompt to check, as Decode would, before anything is fetched.
func (e *Engine) checkStopping(r lm.Request) error {
	v := r
	v.Prompt, v.TokenIDs, v.Images = "", lm.Tokenize("."), nil
	return e.validatePrompt(v, nil)
}

// promptPositions counts a prompt's positions as lm's Prefill does: text
// tokens (image markers excluded) plus every image's rows. r must have
// passed validatePrompt with these rows.
func promptPositions(r lm.Request, rows []int) uint64 {
	ids := r.TokenIDs
	if len(ids) == 0 {
		ids = lm.Tokenize(r.Prompt)
	}
	var n uint64
	for _, id := range ids {
		if id != lm.ImageID {
			n++
		}
	}
	for _, rr := range rows {
		n += uint64(rr)
	}
	return n
}

// releaseOnPrefill sends Abort(kv_session) to P, without holding a lock
// and on its own deadline.
func (e *Engine) releaseOnPrefill(ctx context.Context, client pb.ControlClient, ref kvSessionRef) (pb.AbortStatus, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.TransferTimeout)
	defer cancel()
	resp, err := client.Abort(OutgoingTraceContext(cctx), &pb.AbortRequest{Target: &pb.AbortRequest_KvSession{KvSession: &pb.KvSessionRef{SessionId: ref.ID}}})
	if err != nil {
		return 0, err
	}
	switch st := resp.GetStatus(); st {
	case pb.AbortStatus_ABORT_STATUS_ABORTED, pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED:
		return st, nil
	default:
		return 0, fmt.Errorf("P answered Abort(kv_session) with %v", st)
	}
}

// checkDecodeRole is L-4 for D: a request must carry kv.session, and never
// media or encoder options (D never receives media or an encoder
// reference, L-2). FAILED_PRECONDITION before anything runs.
func checkDecodeRole(req *pb.GenerateRequest) error {
	switch {
	case len(req.GetMedia()) > 0:
		return fmt.Errorf("%w: L-4 the decode engine never takes media (send them to E, the reference to P)", handoff.ErrWrongRole)
	case req.GetEncoder().GetPublish() != nil || req.GetEncoder().GetConsume() != nil:
		return fmt.Errorf("%w: L-4 the decode engine never takes encoder options (an encoder reference goes to P)", handoff.ErrWrongRole)
	case req.GetKv().GetSession() == nil:
		return fmt.Errorf("%w: L-4 a request to the decode engine needs kv.session (P's PrefillReady.kv_session)", handoff.ErrWrongRole)
	}
	return nil
}
