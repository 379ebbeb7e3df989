package lm

import "errors"

// Sentinel errors. Every one is an expected rejection of a malformed request
// (the server maps all of them to INVALID_ARGUMENT before any token is emitted),
// except ErrIdentity, which is an internal failure of the injected randomness.
// They are returned wrapped with %w; test with errors.Is.
var (
	// ErrTokenOutOfRange: a token id (GenerateRequest.token_ids or a stop token
	// id) is >= VocabSize().
	ErrTokenOutOfRange = errors.New("lm: token id out of vocabulary")
	// ErrImageMarkers: the prompt has a number of "<image>" markers that is
	// neither 0 nor the number of images ("How requests look", CONTRACT.md).
	ErrImageMarkers = errors.New("lm: image marker count does not match image count")
	// ErrBadImage: an image has rows or cols <= 0, len(Data) != rows*cols, or
	// a non-finite value (NaN, +-Inf) in its embeddings.
	ErrBadImage = errors.New("lm: malformed image embeddings")
	// ErrInvalidInput: the request carries both Prompt and TokenIDs (they are a
	// oneof on the wire).
	ErrInvalidInput = errors.New("lm: both prompt text and token ids given")
	// ErrEmptyPrompt: the request has no prompt positions at all (no text
	// tokens and no images).
	ErrEmptyPrompt = errors.New("lm: empty prompt")
	// ErrContextTooLong: prompt tokens (text + image rows) leave no room for one
	// generated token within Config.MaxContextTokens.
	ErrContextTooLong = errors.New("lm: prompt exceeds the context window")
	// ErrBadStopping: an empty stop text, or MinTokens > MaxTokens (MaxTokens != 0).
	ErrBadStopping = errors.New("lm: invalid stopping options")
	// ErrBadSession: session bytes that do not decode (wrong length, magic or
	// checksum), a nil session, or a session made by a model with another seed
	// or vocabulary.
	ErrBadSession = errors.New("lm: bad session")
	// ErrIdentity: Config.Rand failed while drawing a fresh identity for an
	// image without content hash (H-2). Not a client error.
	ErrIdentity = errors.New("lm: cannot draw fresh image identity")
)
