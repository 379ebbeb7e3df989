package lm

import "fmt"

// Validate checks a request as Prefill would, for images of the given row
// counts, without computing anything or touching the prefix cache. A consumer
// calls it BEFORE claiming an encoder output, so a request Prefill would
// reject never spends a reference (CONTRACT SU-2, L-1 "before execution").
// Errors: those of Prefill except ErrBadImage and ErrIdentity.
func (m *Model) Validate(req Request, imageRows []int) error {
	if err := validateStopping(req); err != nil {
		return err
	}
	ids, err := promptIDs(req)
	if err != nil {
		return err
	}
	images := make([]Image, len(imageRows))
	for i, r := range imageRows {
		if r <= 0 {
			return fmt.Errorf("%w: image %d has %d rows", ErrBadImage, i, r)
		}
		images[i].Rows = r
	}
	_, promptTokens, err := placeImages(ids, images)
	if err != nil {
		return err
	}
	if promptTokens == 0 {
		return ErrEmptyPrompt
	}
	if promptTokens >= uint64(m.cfg.MaxContextTokens) {
		return fmt.Errorf("%w: %d prompt tokens, context %d", ErrContextTooLong, promptTokens, m.cfg.MaxContextTokens)
	}
	return nil
}
