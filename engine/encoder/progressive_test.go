package encoder

import (
	"bytes"
	"errors"
	"image"
	"image/jpeg"
	"testing"

	"github.com/baton-dev/baton/fixtures"
)

// TestJPEGScanBound: a progressive JPEG of MaxJPEGScans scans decodes; one
// more scan is refused before any pixel is decoded, as a bound
// (ErrDecompressionBomb, INVALID_ARGUMENT at L-6), however few bytes the
// scans take (attack F1: 20000 empty scans of a 6000x6000 image held the
// decode for six minutes).
func TestJPEGScanBound(t *testing.T) {
	ok := fixtures.ProgressiveJPEG(64, 48, 1, 1, MaxJPEGScans-1)
	img, format, err := Decode(ok, DefaultLimits())
	if err != nil || format != FormatJPEG || img.Bounds() != image.Rect(0, 0, 64, 48) {
		t.Fatalf("Decode of a %d-scan progressive JPEG = %v, %q, %v; want a 64x48 jpeg", MaxJPEGScans, img, format, err)
	}
	bomb := fixtures.ProgressiveJPEG(64, 48, 1, 1, MaxJPEGScans)
	if _, _, err := Decode(bomb, DefaultLimits()); !errors.Is(err, ErrDecompressionBomb) {
		t.Errorf("Decode of a %d-scan progressive JPEG = %v; want ErrDecompressionBomb", MaxJPEGScans+1, err)
	}
	if err := ValidateJPEG(fixtures.ProgressiveJPEG(6000, 6000, 1, 1, 20000)); !errors.Is(err, ErrDecompressionBomb) {
		t.Errorf("ValidateJPEG of attack F1's 20000-scan image = %v; want ErrDecompressionBomb", err)
	}
}

// TestJPEGScanBoundLimit: Limits.MaxJPEGScans bounds Decode's scans; zero
// or negative takes MaxJPEGScans (there is no unlimited), a lower one
// refuses sooner, and a raised one (the se4-no-jpeg-scan-bound mutant's)
// lets the scans through to the decoder.
func TestJPEGScanBoundLimit(t *testing.T) {
	over := fixtures.ProgressiveJPEG(64, 48, 1, 1, MaxJPEGScans) // MaxJPEGScans+1 scans
	for _, n := range []int{0, -1} {
		if _, _, err := Decode(over, Limits{MaxJPEGScans: n}); !errors.Is(err, ErrDecompressionBomb) {
			t.Errorf("Decode(%d scans, MaxJPEGScans %d) = %v; want ErrDecompressionBomb (the default bound)", MaxJPEGScans+1, n, err)
		}
	}
	if got := (Limits{MaxJPEGScans: -5}).withDefaults().MaxJPEGScans; got != MaxJPEGScans {
		t.Errorf("Limits{MaxJPEGScans: -5} with defaults = %d; want %d", got, MaxJPEGScans)
	}
	if _, _, err := Decode(fixtures.ProgressiveJPEG(64, 48, 1, 1, 3), Limits{MaxJPEGScans: 3}); !errors.Is(err, ErrDecompressionBomb) {
		t.Errorf("Decode(4 scans, MaxJPEGScans 3) = %v; want ErrDecompressionBomb", err)
	}
	if img, _, err := Decode(fixtures.ProgressiveJPEG(64, 48, 1, 1, 3), Limits{MaxJPEGScans: 4}); err != nil || img.Bounds() != image.Rect(0, 0, 64, 48) {
		t.Errorf("Decode(4 scans, MaxJPEGScans 4) = %v, %v; want a 64x48 image", img, err)
	}
	if _, _, err := Decode(over, Limits{MaxJPEGScans: 1 << 30}); err != nil {
		t.Errorf("Decode(%d scans, MaxJPEGScans 2^30) = %v; want it decoded", MaxJPEGScans+1, err)
	}
	if err := ValidateJPEG(over); !errors.Is(err, ErrDecompressionBomb) {
		t.Errorf("ValidateJPEG(%d scans) = %v; want ErrDecompressionBomb (it keeps the default bound)", MaxJPEGScans+1, err)
	}
}

// TestDecodePeakBytes: every image is charged 8 bytes per pixel, and a
// progressive JPEG its coefficients and samples when that is more: 4:4:4
// YCbCr 15 bytes a pixel, CMYK 20, over whole MCUs (attack F3).
func TestDecodePeakBytes(t *testing.T) {
	var baseline bytes.Buffer
	if err := jpeg.Encode(&baseline, image.NewRGBA(image.Rect(0, 0, 640, 480)), nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		w, h int
		want int64
	}{
		{"baseline JPEG", baseline.Bytes(), 640, 480, 640 * 480 * 8},
		{"progressive gray", fixtures.ProgressiveJPEG(640, 480, 1, 1, 1), 640, 480, 640 * 480 * 8}, // 5 bytes a pixel < 8
		{"progressive YCbCr 4:2:0", fixtures.ProgressiveJPEG(640, 480, 3, 2, 1), 640, 480, 640 * 480 * 8},
		{"progressive YCbCr 4:4:4", fixtures.ProgressiveJPEG(640, 480, 3, 1, 1), 640, 480, 640 * 480 * 15},
		{"progressive CMYK", fixtures.ProgressiveJPEG(640, 480, 4, 1, 1), 640, 480, 640 * 480 * 20},
		{"progressive CMYK, partial MCUs", fixtures.ProgressiveJPEG(9, 9, 4, 1, 1), 9, 9, 16 * 16 * 20},
		{"not an image", []byte("hello"), 10, 10, 10 * 10 * 8},
		{"no dimensions", fixtures.ProgressiveJPEG(8, 8, 4, 1, 1), 0, 8, 0},
	} {
		if got := DecodePeakBytes(c.data, c.w, c.h); got != c.want {
			t.Errorf("%s: DecodePeakBytes = %d; want %d", c.name, got, c.want)
		}
	}
	// The generator's images are what the charges assume: they decode.
	for _, comps := range []int{1, 3, 4} {
		if _, _, err := Decode(fixtures.ProgressiveJPEG(40, 24, comps, 1, 2), DefaultLimits()); err != nil {
			t.Errorf("progressive JPEG of %d components: %v", comps, err)
		}
	}
	if _, _, err := Decode(fixtures.ProgressiveJPEG(40, 24, 3, 2, 2), DefaultLimits()); err != nil {
		t.Errorf("progressive JPEG 4:2:0: %v", err)
	}
}

// TestJPEGFrameHeaderMalformed: a frame header that is cut off, names no
// component, has a sampling factor out of 1..4, or comes after the first
// scan is not read (DecodePeakBytes then charges the default).
func TestJPEGFrameHeaderMalformed(t *testing.T) {
	good := fixtures.ProgressiveJPEG(16, 16, 3, 1, 1)
	if _, ok := jpegFrameHeader(good); !ok {
		t.Fatal("the generator's frame header is not read")
	}
	sofAt := bytes.Index(good, []byte{0xff, 0xc2})
	for name, data := range map[string][]byte{
		"empty":             nil,
		"SOI only":          good[:2],
		"cut in the length": good[:sofAt+3],
		"cut in the body":   good[:sofAt+10],
		"no components": func() []byte {
			b := bytes.Clone(good)
			b[sofAt+9] = 0
			return b
		}(),
		"sampling 0": func() []byte {
			b := bytes.Clone(good)
			b[sofAt+11] = 0x01
			return b
		}(),
		"sampling 5": func() []byte {
			b := bytes.Clone(good)
			b[sofAt+11] = 0x51
			return b
		}(),
		"scan first": append([]byte{0xff, 0xd8, 0xff, 0xda, 0, 2}, good[2:]...),
	} {
		if f, ok := jpegFrameHeader(data); ok {
			t.Errorf("%s: read %+v; want not read", name, f)
		}
	}
}
