package lm

import (
	"slices"
	"testing"
	"unicode/utf8"
)

func TestTokenizeRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		prompt string
		want   []uint32 // nil: only check the round trip
	}{
		{name: "empty", prompt: "", want: []uint32{}},
		{name: "marker only", prompt: "<image>", want: []uint32{ImageID}},
		{name: "word with space", prompt: " cat", want: []uint32{tokenIDs[" cat"]}},
		{name: "bare word", prompt: "cat", want: []uint32{tokenIDs["cat"]}},
		{name: "marker between words", prompt: "the<image> cat", want: []uint32{tokenIDs["the"], ImageID, tokenIDs[" cat"]}},
		{name: "byte fallback", prompt: "\x00\xff", want: []uint32{firstByteID, firstByteID + 0xff}},
		{name: "broken marker", prompt: "<imag>"},
		{name: "sentence", prompt: "Describe the image in detail, please."},
		{name: "utf-8", prompt: "Ünïcödé 图像 🐱 <image>"},
		{name: "invalid utf-8", prompt: "\xc3\x28 \xe2\x82"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Tokenize(tt.prompt)
			if tt.want != nil && !slices.Equal(got, tt.want) {
				t.Errorf("Tokenize(%q) = %v, want %v", tt.prompt, got, tt.want)
			}
			if back := Detokenize(got); back != tt.prompt {
				t.Errorf("Detokenize(Tokenize(%q)) = %q, want the prompt back", tt.prompt, back)
			}
			for _, id := range got {
				if int(id) >= VocabSize() {
					t.Errorf("Tokenize(%q) gave id %d >= VocabSize() %d", tt.prompt, id, VocabSize())
				}
			}
		})
	}
}

func TestVocabularyLayout(t *testing.T) {
	if n := VocabSize(); n < 300 || n > 4000 {
		t.Errorf("VocabSize() = %d, want a few hundred to a few thousand", n)
	}
	if got := TokenText(EOSID); got != "" {
		t.Errorf("TokenText(EOSID) = %q, want \"\"", got)
	}
	if got := TokenText(ImageID); got != ImageMarker {
		t.Errorf("TokenText(ImageID) = %q, want %q", got, ImageMarker)
	}
	for _, id := range []uint32{uint32(VocabSize()), 1 << 31, ^uint32(0)} {
		if got := TokenText(id); got != "" {
			t.Errorf("TokenText(%d) = %q, want \"\" for an out-of-range id", id, got)
		}
	}
	if got := Detokenize([]uint32{tokenIDs[" cat"], uint32(VocabSize())}); got != " cat" {
		t.Errorf("Detokenize with an out-of-range id = %q, want \" cat\"", got)
	}
	seen := map[string]bool{}
	for _, w := range vocabularyWords {
		if seen[w] {
			t.Errorf("word %q listed twice", w)
		}
		seen[w] = true
	}
	// Answers are built from outputIDs only: distinct, no EOS, no marker, valid UTF-8.
	seenID := map[uint32]bool{}
	for _, id := range outputIDs {
		if id == EOSID || id == ImageID || seenID[id] || !utf8.ValidString(TokenText(id)) || TokenText(id) == "" {
			t.Errorf("output candidate %d (%q) is a special, duplicate, empty or invalid UTF-8 token", id, TokenText(id))
		}
		seenID[id] = true
	}
}
