package server

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"time"

	"github.com/baton-dev/baton/engine/encoder"
	"github.com/baton-dev/baton/engine/handoff"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// Test hook keys of GenerateRequest.extra (CONTRACT section 4). They are
// honoured only when the engine runs with Config.TestHooks (--test-hooks);
// without it every extra key is ignored.
const (
	// HookEncoderDelayMs (number, ms in [0, MaxEncoderDelayMs]) holds the
	// request's encoder step that long before encoding; a cancellation of
	// the request ends the hold at once (C-1). On E the hold comes after the
	// entry's bytes were reserved, so a cancelled hold also shows that the
	// reservation is given back.
	HookEncoderDelayMs = "baton.encoder_delay_ms"
	// HookEncoderFail (bool) makes the request's encoder step fail (C-6):
	// the request ends with one terminal error, code INTERNAL, whose message
	// names rule C-6; everything it reserved is released and the engine
	// stays READY.
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
)

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
	for key, dst := range map[string]*bool{HookEncoderFail: &h.encoderFail, HookCleanupFail: &h.cleanupFail, HookTransferFailExtra: &h.transferFail} {
		if err := boolHook(key, dst); err != nil {
			return requestHooks{}, err
		}
	}
	if v, ok := fields[HookEncoderDelayMs]; ok {
		n, isNum := v.GetKind().(*structpb.Value_NumberValue)
		if !isNum || math.IsNaN(n.NumberValue) || n.NumberValue < 0 || n.NumberValue > MaxEncoderDelayMs {
			return requestHooks{}, fmt.Errorf("%w: test hook %s must be a number of ms in [0, %d], got %v", handoff.ErrBadRequest, HookEncoderDelayMs, MaxEncoderDelayMs, v.AsInterface())
		}
		h.encoderDelay = time.Duration(n.NumberValue * float64(time.Millisecond))
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

// encodeStep runs one request's encoder step over imgs: it holds for the
// request's HookEncoderDelayMs (ending early with ctx.Err() if ctx ends),
// fails with errEncoderFailed for HookEncoderFail or an encoder error, and
// otherwise returns one Embedding per image. While its output is alive it
// counts as one packed batch storage (encoder.storage.live_batches): the
// caller calls done once the embeddings were written out or dropped (done is
// a no-op after a failure).
func (e *Engine) encodeStep(ctx context.Context, hooks requestHooks, imgs []image.Image) (embeddings []encoder.Embedding, done func(), err error) {
	noop := func() {}
	if hooks.encoderDelay > 0 {
		timer := time.NewTimer(hooks.encoderDelay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, noop, ctx.Err()
		}
	}
	if hooks.encoderFail {
		return nil, noop, fmt.Errorf("%w: injected by test hook %s", errEncoderFailed, HookEncoderFail)
	}
	embeddings, err = e.encoder.Encode(imgs)
	if err != nil {
		return nil, noop, fmt.Errorf("%w: %v", errEncoderFailed, err)
	}
	e.mu.Lock()
	e.liveBatches++
	e.mu.Unlock()
	released := false
	return embeddings, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if !released {
			released = true
			e.liveBatches--
		}
	}, nil
}
