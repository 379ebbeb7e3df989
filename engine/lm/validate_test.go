package lm

import (
	"errors"
	"testing"
)

// TestValidateMatchesPrefill: Validate rejects exactly what Prefill rejects
// for these requests, and accepts what Prefill accepts.
func TestValidateMatchesPrefill(t *testing.T) {
	m := New(Config{Seed: 1, MaxContextTokens: 300})
	img := Image{ContentHash: "", Rows: 100, Cols: 4, Data: make([]float32, 400)}
	cases := []struct {
		name   string
		req    Request
		images int
		want   error
	}{
		{"ok", Request{Prompt: "hello <image>"}, 1, nil},
		{"empty stop text", Request{Prompt: "hi", StopTexts: []string{""}}, 0, ErrBadStopping},
		{"min over max", Request{Prompt: "hi", MinTokens: 5, MaxTokens: 2}, 0, ErrBadStopping},
		{"stop token out of range", Request{Prompt: "hi", StopTokenIDs: []uint32{1 << 30}}, 0, ErrTokenOutOfRange},
		{"markers", Request{Prompt: "<image> <image>"}, 1, ErrImageMarkers},
		{"context", Request{Prompt: "x"}, 3, ErrContextTooLong},
		{"empty", Request{}, 0, ErrEmptyPrompt},
		{"both inputs", Request{Prompt: "x", TokenIDs: []uint32{3}}, 0, ErrInvalidInput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows := make([]int, c.images)
			imgs := make([]Image, c.images)
			for i := range rows {
				rows[i], imgs[i] = img.Rows, img
			}
			err := m.Validate(c.req, rows)
			if !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
				t.Fatalf("Validate = %v, want %v", err, c.want)
			}
			req := c.req
			req.Images = imgs
			_, perr := m.Prefill(req)
			if (err == nil) != (perr == nil) {
				t.Errorf("Validate = %v but Prefill = %v", err, perr)
			}
		})
	}
}
