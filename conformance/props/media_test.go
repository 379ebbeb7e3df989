package props

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	_ "image/gif"
	_ "image/png"
	"strings"
	"testing"

	"github.com/baton-dev/baton/fixtures"
)

// TestContentHashMatchesProjectVectors checks contentHash against the
// project's H-1 vectors for *image.NRGBA sources
// (engine/encoder/testdata/content_hash_vectors.json).
func TestContentHashMatchesProjectVectors(t *testing.T) {
	alpha0 := []color.NRGBA{{10, 20, 30, 255}, {200, 100, 50, 0}, {0, 0, 0, 0}, {1, 2, 3, 128}}
	hidden := append([]color.NRGBA(nil), alpha0...)
	hidden[1].R = 201
	for _, v := range []struct {
		name, preset string
		w, h         int
		px           []color.NRGBA
		want         string
	}{
		{"opaque-1x1", "tiny", 1, 1, []color.NRGBA{{0x12, 0x34, 0x56, 0xff}}, "c2d238867c2c4a839da2f6b5f72ddcbad8777ce494f0a00ebd8d0f940f8e9634"},
		{"opaque-1x1-base", "base", 1, 1, []color.NRGBA{{0x12, 0x34, 0x56, 0xff}}, "a71af2054a007eaa810caab702ccdcc2e1512d8e3e832e413ce088054e3d3dd7"},
		{"alpha0-2x2", "tiny", 2, 2, alpha0, "220147cba03f05c46b74c827ff4f19d173f3b55964a58652eda7c5e272d28fa1"},
		{"alpha0-2x2-other-hidden-colour", "tiny", 2, 2, hidden, "cca7c0364809aa3178330bd4ebaa4139c239a5d2ee9cc14cdbb52156a3eb72b6"},
	} {
		m := image.NewNRGBA(image.Rect(0, 0, v.w, v.h))
		for i, c := range v.px {
			m.SetNRGBA(i%v.w, i/v.w, c)
		}
		if got := fixtures.ContentHash(v.preset, m); got != v.want {
			t.Errorf("fixtures.ContentHash(%q, %s) = %s; want %s", v.preset, v.name, got, v.want)
		}
	}
}

// TestEncodingsArePixelEqual: every encoding a generated image fits
// decodes, with Go's decoders, to the image's own non-premultiplied
// 16-bit pixels (the H-1 pre-image), so a pixel-equal pair is one.
func TestEncodingsArePixelEqual(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		for _, opaque := range []bool{true, false} {
			w, h := 1+int(seed%8), 1+int(seed/8%8)
			g := genImage{role: "image", name: imageName(w, h, seed, opaque), img: fillImage(w, h, seed, opaque)}
			if g.opaque() != opaque && opaque {
				t.Fatalf("%s is not opaque", g.name)
			}
			want := nrgba64(g)
			for _, e := range encodings {
				if !e.ok(g) {
					continue
				}
				item := e.item(g)
				data := item.GetRawBytes()
				if uri := item.GetDataUri(); uri != "" {
					b64, ok := strings.CutPrefix(uri, "data:image/png;base64,")
					if !ok {
						t.Fatalf("%s: data URI %q", e.name, uri[:20])
					}
					var err error
					if data, err = base64.StdEncoding.DecodeString(b64); err != nil {
						t.Fatal(err)
					}
				}
				m, _, err := image.Decode(bytes.NewReader(data))
				if err != nil {
					t.Fatalf("%s as %s: %v", g.name, e.name, err)
				}
				got := image.NewNRGBA64(m.Bounds())
				for y := m.Bounds().Min.Y; y < m.Bounds().Max.Y; y++ {
					for x := m.Bounds().Min.X; x < m.Bounds().Max.X; x++ {
						got.SetNRGBA64(x, y, fixtures.NRGBA64Of(m.At(x, y)))
					}
				}
				if !bytes.Equal(got.Pix, want.Pix) || got.Bounds() != want.Bounds() {
					t.Errorf("%s as %s decodes to other pixels", g.name, e.name)
				}
			}
		}
	}
}
