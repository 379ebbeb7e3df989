package contenthash

import (
	"image"
	"image/color"
	"testing"
)

// TestOf: Of without switches is ContentHash; the H-1 switch makes two
// alpha-0 pixels of different colours collide; the H-4 switch tells one
// image's encodings apart.
func TestOf(t *testing.T) {
	red, blue := image.NewNRGBA(image.Rect(0, 0, 1, 1)), image.NewNRGBA(image.Rect(0, 0, 1, 1))
	red.SetNRGBA(0, 0, color.NRGBA{R: 255})
	blue.SetNRGBA(0, 0, color.NRGBA{B: 255})
	if got, want := Of("p", []byte("png"), red, Mutants{}), ContentHash("p", red); got != want {
		t.Fatalf("Of without switches = %s, ContentHash %s", got, want)
	}
	if ContentHash("p", red) == ContentHash("p", blue) {
		t.Fatal("the contract's hash lost the colour of an alpha-0 pixel")
	}
	if Of("p", nil, red, Mutants{Premultiplied: true}) != Of("p", nil, blue, Mutants{Premultiplied: true}) {
		t.Error("the H-1 switch keeps the colour of an alpha-0 pixel; its mutant must lose it")
	}
	if Of("p", []byte("png"), red, Mutants{WireBytes: true}) == Of("p", []byte("webp"), red, Mutants{WireBytes: true}) {
		t.Error("the H-4 switch hashes pixels; its mutant must hash the wire bytes")
	}
}
