package encoder

import (
	"image"
	"image/color"
	"math"
	"testing"
)

func norm(c int, v16 uint16) float32 {
	return float32((float64(v16)/65535 - CLIPMean[c]) / CLIPStd[c])
}

// At the preset's own size the resize is the identity, so every element can
// be checked against the documented layout: patch py*grid+px, element
// c*P*P + dy*P + dx.
func TestPreprocessLayout(t *testing.T) {
	p := Tiny
	s, ps := p.ImageSize, p.PatchSize
	m := image.NewNRGBA(image.Rect(0, 0, s, s))
	for y := 0; y < s; y++ {
		for x := 0; x < s; x++ {
			m.SetNRGBA(x, y, color.NRGBA{uint8(x), uint8(y), uint8(x*7 + y*3), 255})
		}
	}
	out := Preprocess(p, m)
	if len(out) != p.Patches()*p.InDim {
		t.Fatalf("len %d, want %d", len(out), p.Patches()*p.InDim)
	}
	grid := s / ps
	for y := 0; y < s; y++ {
		for x := 0; x < s; x++ {
			c := m.NRGBAAt(x, y)
			base := ((y/ps)*grid+x/ps)*p.InDim + (y%ps)*ps + x%ps
			for ch, v := range []uint8{c.R, c.G, c.B} {
				if got, want := out[base+ch*ps*ps], norm(ch, uint16(v)*0x101); got != want {
					t.Fatalf("pixel (%d,%d) channel %d: %v, want %v", x, y, ch, got, want)
				}
			}
		}
	}
}

// A uniform image of any size gives the same value everywhere; a fully
// transparent image is composited onto black, whatever its hidden colour.
func TestPreprocessUniformAndTransparent(t *testing.T) {
	tests := []struct {
		name string
		w, h int
		c    color.NRGBA
		want [3]uint16
	}{
		{"opaque upscale", 3, 5, color.NRGBA{255, 128, 0, 255}, [3]uint16{0xffff, 0x8080, 0}},
		{"opaque downscale", 500, 300, color.NRGBA{10, 20, 30, 255}, [3]uint16{0x0a0a, 0x1414, 0x1e1e}},
		{"transparent onto black", 40, 40, color.NRGBA{255, 255, 255, 0}, [3]uint16{0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := image.NewNRGBA(image.Rect(0, 0, tt.w, tt.h))
			for i := 0; i < len(m.Pix); i += 4 {
				m.Pix[i], m.Pix[i+1], m.Pix[i+2], m.Pix[i+3] = tt.c.R, tt.c.G, tt.c.B, tt.c.A
			}
			out := Preprocess(Tiny, m)
			pp := Tiny.PatchSize * Tiny.PatchSize
			for i, v := range out {
				ch := (i % Tiny.InDim) / pp
				if want := norm(ch, tt.want[ch]); math.Abs(float64(v-want)) > 1e-6 {
					t.Fatalf("element %d (channel %d) = %v, want %v", i, ch, v, want)
				}
			}
		})
	}
}

func TestPreprocessEmptyIsBlack(t *testing.T) {
	out := Preprocess(Tiny, image.NewNRGBA(image.Rectangle{}))
	pp := Tiny.PatchSize * Tiny.PatchSize
	for i, v := range out {
		if want := norm((i%Tiny.InDim)/pp, 0); v != want {
			t.Fatalf("element %d = %v, want %v", i, v, want)
		}
	}
}
