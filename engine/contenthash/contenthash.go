package contenthash

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"image"
	"image/color"
)

// ContentHashTag is the domain tag that starts every content-hash pre-image
// (30 bytes, the last one NUL).
const ContentHashTag = "baton.encoder.v1/content-hash\x00"

// ContentHash returns the content hash of img decoded under the
// preprocessing preset named preset (rule H-1): the lowercase hex SHA-256
// (64 characters) of this byte string:
//
//	"baton.encoder.v1/content-hash\x00"         30 bytes, domain tag
//	uint32 big-endian len(preset), preset       the preprocessing preset
//	uint32 big-endian width, uint32 big-endian height   img.Bounds() size
//	for each row y (top to bottom), each column x (left to right):
//	    R, G, B, A as big-endian uint16          8 bytes per pixel
//
// The pixel bytes are those of an image.NRGBA64 of the same size (its Pix
// order): non-premultiplied 16-bit RGBA, so an alpha-0 pixel keeps its colour
// and 8-bit and 16-bit sources never collide unless their pixels are equal.
// The conversion is exact and fixed:
//
//   - *image.NRGBA: each 8-bit channel v becomes v*0x101 (alpha-0 pixels keep
//     their colour);
//   - *image.NRGBA64: channels copied as-is;
//   - a color.NRGBA or color.NRGBA64 value (a PNG palette with tRNS, say):
//     converted exactly the same way, so a transparent palette entry keeps its colour;
//   - any other colour: color.NRGBA64Model.Convert(c), i.e. the
//     premultiplied RGBA() value divided by alpha (alpha-0 gives 0,0,0,0).
//     Fast paths for *image.Gray, *image.RGBA, *image.YCbCr and
//     *image.Paletted compute the same values without the interface calls.
//
// The hash depends on the decoded pixels and the preset, never on the wire
// bytes (rule H-4). It lives in this small package, stdlib only, so that the
// engine's encoder (engine/encoder.ContentHash) and the simulator compute the
// one function without the encoder depending on the language model (engine/lm);
// the test vectors are engine/encoder's testdata/content_hash_vectors.json.
// img must not be nil.
func ContentHash(preset string, img image.Image) string {
	h := sha256.New()
	writeHashHeader(h, preset, img.Bounds())
	writePixels(h, img)
	return hex.EncodeToString(h.Sum(nil))
}

func writeHashHeader(h hash.Hash, preset string, b image.Rectangle) {
	var buf []byte
	buf = append(buf, ContentHashTag...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(preset)))
	buf = append(buf, preset...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(b.Dx()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(b.Dy()))
	h.Write(buf)
}

// putNRGBA64 writes c as 8 big-endian bytes.
func putNRGBA64(dst []byte, c color.NRGBA64) {
	binary.BigEndian.PutUint16(dst[0:], c.R)
	binary.BigEndian.PutUint16(dst[2:], c.G)
	binary.BigEndian.PutUint16(dst[4:], c.B)
	binary.BigEndian.PutUint16(dst[6:], c.A)
}

// unpremultiply is color.NRGBA64Model's conversion of a premultiplied 16-bit
// value (as returned by Color.RGBA).
func unpremultiply(r, g, b, a uint32) color.NRGBA64 {
	switch a {
	case 0xffff:
		return color.NRGBA64{uint16(r), uint16(g), uint16(b), 0xffff}
	case 0:
		return color.NRGBA64{}
	}
	r = (r * 0xffff) / a
	g = (g * 0xffff) / a
	b = (b * 0xffff) / a
	return color.NRGBA64{uint16(r), uint16(g), uint16(b), uint16(a)}
}

// writePixels writes the pixel part of the pre-image, one row at a time.
func writePixels(h hash.Hash, img image.Image) {
	b := img.Bounds()
	w := b.Dx()
	if w <= 0 || b.Dy() <= 0 {
		return
	}
	row := make([]byte, 8*w)
	var pal []color.NRGBA64
	if m, ok := img.(*image.Paletted); ok {
		pal = make([]color.NRGBA64, len(m.Palette))
		for i, c := range m.Palette {
			pal[i] = exactNRGBA64(c)
		}
	}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		switch m := img.(type) {
		case *image.NRGBA:
			src := m.Pix[m.PixOffset(b.Min.X, y):][:4*w]
			for i, v := range src {
				row[2*i], row[2*i+1] = v, v // v*0x101, big-endian
			}
		case *image.NRGBA64:
			copy(row, m.Pix[m.PixOffset(b.Min.X, y):][:8*w])
		case *image.Gray:
			src := m.Pix[m.PixOffset(b.Min.X, y):][:w]
			for i, v := range src {
				o := row[8*i : 8*i+8]
				o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7] = v, v, v, v, v, v, 0xff, 0xff
			}
		case *image.RGBA:
			src := m.Pix[m.PixOffset(b.Min.X, y):][:4*w]
			for i := 0; i < w; i++ {
				s := src[4*i : 4*i+4]
				c := unpremultiply(uint32(s[0])*0x101, uint32(s[1])*0x101, uint32(s[2])*0x101, uint32(s[3])*0x101)
				putNRGBA64(row[8*i:], c)
			}
		case *image.YCbCr:
			for i := 0; i < w; i++ {
				r, g, bl, _ := m.YCbCrAt(b.Min.X+i, y).RGBA() // opaque
				putNRGBA64(row[8*i:], color.NRGBA64{uint16(r), uint16(g), uint16(bl), 0xffff})
			}
		case *image.Paletted:
			// Indices outside the palette (which no decoder produces) hash as
			// transparent black.
			src := m.Pix[m.PixOffset(b.Min.X, y):][:w]
			for i, idx := range src {
				var c color.NRGBA64
				if int(idx) < len(pal) {
					c = pal[idx]
				}
				putNRGBA64(row[8*i:], c)
			}
		default:
			for i := 0; i < w; i++ {
				putNRGBA64(row[8*i:], exactNRGBA64(img.At(b.Min.X+i, y)))
			}
		}
		h.Write(row)
	}
}

// exactNRGBA64 converts one colour for the hash: non-premultiplied colours
// exactly (8-bit v -> v*0x101, alpha-0 colour kept), others through
// color.NRGBA64Model.
func exactNRGBA64(c color.Color) color.NRGBA64 {
	switch c := c.(type) {
	case color.NRGBA:
		return color.NRGBA64{R: uint16(c.R) * 0x101, G: uint16(c.G) * 0x101, B: uint16(c.B) * 0x101, A: uint16(c.A) * 0x101}
	case color.NRGBA64:
		return c
	default:
		return color.NRGBA64Model.Convert(c).(color.NRGBA64)
	}
}
