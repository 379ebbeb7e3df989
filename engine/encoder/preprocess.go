package encoder

import (
	"image"

	"golang.org/x/image/draw"
)

// CLIP normalisation constants per channel (R, G, B), as published with
// OpenAI's CLIP preprocessing: value = (channel/65535 - Mean) / Std.
var (
	CLIPMean = [3]float64{0.48145466, 0.4578275, 0.40821073}
	CLIPStd  = [3]float64{0.26862954, 0.26130258, 0.27577711}
)

// Preprocess turns img into the encoder input for preset p: a row-major
// float32 matrix of shape [p.Patches(), p.InDim], returned flat
// (len = Patches*InDim).
//
// Steps:
//
//  1. Resize img.Bounds() to p.ImageSize x p.ImageSize (aspect ratio not
//     kept) with golang.org/x/image/draw's BiLinear kernel and the Src
//     operator into a 16-bit premultiplied *image.RGBA64. Resampling happens
//     on premultiplied values, so transparency is composited onto black:
//     the result's R, G, B are colour*alpha; alpha is then dropped.
//  2. Normalise each channel: (v/65535 - CLIPMean[c]) / CLIPStd[c],
//     computed in float64 and rounded to float32.
//  3. Cut into patches of p.PatchSize x p.PatchSize pixels; patch i =
//     py*(ImageSize/PatchSize) + px (row-major over the patch grid). Inside a
//     patch the layout is channel-major: element c*PatchSize*PatchSize +
//     dy*PatchSize + dx holds channel c (0=R, 1=G, 2=B) of pixel (dx, dy)
//     of the patch.
//
// An image with empty bounds gives the normalised all-black input. The result
// is deterministic (same bits for the same image and preset).
func Preprocess(p Preset, img image.Image) []float32 {
	s := p.ImageSize
	dst := image.NewRGBA64(image.Rect(0, 0, s, s))
	if b := img.Bounds(); !b.Empty() {
		draw.BiLinear.Scale(dst, dst.Bounds(), img, b, draw.Src, nil)
	}
	ps := p.PatchSize
	grid := s / ps
	pp := ps * ps
	out := make([]float32, p.Patches()*p.InDim)
	for y := 0; y < grid*ps; y++ {
		py, dy := y/ps, y%ps
		rowPix := dst.Pix[y*dst.Stride:]
		for x := 0; x < grid*ps; x++ {
			px, dx := x/ps, x%ps
			base := (py*grid+px)*p.InDim + dy*ps + dx
			pix := rowPix[8*x : 8*x+6]
			for c := range 3 {
				v := float64(uint16(pix[2*c])<<8 | uint16(pix[2*c+1]))
				out[base+c*pp] = float32((v/65535 - CLIPMean[c]) / CLIPStd[c])
			}
		}
	}
	return out
}
