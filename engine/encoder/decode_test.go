package encoder

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/png"
	"testing"

	"github.com/baton-dev/baton/fixtures"
)

func TestDecodeFixtures(t *testing.T) {
	for _, im := range fixtures.Images() {
		m, format, err := Decode(im.Data, DefaultLimits())
		if err != nil {
			t.Errorf("%s: %v", im.Name, err)
			continue
		}
		if format != im.Format || m.Bounds().Dx() != im.Width || m.Bounds().Dy() != im.Height {
			t.Errorf("%s: %s %v, want %s %dx%d", im.Name, format, m.Bounds(), im.Format, im.Width, im.Height)
		}
	}
}

// wantSentinel maps a fixture's malformed class to the sentinel (L-6, SU-4).
var wantSentinel = map[string]error{
	fixtures.WantTruncated:   ErrCorruptMedia,
	fixtures.WantCorrupt:     ErrCorruptMedia,
	fixtures.WantBomb:        ErrDecompressionBomb,
	fixtures.WantUnsupported: ErrUnsupportedFormat,
	fixtures.WantStrict:      ErrCorruptMedia, // strict.go: Go's decoder alone would accept it
}

func TestDecodeMalformedFixtures_L6(t *testing.T) {
	for _, im := range fixtures.Malformed() {
		want, ok := wantSentinel[im.Want]
		if !ok {
			t.Fatalf("%s: no sentinel for class %q", im.Name, im.Want)
		}
		_, _, err := Decode(im.Data, DefaultLimits())
		if !errors.Is(err, want) {
			t.Errorf("%s (%s): error %v, want %v", im.Name, im.Want, err, want)
		}
	}
}

func pngChunk(typ string, data []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	b = append(b, typ...)
	b = append(b, data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte(typ), data...)))
}

// pngHeaderOnly is a PNG signature and an IHDR of w x h, 8-bit RGB.
func pngHeaderOnly(w, h uint32) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 2, 0, 0, 0)
	return append([]byte("\x89PNG\r\n\x1a\n"), pngChunk("IHDR", ihdr)...)
}

func TestDecodeRejects_L6(t *testing.T) {
	jpg, err := fixtures.ImageByName("video-001.jpeg")
	if err != nil {
		t.Fatal(err)
	}
	pngFix, err := fixtures.ImageByName("video-001.png")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		lim  Limits
		want error
	}{
		{"empty", nil, Limits{}, ErrCorruptMedia},
		{"unknown format", []byte("hello, I am not an image"), Limits{}, ErrUnsupportedFormat},
		{"single byte", []byte{0x89}, Limits{}, ErrUnsupportedFormat},
		{"png signature only", []byte("\x89PNG\r\n\x1a\n"), Limits{}, ErrCorruptMedia},
		{"jpeg SOI only", []byte{0xff, 0xd8}, Limits{}, ErrCorruptMedia},
		{"riff not webp", []byte("RIFF\x10\x00\x00\x00WAVEfmt "), Limits{}, ErrUnsupportedFormat},
		{"png zero width", pngHeaderOnly(0, 10), Limits{}, ErrCorruptMedia},
		{"png header claims 7000x7000 (49 MP)", pngHeaderOnly(7000, 7000), Limits{}, ErrDecompressionBomb},
		{"png over a small pixel bound", pngFix.Data, Limits{MaxPixels: 150*103 - 1}, ErrDecompressionBomb},
		{"jpeg over the encoded-byte bound", jpg.Data, Limits{MaxEncodedBytes: len(jpg.Data) - 1}, ErrMediaTooLarge},
		{"jpeg SOF3 (lossless, unsupported)", []byte{0xff, 0xd8, 0xff, 0xc3, 0x00, 0x0b, 8, 0, 1, 0, 1, 1, 1, 0x11, 0}, Limits{}, ErrUnsupportedFormat},
		{"jpeg truncated to 100 bytes", jpg.Data[:100], Limits{}, ErrCorruptMedia},
		{"png with a flipped IDAT byte", flipByte(pngFix.Data, len(pngFix.Data)/2), Limits{}, ErrCorruptMedia},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, format, err := Decode(tt.data, tt.lim)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if m != nil || format != "" {
				t.Errorf("got image %T and format %q with an error", m, format)
			}
		})
	}
}

func flipByte(b []byte, i int) []byte {
	out := bytes.Clone(b)
	out[i] ^= 0xff
	return out
}

func TestDecodeAtBounds_L6(t *testing.T) {
	im, err := fixtures.ImageByName("video-001.png")
	if err != nil {
		t.Fatal(err)
	}
	// Exactly at both bounds is accepted.
	lim := Limits{MaxEncodedBytes: len(im.Data), MaxPixels: 150 * 103}
	if _, _, err := Decode(im.Data, lim); err != nil {
		t.Errorf("at the bounds: %v", err)
	}
}

// TestDecodeLargeImage_L6: a 12 MP image is inside the default bounds.
func TestDecodeLargeImage_L6(t *testing.T) {
	m, format, err := Decode(fixtures.LargeImage(), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if format != FormatPNG || m.Bounds().Dx() != fixtures.LargeImageWidth || m.Bounds().Dy() != fixtures.LargeImageHeight {
		t.Errorf("decoded %s %v", format, m.Bounds())
	}
}

func TestDecodeGIFFirstFrame(t *testing.T) {
	im, err := fixtures.ImageByName("video-001.gif")
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := Decode(im.Data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.(*image.Paletted); !ok {
		t.Errorf("GIF decoded to %T, want *image.Paletted", m)
	}
}

func TestDecodeRoundTripPNG16(t *testing.T) {
	src := image.NewNRGBA64(image.Rect(0, 0, 3, 2))
	for i := range src.Pix {
		src.Pix[i] = byte(i * 37)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, src); err != nil {
		t.Fatal(err)
	}
	m, _, err := Decode(buf.Bytes(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if ContentHash(Tiny, m) != ContentHash(Tiny, src) {
		t.Error("16-bit PNG round trip changed the content hash")
	}
}
