package encoder

import (
	"encoding/base64"
	"errors"
	"testing"

	"github.com/baton-dev/baton/fixtures"
)

// Fuzz targets of the encoder's untrusted parsers: data URIs and media
// decoding (PNG, JPEG, GIF, WebP, with the strict L-6 checks). The seeds
// (here and under testdata/fuzz/) run with `go test`; `make fuzz` fuzzes
// each for FUZZTIME.

// fuzzLimits keep one fuzz execution small: 64 KiB of encoded bytes,
// 256x256 pixels.
var fuzzLimits = Limits{MaxEncodedBytes: 64 << 10, MaxPixels: 256 * 256, MaxDataURIBytes: 96 << 10}

// FuzzDecodeDataURI: DecodeDataURI never panics, refuses with its
// sentinels, and what it accepts is within the bounds and the accepted
// media types.
func FuzzDecodeDataURI(f *testing.F) {
	png, _ := fixtures.ImageByName("one-pixel.png")
	f.Add("data:image/png;base64," + base64.StdEncoding.EncodeToString(png.Data))
	f.Add("DATA:image/JPG;charset=x;BASE64,/9j/")
	f.Add("data:image/png;base64,iVBORw0KGgo")
	f.Add("data:text/plain;base64,aGk=")
	f.Add("data:image/png,raw")
	f.Fuzz(func(t *testing.T, uri string) {
		data, mime, err := DecodeDataURI(uri, fuzzLimits)
		if err != nil {
			if !errors.Is(err, ErrBadDataURI) && !errors.Is(err, ErrMediaTooLarge) && !errors.Is(err, ErrUnsupportedFormat) {
				t.Fatalf("DecodeDataURI error %v wraps no sentinel", err)
			}
			return
		}
		if len(data) == 0 || len(data) > fuzzLimits.MaxEncodedBytes {
			t.Fatalf("accepted %d payload bytes (bound %d)", len(data), fuzzLimits.MaxEncodedBytes)
		}
		accepted := false
		for _, m := range DataURIMIMETypes {
			accepted = accepted || m == mime
		}
		if !accepted {
			t.Fatalf("accepted media type %q", mime)
		}
	})
}

// FuzzDecode: Decode never panics (a decoder's panic is recovered), never
// decodes past the pixel bound, refuses with its sentinels, and an image
// it accepts has the dimensions its header declares (at most), passed the
// strict checks and hashes.
func FuzzDecode(f *testing.F) {
	for _, im := range append(fixtures.Images(), fixtures.Malformed()...) {
		if len(im.Data) <= fuzzLimits.MaxEncodedBytes {
			f.Add(im.Data)
		}
	}
	preset, err := PresetByName("tiny")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		img, format, err := Decode(b, fuzzLimits)
		if err != nil {
			if !errors.Is(err, ErrCorruptMedia) && !errors.Is(err, ErrMediaTooLarge) && !errors.Is(err, ErrUnsupportedFormat) && !errors.Is(err, ErrDecompressionBomb) {
				t.Fatalf("Decode error %v wraps no sentinel", err)
			}
			return
		}
		bd := img.Bounds()
		if bd.Empty() || int64(bd.Dx())*int64(bd.Dy()) > fuzzLimits.MaxPixels {
			t.Fatalf("accepted a %s image of bounds %v (bound %d pixels)", format, bd, fuzzLimits.MaxPixels)
		}
		if err := validateStrict(format, b, DefaultLimits()); err != nil {
			t.Fatalf("accepted a %s that fails the strict check: %v", format, err)
		}
		if h := ContentHash(preset, img); !IsContentHash(h) {
			t.Fatalf("content hash %q", h)
		}
	})
}

// FuzzValidatePNG: the strict PNG check never panics on any bytes after a
// PNG signature and refuses with ErrCorruptMedia; it inflates at most what
// the header implies (the bound is in the code; the fuzzer finds panics
// and hangs).
func FuzzValidatePNG(f *testing.F) {
	for _, im := range append(fixtures.Images(), fixtures.Malformed()...) {
		if im.Format == FormatPNG && len(im.Data) <= 64<<10 {
			f.Add(im.Data)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cfgOK := true
		if len(b) >= 24 {
			// Keep one execution small: skip headers that declare more
			// pixels than the fuzz bound (Decode checks that first).
			w := uint64(b[16])<<24 | uint64(b[17])<<16 | uint64(b[18])<<8 | uint64(b[19])
			h := uint64(b[20])<<24 | uint64(b[21])<<16 | uint64(b[22])<<8 | uint64(b[23])
			cfgOK = w*h <= uint64(fuzzLimits.MaxPixels)
		}
		if !cfgOK {
			return
		}
		if err := ValidatePNG(b); err != nil && !errors.Is(err, ErrCorruptMedia) {
			t.Fatalf("ValidatePNG error %v does not wrap ErrCorruptMedia", err)
		}
	})
}

// FuzzDecodePeakBytes: the frame-header read behind the decode budget's
// charge never panics, and the charge is never below the default 8 bytes a
// pixel, nor above the 20 a pixel that 4:4:4:4 coefficients and samples
// take over whole MCUs of the largest sampling factors.
func FuzzDecodePeakBytes(f *testing.F) {
	f.Add(fixtures.ProgressiveJPEG(16, 16, 3, 1, 1), 16, 16)
	f.Add(fixtures.ProgressiveJPEG(9, 7, 4, 1, 0), 9, 7)
	f.Add(fixtures.ProgressiveJPEG(33, 17, 3, 2, 1), 33, 17)
	f.Add([]byte{0xff, 0xd8, 0xff, 0xc2, 0, 5, 8}, 1, 1)
	f.Fuzz(func(t *testing.T, data []byte, w, h int) {
		if w <= 0 || h <= 0 || w > 1<<16 || h > 1<<16 {
			return
		}
		got := DecodePeakBytes(data, w, h)
		base := int64(w) * int64(h) * DecodedBytesPerPixel
		padded := int64((w+31)/32*32) * int64((h+31)/32*32) // MCUs of sampling factor 4: 32 pixels
		if got < base || got > max(base, padded*20*4*4) {
			t.Fatalf("DecodePeakBytes(%dx%d) = %d; want within [%d, %d]", w, h, got, base, padded*20*16)
		}
	})
}
