package server

import (
	"context"
	"errors"
	"fmt"
	"image"
	"time"

	"github.com/baton-dev/baton/engine/encoder"
	"github.com/baton-dev/baton/engine/executor"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
)

// inference implements openengine.v1.Inference.
type inference struct {
	pb.UnimplementedInferenceServer
	e *Engine
}

// checkRole is the L-4 decision: which requests each role serves.
func checkRole(role Role, req *pb.GenerateRequest) error {
	publish := req.GetEncoder().GetPublish() != nil
	consume := req.GetEncoder().GetConsume() != nil
	media := len(req.GetMedia()) > 0
	session := req.GetKv().GetSession() != nil
	prep := len(req.GetDecodePreparation()) > 0
	if role == RoleDecode {
		return checkDecodeRole(req)
	}
	if session || prep {
		return fmt.Errorf("%w: L-4 %s does not serve KV-session decode requests", handoff.ErrWrongRole, role)
	}
	switch role {
	case RoleEncoder:
		if !publish || consume {
			return fmt.Errorf("%w: L-4 the encoder only serves encoder.publish requests (it never generates text)", handoff.ErrWrongRole)
		}
		if !media {
			return fmt.Errorf("%w: L-4 encoder.publish without media", handoff.ErrWrongRole)
		}
	case RolePD, RolePrefill:
		if publish {
			return fmt.Errorf("%w: L-4 a consumer does not publish", handoff.ErrWrongRole)
		}
		if media {
			return fmt.Errorf("%w: L-4 a consumer takes encoder.consume, never media", handoff.ErrWrongRole)
		}
	case RoleAggregated:
		if publish || consume {
			return fmt.Errorf("%w: L-4 the aggregated engine takes media, not encoder references", handoff.ErrWrongRole)
		}
	}
	return nil
}

// Generate serves one request. Validation failures end the stream with a
// non-OK status before any event, checked in CONTRACT order: the health
// refusals (S-2, X-1, and Q-4 for a request that starts a handoff), L-4,
// L-6 (with L-3), L-1, SU-4, H-3, N-1, SE-3, SU-5, SU-2, L-5.
func (s *inference) Generate(req *pb.GenerateRequest, stream grpc.ServerStreamingServer[pb.GenerateResponse]) error {
	e := s.e
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	requestID := req.GetRequestId()
	if requestID == "" {
		requestID = "anon-" + mustRandomHex(8)
	}
	if err := e.begin(requestID, e.ownerOf(ctx), cancel); err != nil {
		return e.status(err)
	}
	defer e.end(requestID)
	err := e.generate(ctx, requestID, req, stream.Send)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return e.status(fmt.Errorf("%w: request cancelled", errCancelled))
		}
		return e.status(err)
	}
	return nil
}

var errCancelled = errors.New("server: cancelled")

// startsHandoff reports whether a request would start a handoff (publish,
// consume, media to encode, a KV session to attach): Q-4 refuses those on
// a quarantined engine, before anything else is checked (CONTRACT "which
// code wins"); text-only requests are still served.
func startsHandoff(req *pb.GenerateRequest) bool {
	return req.GetEncoder().GetPublish() != nil || req.GetEncoder().GetConsume() != nil || len(req.GetMedia()) > 0 ||
		req.GetKv().GetSession() != nil || len(req.GetDecodePreparation()) > 0
}

func (e *Engine) generate(ctx context.Context, requestID string, req *pb.GenerateRequest, send func(*pb.GenerateResponse) error) error {
	if startsHandoff(req) {
		if err := e.admitHandoff(); err != nil {
			return err // S-2, X-1, Q-4 come first
		}
	}
	if m := req.GetModel(); m != "" && m != ModelName(e.preset.Name) {
		return fmt.Errorf("%w: model %.60q (serving %s)", errModelNotFound, m, ModelName(e.preset.Name))
	}
	if err := handoff.AdmitRole(checkRole(e.cfg.Role, req), e.decisions()); err != nil { // L-4
		return err
	}
	if e.cfg.Role == RoleDecode {
		return e.runDecode(ctx, req.GetRequestId(), req, send) // N-2: no media, no encoder
	}
	images, releaseDecoded, err := e.decodeMedia(ctx, req.GetMedia())
	defer releaseDecoded() // SE-4: the decoded bytes leave the decode budget with the request
	if err != nil {
		return err
	}
	hooks, err := e.hooksOf(req)
	if err != nil {
		return err
	}
	if e.cfg.Role == RoleEncoder {
		start := time.Now()
		err := e.publish(ctx, req, hooks, images, send)
		e.metrics.observePublish(start, err)
		return err
	}
	lreq, err := lmRequest(req)
	if err != nil {
		return err
	}
	var xr *execRequest // the request's handle on the executor; nil for text-only
	if wire := req.GetEncoder().GetConsume(); wire != nil {
		ref, addr, err := e.parseReference(wire)
		if err != nil {
			return err
		}
		rows := make([]int, len(ref.Items))
		for i, it := range ref.Items {
			rows[i] = int(it.Rows)
		}
		if err := e.validatePrompt(lreq, rows); err != nil {
			return err // before the claim: a rejected request never spends the reference
		}
		start := time.Now()
		received, err := e.receive(ctx, requestID, ref, wire, addr, hooks.transferFail)
		e.metrics.observeConsume(start, err)
		if err != nil {
			return err
		}
		if xr, err = e.exec.adopt(ctx, requestID, hooks, received); err != nil {
			return err
		}
		defer xr.end()
		lreq.Images = received
	} else if len(images) > 0 {
		rows := make([]int, len(images))
		for i := range rows {
			rows[i] = e.preset.Patches()
		}
		if err := e.validatePrompt(lreq, rows); err != nil {
			return err // before encoding anything
		}
		if err := e.admitHandoff(); err != nil {
			return err
		}
		imgs := make([]image.Image, len(images))
		for i, im := range images {
			imgs[i] = im.img
		}
		x, embeddings, err := e.exec.encode(ctx, requestID, hooks, imgs)
		if err != nil {
			return err // C-1, C-3 or C-6: one terminal error; the executor dropped what it held
		}
		xr = x
		defer xr.end()
		lreq.Images = e.lmImages(images, embeddings)
	}
	if e.cfg.Role == RolePrefill {
		return e.runPrefill(ctx, req.GetRequestId(), lreq, xr, send)
	}
	return e.runModel(ctx, req.GetRequestId(), lreq, xr, images, hooks, send)
}

// lmImages pairs the encoder's view with each image's identity.
func (e *Engine) lmImages(images []decodedImage, embeddings []encoder.Embedding) []lm.Image {
	out := make([]lm.Image, len(embeddings))
	for i, emb := range embeddings {
		out[i] = lm.Image{ContentHash: e.imageIdentity(images[i]), Rows: emb.Rows, Cols: emb.Cols, Data: emb.Data}
	}
	return out
}

// validatePrompt rejects, before anything is consumed or encoded, what the
// model's Prefill would reject for images of these row counts.
func (e *Engine) validatePrompt(r lm.Request, imageRows []int) error {
	if err := e.model.Validate(r, imageRows); err != nil {
		return fmt.Errorf("%w: %v", handoff.ErrBadRequest, err)
	}
	return nil
}

// lmRequest maps the wire request's prompt and stopping options.
func lmRequest(req *pb.GenerateRequest) (lm.Request, error) {
	r := lm.Request{}
	switch in := req.GetInput().(type) {
	case *pb.GenerateRequest_Prompt:
		r.Prompt = in.Prompt
	case *pb.GenerateRequest_TokenIds:
		r.TokenIDs = in.TokenIds.GetIds()
	}
	st := req.GetStopping()
	r.MaxTokens = st.GetMaxTokens()
	r.MinTokens = st.GetMinTokens()
	r.IgnoreEOS = st.GetIgnoreEos()
	r.IncludeStopInOutput = st.GetIncludeStopInOutput()
	for _, c := range st.GetConditions() {
		switch c := c.GetCondition().(type) {
		case *pb.StopCondition_StopText:
			r.StopTexts = append(r.StopTexts, c.StopText)
		case *pb.StopCondition_StopTokenId:
			r.StopTokenIDs = append(r.StopTokenIDs, c.StopTokenId)
		}
	}
	if n := req.GetSampling().GetNumSequences(); n > 1 {
		return r, fmt.Errorf("%w: num_sequences %d (this engine decodes one greedy sequence)", handoff.ErrBadRequest, n)
	}
	return r, nil
}

// runModel prefills (rejections before any event) and streams tokens, one
// event per token, then GenerationFinished with the Usage. With an executor
// request xr the prefill is the first context step: it computes the
// request's context from the output once, then the view is released;
// every decode step releases again, which the executor counts and ignores.
// A preemption (test hook baton.preempt_after_tokens) re-admits the
// request: the encoder runs again on images and the decode goes on from the
// tokens decided before, emitting only new ones.
func (e *Engine) runModel(ctx context.Context, requestID string, r lm.Request, xr *execRequest, images []decodedImage, hooks requestHooks, send func(*pb.GenerateResponse) error) error {
	session, err := e.contextStep(r, xr)
	if err != nil {
		return err
	}
	opts := lm.DecodeOptions{}
	if xr != nil && len(images) > 0 {
		opts.PreemptAfter = hooks.preemptAfter // a text-only request has no output to recompute
	}
	for {
		res, decided, err := e.model.DecodeWith(ctx, session, r, opts, func(t lm.Token) error {
			xr.release() // idempotent: a decode loop releasing every step releases once
			return send(tokenEvent(requestID, t))
		})
		if !errors.Is(err, lm.ErrPreempted) {
			if err != nil {
				if errors.Is(err, lm.ErrRecomputeDiverged) {
					return fmt.Errorf("server: %w", err)
				}
				return err
			}
			return send(finishedEvent(requestID, res))
		}
		embeddings, err := xr.preempt(ctx, hooks.preemptMode)
		if err != nil {
			return err
		}
		r.Images = e.lmImages(images, embeddings)
		if session, err = e.contextStep(r, xr); err != nil {
			return err
		}
		opts = lm.DecodeOptions{Decided: decided, Recompute: hooks.preemptMode == executor.PreemptReset, Emitted: res.CompletionTokens}
	}
}

// contextStep is the first context step of a request: prefill over the
// prompt and the consumed output (for the encoder-decoder model this
// computes the cross-attention KV), as many times as the executor core
// says (once, R-1; twice under its ContextTwice mutant), each recorded
// with the executor, then the output's view is released.
func (e *Engine) contextStep(r lm.Request, xr *execRequest) (*lm.Session, error) {
	var session *lm.Session
	var err error
	for i, n := 0, xr.contextComputations(); i < n && err == nil; i++ {
		if session, err = e.model.Prefill(r); err == nil {
			xr.contextComputed()
		}
	}
	xr.release()
	if err != nil {
		if errors.Is(err, lm.ErrIdentity) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", handoff.ErrBadRequest, err)
	}
	return session, nil
}

func tokenEvent(requestID string, t lm.Token) *pb.GenerateResponse {
	return &pb.GenerateResponse{RequestId: requestID, Event: &pb.GenerateResponse_Token{Token: &pb.TokenOutput{
		Tokens: []*pb.TokenInfo{{TokenId: t.ID, Token: t.Text}}, Text: t.Text,
	}}}
}

func finishedEvent(requestID string, res lm.Result) *pb.GenerateResponse {
	fin := &pb.GenerationFinished{Reason: pb.FinishReason(res.Finish)}
	switch res.StopBy {
	case lm.StopByText:
		fin.StopMatch = &pb.StopMatch{Match: &pb.StopMatch_StopText{StopText: res.StopMatch}}
	case lm.StopByTokenID:
		fin.StopMatch = &pb.StopMatch{Match: &pb.StopMatch_StopTokenId{StopTokenId: res.StopTokenID}}
	}
	return &pb.GenerateResponse{RequestId: requestID, Event: &pb.GenerateResponse_Finished{Finished: fin}, Usage: &pb.Usage{
		PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, TotalTokens: res.PromptTokens + res.CompletionTokens,
	}}
}

// streamDecode decodes from a prefilled session (D's, fetched from P) and
// streams one event per token, then GenerationFinished with the Usage.
func (e *Engine) streamDecode(ctx context.Context, requestID string, session *lm.Session, r lm.Request, send func(*pb.GenerateResponse) error) error {
	res, err := e.model.Decode(ctx, session, r, func(t lm.Token) error { return send(tokenEvent(requestID, t)) })
	if err != nil {
		return err
	}
	return send(finishedEvent(requestID, res))
}
