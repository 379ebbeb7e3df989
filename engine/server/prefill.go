package server

import (
	"context"
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
)

// runPrefill is P's end of a request (CONTRACT section 1, role P): the
// prompt and the consumed images (or a text-only prompt) are prefilled, the
// KV session is kept for D (kvsession.go), and the stream ends with exactly
// one PrefillReady, the terminal success of a prefill-only request: no
// token, the KV session, the decode preparation (decodeprep.go) and Usage
// {prompt_tokens: N, completion_tokens: 0, total_tokens: N}. If the send
// fails (the client is gone) the session is released at once: nobody can
// decode what the client never got.
func (e *Engine) runPrefill(ctx context.Context, requestID string, r lm.Request, xr *execRequest, send func(*pb.GenerateResponse) error) error {
	session, err := e.contextStep(r, xr)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b, _ := session.MarshalBinary() // never fails
	kv, err := e.holdKVSession(b, session.ImageCount())
	if err != nil {
		return err
	}
	prep := e.decodePreparationFor(kv.GetSessionId(), r, session.PromptTokens(), b)
	n := session.PromptTokens()
	err = send(&pb.GenerateResponse{
		RequestId: requestID,
		Event:     &pb.GenerateResponse_PrefillReady{PrefillReady: &pb.PrefillReady{KvSession: kv, DecodePreparation: prep}},
		Usage:     &pb.Usage{PromptTokens: n, CompletionTokens: 0, TotalTokens: n},
	})
	if err != nil {
		e.kvDriver().Release(kv.GetSessionId())
		return err
	}
	e.log.InfoContext(ctx, "prefill ready", "session", kv.GetSessionId(), "prompt_tokens", n, "images", session.ImageCount(), "decode_preparation_bytes", len(prep))
	return nil
}

// abortKVSession is P's Abort(kv_session): ABORTED the first time it
// releases a live session, ALREADY_FINISHED for a session already fetched
// and released, aborted or expired. A malformed session id is
// INVALID_ARGUMENT; a role other than P holds no sessions (L-4).
func (e *Engine) abortKVSession(ref *pb.KvSessionRef) (pb.AbortStatus, error) {
	if e.cfg.Role != RolePrefill {
		return 0, fmt.Errorf("%w: L-4 %s holds no KV sessions (only prefill does)", handoff.ErrWrongRole, e.cfg.Role)
	}
	id := ref.GetSessionId()
	if !kvSessionIDPattern.MatchString(id) {
		return 0, fmt.Errorf("%w: Abort: kv_session.session_id %.80q is not %d lowercase hex digits", handoff.ErrBadRequest, id, kvSessionIDHexDigits)
	}
	if e.kvDriver().Release(id) {
		e.log.Info("KV session released", "session", id)
		return pb.AbortStatus_ABORT_STATUS_ABORTED, nil
	}
	return pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED, nil
}
