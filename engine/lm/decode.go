package lm

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// FinishReason says why an answer ended; values equal the wire's
// openengine.v1.FinishReason numbers.
type FinishReason int32

// Finish reasons (GenerationFinished.reason on the wire).
const (
	FinishUnspecified FinishReason = 0 // not finished (emit failed)
	FinishStop        FinishReason = 1 // EOS, a stop token id or a stop text
	FinishLength      FinishReason = 2 // MaxTokens or the context window reached
	FinishCancelled   FinishReason = 3 // ctx cancelled; Decode returns ctx.Err()
)

// StopKind says which condition ended a FinishStop answer.
type StopKind uint8

// Stop kinds; the server fills GenerationFinished.stop_match from them.
const (
	StopByNone    StopKind = iota // not FinishStop
	StopByEOS                     // the model generated EOSID
	StopByTokenID                 // a token in Request.StopTokenIDs (Result.StopTokenID)
	StopByText                    // a text in Request.StopTexts (Result.StopMatch)
)

// Token is one emitted output token. Text is TokenText(ID), except for the
// last token before a stop text, which may carry only the part of its text in
// front of the cut. Concatenating the emitted Texts gives the answer.
type Token struct {
	// ID is the token id, < VocabSize().
	ID uint32
	// Text is the token's text as emitted (see above).
	Text string
}

// Result summarises one Decode. CompletionTokens counts the emitted tokens
// (EOS and excluded stop tokens are not emitted and not counted); usage's
// total_tokens is PromptTokens + CompletionTokens.
type Result struct {
	Finish      FinishReason // why the answer ended
	StopBy      StopKind     // for FinishStop, which condition; StopByNone otherwise
	StopMatch   string       // the stop text matched, for StopByText
	StopTokenID uint32       // the stop token matched, for StopByTokenID

	// PromptTokens is the prompt's length in tokens (text tokens plus every
	// image's Rows); CompletionTokens counts the emitted tokens, including
	// those a preempted decode emitted before (DecodeOptions.Emitted).
	PromptTokens, CompletionTokens uint32
}

// Decode model constants: no EOS among the first eosFreeSteps generated tokens,
// then EOS with probability 1/eosOneIn per step (answers ~5-40 tokens).
const (
	eosFreeSteps = 4
	eosOneIn     = 12
	nextSalt     = 0x6e657874 // "next"
)

// Generate is Prefill followed by Decode.
func (m *Model) Generate(ctx context.Context, req Request, emit func(Token) error) (Result, error) {
	s, err := m.Prefill(req)
	if err != nil {
		return Result{}, err
	}
	return m.Decode(ctx, s, req, emit)
}

// Decode generates greedily from s, calling emit for each output token in
// order, and reads only the stopping options of req (MaxTokens, MinTokens,
// StopTexts, StopTokenIDs, IgnoreEOS, IncludeStopInOutput). It holds no lock.
// Stop texts: emission of text that may start a stop text is held back until
// it is known not to. Errors: ErrBadSession (nil session or one from another
// model), ErrContextTooLong (the prompt fills this model's context window),
// ErrBadStopping, ErrTokenOutOfRange (stop token id), ctx.Err() with
// Finish FinishCancelled (checked before each step), or emit's error as is.
func (m *Model) Decode(ctx context.Context, s *Session, req Request, emit func(Token) error) (Result, error) {
	res, _, err := m.DecodeWith(ctx, s, req, DecodeOptions{}, emit)
	return res, err
}

// DecodeOptions continue and interrupt a decode (CONTRACT R-2).
type DecodeOptions struct {
	// Decided are the token ids an earlier, preempted decode of the same
	// request decided, in order (DecodeWith's second result). The decode
	// passes through them first: re-absorbing them (pause and resume) or,
	// with Recompute, regenerating each and checking it equals (full reset;
	// a difference is ErrRecomputeDiverged).
	Decided []uint32
	// Recompute regenerates each Decided id and checks it (full reset)
	// instead of re-absorbing them (pause and resume).
	Recompute bool
	// Emitted is how many tokens the earlier decode emitted: that many are
	// not emitted again, but still counted in Result.CompletionTokens.
	Emitted uint32
	// PreemptAfter stops the decode with ErrPreempted once this many token
	// ids were decided in all (0 = never).
	PreemptAfter uint32
}

// ErrPreempted ends a DecodeWith at DecodeOptions.PreemptAfter; the decided
// ids and Result.CompletionTokens (emitted so far) let a later DecodeWith go on.
var ErrPreempted = errors.New("lm: preempted")

// ErrRecomputeDiverged: a full-reset recompute decided another token than
// the preempted decode had.
var ErrRecomputeDiverged = errors.New("lm: R-2 recompute diverged from the preempted decode")

// DecodeWith is Decode with opts; it also returns the token ids decided
// (absorbed) so far, the input of a resumed decode. Errors: Decode's, plus
// ErrPreempted and ErrRecomputeDiverged.
func (m *Model) DecodeWith(ctx context.Context, s *Session, req Request, opts DecodeOptions, emit func(Token) error) (Result, []uint32, error) {
	var decided []uint32
	res, err := m.decode(ctx, s, req, opts, &decided, emit)
	return res, decided, err
}

func (m *Model) decode(ctx context.Context, s *Session, req Request, opts DecodeOptions, decided *[]uint32, emit func(Token) error) (Result, error) {
	if s == nil || s.modelTag != m.tag {
		return Result{}, fmt.Errorf("%w: session from another model", ErrBadSession)
	}
	if err := validateStopping(req); err != nil {
		return Result{}, err
	}
	room := int64(m.cfg.MaxContextTokens) - int64(s.promptTokens)
	if room <= 0 {
		return Result{}, fmt.Errorf("%w: %d prompt tokens, context %d", ErrContextTooLong, s.promptTokens, m.cfg.MaxContextTokens)
	}
	budget := req.MaxTokens
	if budget == 0 {
		budget = m.cfg.DefaultMaxTokens
	}
	budget = uint32(min(int64(budget), room))

	res := Result{PromptTokens: s.promptTokens}
	out := newOutput(req, func(t Token) error {
		if res.CompletionTokens >= opts.Emitted {
			if err := emit(t); err != nil {
				return err
			}
		}
		res.CompletionTokens++
		return nil
	})
	state := s.state
	for step := uint32(0); step < budget; step++ {
		if err := ctx.Err(); err != nil {
			res.Finish = FinishCancelled
			return res, err
		}
		if opts.PreemptAfter > 0 && step == opts.PreemptAfter && int(step) >= len(opts.Decided) {
			return res, ErrPreempted
		}
		stopsOn := step >= req.MinTokens
		var id uint32
		if int(step) < len(opts.Decided) && !opts.Recompute {
			id = opts.Decided[step] // pause and resume: re-absorb
		} else {
			id = next(state^s.cross, step, stopsOn && !req.IgnoreEOS, func(id uint32) bool {
				return !stopsOn && slices.Contains(req.StopTokenIDs, id)
			})
			if int(step) < len(opts.Decided) && id != opts.Decided[step] {
				return res, fmt.Errorf("%w: step %d decided %d, before %d", ErrRecomputeDiverged, step, id, opts.Decided[step])
			}
		}
		*decided = append(*decided, id)
		state = absorb(state, uint64(id))
		switch {
		case stopsOn && slices.Contains(req.StopTokenIDs, id):
			res.Finish, res.StopBy, res.StopTokenID = FinishStop, StopByTokenID, id
			if err := out.flush(); err != nil {
				return res, err
			}
			if req.IncludeStopInOutput {
				return res, out.emit(Token{ID: id, Text: TokenText(id)})
			}
			return res, nil
		case id == EOSID:
			res.Finish, res.StopBy = FinishStop, StopByEOS
			return res, out.flush()
		}
		match, err := out.push(id, stopsOn)
		if err != nil {
			return res, err
		}
		if match != "" {
			res.Finish, res.StopBy, res.StopMatch = FinishStop, StopByText, match
			return res, nil
		}
	}
	res.Finish = FinishLength
	return res, out.flush()
}

// next is the greedy next-token function: EOSID when allowed and drawn,
// otherwise an output token; a banned token (a stop id during MinTokens) is
// replaced by the next candidate in order, as masking its logit would.
func next(state uint64, step uint32, eosAllowed bool, banned func(uint32) bool) uint32 {
	h := mix64(state ^ nextSalt)
	if eosAllowed && step >= eosFreeSteps && h%eosOneIn == 0 {
		return EOSID
	}
	n := uint64(len(outputIDs))
	first := (h >> 32) % n
	for i := range n {
		if id := outputIDs[(first+i)%n]; !banned(id) {
			return id
		}
	}
	return outputIDs[first] // every candidate banned: masking has nothing left
}

// validateStopping checks the stopping options; errors wrap ErrBadStopping or
// ErrTokenOutOfRange.
func validateStopping(req Request) error {
	if req.MaxTokens != 0 && req.MinTokens > req.MaxTokens {
		return fmt.Errorf("%w: min_tokens %d > max_tokens %d", ErrBadStopping, req.MinTokens, req.MaxTokens)
	}
	for i, s := range req.StopTexts {
		if s == "" {
			return fmt.Errorf("%w: stop text %d is empty", ErrBadStopping, i)
		}
	}
	for i, id := range req.StopTokenIDs {
		if int64(id) >= int64(VocabSize()) {
			return fmt.Errorf("%w: stop token id %d = %d, vocabulary %d", ErrTokenOutOfRange, i, id, VocabSize())
		}
	}
	return nil
}
