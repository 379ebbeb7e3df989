package server

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/baton-dev/baton/engine/executor"
	"github.com/baton-dev/baton/engine/handoff"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// Test hook keys of GenerateRequest.extra (CONTRACT section 4). They are
// honoured only when the engine runs with Config.TestHooks (--test-hooks);
// without it every extra key is ignored.
const (
	// HookEncoderDelayMs (number, ms in [0, MaxEncoderDelayMs]) holds the
	// encoder step of the batch the request lands in (the longest hold of
	// its members) before encoding; a cancelled request leaves at once and
	// the hold ends when no member waits any more (C-1). On E the hold comes
	// after the entry's bytes were reserved, so a cancelled hold also shows
	// that the reservation is given back. Roles that never encode (pd,
	// prefill, decode) check its type and ignore it.
	HookEncoderDelayMs = "baton.encoder_delay_ms"
	// HookEncoderFail (bool) makes the encoder step of the batch the
	// request lands in fail (C-6): an encoder step fails as a whole, so every
	// member of that batch ends with one terminal error, code INTERNAL, whose
	// message names rule C-6; everything they reserved is released and the
	// engine stays READY. Roles that never encode check its type and ignore it.
	HookEncoderFail = "baton.encoder_fail"
	// HookCleanupFail (bool, on a publish to E) marks the published entry so
	// that its first removal (Abort, expiry, drain) reports a failure after
	// removing the storage: the X-1 path (Health NOT_READY, every later
	// Generate UNAVAILABLE, sticky until restart).
	HookCleanupFail = "baton.cleanup_fail"
	// HookTransferFailExtra (bool, on a consume over tcp) makes the
	// producer's WRITE fail after the entry left its table; see
	// HookTransferFail.
	HookTransferFailExtra = "baton.transfer_fail"
	// HookContextDelayMs (number, ms in [0, MaxEncoderDelayMs]) holds the
	// request between the ready event of its encoder output and its first
	// context step (on E: before the entry is written; on PD and P: with
	// the received output adopted), the output PUBLISHED and unconsumed, so
	// a cancellation lands there (C-3).
	HookContextDelayMs = "baton.context_delay_ms"
	// HookPreemptAfterTokens (integer in [1, MaxPreemptAfterTokens], on the
	// aggregated role) preempts the request once that many tokens were
	// decided: its output was consumed and dropped, so it is re-admitted,
	// encoded again and recomputed.
	HookPreemptAfterTokens = "baton.preempt_after_tokens"
	// HookPreemptMode ("pause" or "reset", default "reset") is how the
	// preempted request comes back: pause-and-resume re-absorbs the tokens
	// decided so far, a full reset regenerates them. Without
	// HookPreemptAfterTokens it is checked and ignored.
	HookPreemptMode = "baton.preempt_mode"
	// HookOmitContentHash (bool, on a publish to E) publishes the items
	// without content hash, as a producer that does not hash would: the
	// consumer must give each a fresh identity (H-2). Other roles check its
	// type and ignore it.
	HookOmitContentHash = "baton.omit_content_hash"
)

// MaxPreemptAfterTokens bounds HookPreemptAfterTokens.
const MaxPreemptAfterTokens = 4096

// MaxEncoderDelayMs bounds HookEncoderDelayMs: 60,000 ms, the default case
// timeout of `baton check`, so a hold never outlives the case that asked.
const MaxEncoderDelayMs = 60_000

// requestHooks are the test hooks one request asked for; the zero value
// (hooks off, or none asked) changes nothing.
type requestHooks struct {
	encoderDelay time.Duration
	encoderFail  bool
	cleanupFail  bool
	transferFail bool
	omitHash     bool
	contextDelay time.Duration
	preemptAfter uint32
	preemptMode  executor.PreemptMode
	// keepAfterReady is no test hook: publish sets it when the core
	// decides to write a publish cancelled once its output is ready
	// (handoff.StopsOnCancel; the C-3 mutant,
	// handoff.Mutants.KeepOutputAfterCancel), whose executor wait then
	// ignores that cancellation.
	keepAfterReady bool
}

// hooksOf reads the test hooks of req. With Config.TestHooks off it returns
// the zero value whatever extra holds. Errors (ErrBadRequest,
// INVALID_ARGUMENT): a hook key whose value has the wrong type, or a delay
// outside [0, MaxEncoderDelayMs].
func (e *Engine) hooksOf(req *pb.GenerateRequest) (requestHooks, error) {
	var h requestHooks
	if !e.cfg.TestHooks {
		return h, nil
	}
	fields := req.GetExtra().GetFields()
	boolHook := func(key string, dst *bool) error {
		v, ok := fields[key]
		if !ok {
			return nil
		}
		b, isBool := v.GetKind().(*structpb.Value_BoolValue)
		if !isBool {
			return fmt.Errorf("%w: test hook %s must be a bool, got %v", handoff.ErrBadRequest, key, v.AsInterface())
		}
		*dst = b.BoolValue
		return nil
	}
	for key, dst := range map[string]*bool{HookEncoderFail: &h.encoderFail, HookCleanupFail: &h.cleanupFail, HookTransferFailExtra: &h.transferFail, HookOmitContentHash: &h.omitHash} {
		if err := boolHook(key, dst); err != nil {
			return requestHooks{}, err
		}
	}
	for key, dst := range map[string]*time.Duration{HookEncoderDelayMs: &h.encoderDelay, HookContextDelayMs: &h.contextDelay} {
		v, ok := fields[key]
		if !ok {
			continue
		}
		n, isNum := v.GetKind().(*structpb.Value_NumberValue)
		if !isNum || math.IsNaN(n.NumberValue) || n.NumberValue < 0 || n.NumberValue > MaxEncoderDelayMs {
			return requestHooks{}, fmt.Errorf("%w: test hook %s must be a number of ms in [0, %d], got %v", handoff.ErrBadRequest, key, MaxEncoderDelayMs, v.AsInterface())
		}
		*dst = time.Duration(n.NumberValue * float64(time.Millisecond))
	}
	if v, ok := fields[HookPreemptAfterTokens]; ok {
		n, isNum := v.GetKind().(*structpb.Value_NumberValue)
		if !isNum || n.NumberValue != math.Trunc(n.NumberValue) || n.NumberValue < 1 || n.NumberValue > MaxPreemptAfterTokens {
			return requestHooks{}, fmt.Errorf("%w: test hook %s must be an integer in [1, %d], got %v", handoff.ErrBadRequest, HookPreemptAfterTokens, MaxPreemptAfterTokens, v.AsInterface())
		}
		if e.cfg.Role != RoleAggregated {
			return requestHooks{}, fmt.Errorf("%w: R-2 test hook %s needs a role that encodes and decodes (aggregated), not %s", handoff.ErrBadRequest, HookPreemptAfterTokens, e.cfg.Role)
		}
		h.preemptAfter, h.preemptMode = uint32(n.NumberValue), executor.PreemptReset
	}
	if v, ok := fields[HookPreemptMode]; ok {
		switch v.GetStringValue() {
		case "pause":
			h.preemptMode = executor.PreemptPause
		case "reset":
			h.preemptMode = executor.PreemptReset
		default:
			return requestHooks{}, fmt.Errorf("%w: test hook %s must be \"pause\" or \"reset\", got %v", handoff.ErrBadRequest, HookPreemptMode, v.AsInterface())
		}
		if h.preemptAfter == 0 {
			h.preemptMode = 0
		}
	}
	return h, nil
}

// errEncoderFailed is wrapped by every encoder-step failure (C-6). The
// server maps it to INTERNAL (not UNAVAILABLE: the engine itself stays READY
// and serves the next request; the failure belongs to this request's
// inputs or to the encoder run), with "C-6" in the status message. The
// encoder runs before any event of the request is sent, so the non-OK status
// is the request's one terminal outcome: no EncoderReady, no token.
var errEncoderFailed = errors.New("server: C-6 encoder step failed")
