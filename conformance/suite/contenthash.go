package suite

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"

	"golang.org/x/image/webp"
)

// The suite's own implementation of the CONTRACT H-1 content hash, written
// from the contract's definition (the suite never imports an engine):
//
//	SHA-256 over
//	  "baton.encoder.v1/content-hash\x00"             domain tag, 30 bytes
//	  uint32 big-endian len(preset), preset             the preprocessing preset
//	  uint32 big-endian width, uint32 big-endian height the decoded bounds
//	  per row (top to bottom), per pixel (left to right):
//	    R, G, B, A as big-endian uint16                 image.NRGBA64 Pix order
//
// Pixels are non-premultiplied 16-bit: an 8-bit non-premultiplied colour
// (color.NRGBA) v becomes v*0x101 with its colour kept even at alpha 0, a
// color.NRGBA64 is taken as-is, and any other colour goes through
// color.NRGBA64Model (premultiplied RGBA() divided by alpha).

// contentHashTag starts every content-hash pre-image (CONTRACT H-1).

// errUndecodable is wrapped when the suite's decoders cannot decode a fixture.
var errUndecodable = errors.New("suite: cannot decode the image")

// decodeImage decodes PNG, JPEG, GIF (first frame) or WebP bytes with Go's
// decoders, chosen by the content signature.
func decodeImage(data []byte) (image.Image, error) {
	r := bytes.NewReader(data)
	var img image.Image
	var err error
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		img, err = png.Decode(r)
	case bytes.HasPrefix(data, []byte("\xff\xd8")):
		img, err = jpeg.Decode(r)
	case bytes.HasPrefix(data, []byte("GIF8")):
		img, err = gif.Decode(r)
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		img, err = webp.Decode(r)
	default:
		return nil, fmt.Errorf("%w: unrecognised signature", errUndecodable)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUndecodable, err)
	}
	return img, nil
}
