package encoder

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"testing"

	"github.com/baton-dev/baton/fixtures"
)

// TestStrictFixtures: every fixture of class strict decodes with Go's own
// decoder (the leniency) and is refused by ValidatePNG/ValidateJPEG as not
// strictly well-formed; every valid fixture passes them (CONTRACT L-6).
func TestStrictFixtures(t *testing.T) {
	strict := 0
	for _, im := range fixtures.Malformed() {
		if im.Want != fixtures.WantStrict {
			continue
		}
		strict++
		if _, _, err := image.Decode(bytes.NewReader(im.Data)); err != nil {
			t.Errorf("%s: Go's decoder rejects it (%v); the fixture shows no leniency", im.Name, err)
		}
		if err := validateStrict(im.Format, im.Data, DefaultLimits()); !errors.Is(err, errStrict) || !errors.Is(err, ErrCorruptMedia) {
			t.Errorf("%s (%s): strict check = %v; want ErrCorruptMedia, not strictly well-formed", im.Name, im.Note, err)
		}
	}
	if strict == 0 {
		t.Fatal("no fixture of class strict")
	}
	for _, im := range fixtures.Images() {
		if err := validateStrict(im.Format, im.Data, DefaultLimits()); err != nil {
			t.Errorf("valid %s: strict check = %v", im.Name, err)
		}
	}
	if err := ValidatePNG(fixtures.LargeImage()); err != nil {
		t.Errorf("LargeImage: %v", err)
	}
}

// TestStrictIgnoresBytesAfterTheEnd: bytes after IEND or EOI change no
// pixel and are ignored (CONTRACT L-6).
func TestStrictIgnoresBytesAfterTheEnd(t *testing.T) {
	for _, name := range []string{"basn6a16.png", "video-001.jpeg", "video-001.progressive.jpeg"} {
		im, err := fixtures.ImageByName(name)
		if err != nil {
			t.Fatal(err)
		}
		tail := append(append([]byte(nil), im.Data...), "trailing bytes \x00\xff\xd8 and more"...)
		got, _, err := Decode(tail, DefaultLimits())
		if err != nil {
			t.Errorf("%s with trailing bytes: %v; want them ignored", name, err)
			continue
		}
		want, _, _ := Decode(im.Data, DefaultLimits())
		if ContentHash(mustPreset(t), got) != ContentHash(mustPreset(t), want) {
			t.Errorf("%s with trailing bytes decodes to other pixels", name)
		}
	}
}

func mustPreset(t *testing.T) Preset {
	p, err := PresetByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestValidatePNGRejects: structure errors crafted in code, each named.
func TestValidatePNGRejects(t *testing.T) {
	good, err := fixtures.ImageByName("basn0g08.png")
	if err != nil {
		t.Fatal(err)
	}
	ihdrEnd := 8 + 12 + 13
	cases := []struct {
		name string
		data []byte
	}{
		{"signature only", []byte("\x89PNG\r\n\x1a\n")},
		{"cut inside IHDR", good.Data[:20]},
		{"IHDR only", good.Data[:ihdrEnd]},
		{"IHDR then IEND", append(append([]byte(nil), good.Data[:ihdrEnd]...), pngChunk("IEND", nil)...)},
		{"IEND with data", append(append([]byte(nil), good.Data[:len(good.Data)-12]...), pngChunk("IEND", []byte{1})...)},
		{"second IHDR", append(append([]byte(nil), good.Data[:ihdrEnd]...), good.Data[8:]...)},
		{"bad chunk type", append(append([]byte(nil), good.Data[:ihdrEnd]...), append(pngChunk("ab1d", nil), good.Data[ihdrEnd:]...)...)},
		{"huge length", append(append([]byte(nil), good.Data[:ihdrEnd]...), 0xff, 0xff, 0xff, 0xff, 'I', 'D', 'A', 'T')},
	}
	for _, c := range cases {
		if err := ValidatePNG(c.data); !errors.Is(err, ErrCorruptMedia) {
			t.Errorf("%s: ValidatePNG = %v; want ErrCorruptMedia", c.name, err)
		}
	}
	// A zlib stream that inflates past what IHDR implies is refused without
	// inflating it all (bounded by IHDR).
	var big bytes.Buffer
	if err := png.Encode(&big, image.NewGray(image.Rect(0, 0, 64, 64))); err != nil {
		t.Fatal(err)
	}
	small := append([]byte(nil), big.Bytes()...)
	small[16+3], small[20+3] = 8, 8 // IHDR width and height 64 -> 8; the stream holds 64 rows of 64
	small = rewriteCRC(small, 8)
	if err := ValidatePNG(small); !errors.Is(err, ErrCorruptMedia) {
		t.Errorf("stream larger than IHDR implies: %v; want ErrCorruptMedia", err)
	}
}

// rewriteCRC recomputes the CRC of the chunk at off.
func rewriteCRC(b []byte, off int) []byte {
	n := int(uint32(b[off])<<24 | uint32(b[off+1])<<16 | uint32(b[off+2])<<8 | uint32(b[off+3]))
	c := pngChunk(string(b[off+4:off+8]), b[off+8:off+8+n])
	copy(b[off:], c)
	return b
}

// TestValidateJPEGRejects: JPEG structure errors crafted in code.
func TestValidateJPEGRejects(t *testing.T) {
	good, err := fixtures.ImageByName("video-001.jpeg")
	if err != nil {
		t.Fatal(err)
	}
	d := good.Data
	cases := []struct {
		name string
		data []byte
	}{
		{"no SOI", d[2:]},
		{"SOI only", d[:2]},
		{"segment length cut", d[:5]},
		{"segment longer than the stream", append(append([]byte(nil), d[:4]...), 0xff, 0xff)},
		{"segment length 1", append([]byte{0xff, 0xd8, 0xff, 0xe0, 0x00, 0x01}, d[2:]...)},
		{"no EOI", d[:len(d)-2]},
		{"stray RST", append([]byte{0xff, 0xd8, 0xff, 0xd0}, d[2:]...)},
		{"second SOI", append([]byte{0xff, 0xd8, 0xff, 0xd8}, d[2:]...)},
		{"fill bytes to the end", append(append([]byte(nil), d[:len(d)-2]...), 0xff, 0xff)},
	}
	for _, c := range cases {
		if err := ValidateJPEG(c.data); !errors.Is(err, ErrCorruptMedia) {
			t.Errorf("%s: ValidateJPEG = %v; want ErrCorruptMedia", c.name, err)
		}
	}
	// Fill bytes before a marker are allowed (ITU T.81 B.1.1.2).
	fill := append([]byte{0xff, 0xd8, 0xff, 0xff}, d[2:]...)
	if err := ValidateJPEG(fill); err != nil {
		t.Errorf("fill bytes before a marker: %v; want accepted", err)
	}
}
