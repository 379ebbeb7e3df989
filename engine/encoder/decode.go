package encoder

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

// Accepted formats, as returned by Decode.
const (
	FormatPNG  = "png"
	FormatJPEG = "jpeg"
	FormatGIF  = "gif"
	FormatWebP = "webp"
)

type codec struct {
	name         string
	decode       func([]byte) (image.Image, error)
	decodeConfig func([]byte) (image.Config, error)
}

func rd(b []byte) *bytes.Reader { return bytes.NewReader(b) }

var codecs = map[string]codec{
	FormatPNG: {FormatPNG,
		func(b []byte) (image.Image, error) { return png.Decode(rd(b)) },
		func(b []byte) (image.Config, error) { return png.DecodeConfig(rd(b)) }},
	FormatJPEG: {FormatJPEG,
		func(b []byte) (image.Image, error) { return jpeg.Decode(rd(b)) },
		func(b []byte) (image.Config, error) { return jpeg.DecodeConfig(rd(b)) }},
	FormatGIF: {FormatGIF,
		// gif.Decode returns the first frame only.
		func(b []byte) (image.Image, error) { return gif.Decode(rd(b)) },
		func(b []byte) (image.Config, error) { return gif.DecodeConfig(rd(b)) }},
	FormatWebP: {FormatWebP,
		func(b []byte) (image.Image, error) { return webp.Decode(rd(b)) },
		func(b []byte) (image.Config, error) { return webp.DecodeConfig(rd(b)) }},
}

// sniff names the format from the content signature (the same signatures
// image.RegisterFormat uses for these decoders), or "" if none matches.
func sniff(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return FormatPNG
	case bytes.HasPrefix(b, []byte("\xff\xd8")):
		return FormatJPEG
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return FormatGIF
	case len(b) >= 15 && string(b[:4]) == "RIFF" && string(b[8:15]) == "WEBPVP8":
		return FormatWebP
	}
	return ""
}

// Decode decodes one image under the bounds lim (rule L-6), in this order:
//
//  1. no bytes -> ErrCorruptMedia; len(data) > lim.MaxEncodedBytes ->
//     ErrMediaTooLarge;
//  2. the format is chosen from the content signature, never from a declared
//     MIME type: PNG, JPEG (baseline and progressive), GIF (first frame
//     only) or WebP (lossy, lossless, with alpha); anything else ->
//     ErrUnsupportedFormat;
//  3. the header alone is parsed (the decoder's DecodeConfig, the same thing
//     image.DecodeConfig does for a registered format, but without relying on
//     global registration); a header that does not parse -> ErrCorruptMedia;
//     zero width or height -> ErrCorruptMedia; width*height > lim.MaxPixels
//     -> ErrDecompressionBomb, before any pixel is allocated;
//  4. PNG and JPEG pass the strict structure checks of ValidatePNG and
//     ValidateJPEG (IHDR first, every CRC, one complete zlib stream over
//     consecutive IDATs with nothing after it, IEND; SOI, complete segments
//     with nothing between them, EOI), which Go's decoders do not all make
//     -> ErrCorruptMedia; bytes after IEND or EOI are ignored; a JPEG of
//     more than lim.MaxJPEGScans scans -> ErrDecompressionBomb;
//  5. the image is decoded; a decoding failure -> ErrCorruptMedia (truncated
//     or corrupt data) or ErrUnsupportedFormat (a feature Go's decoder does
//     not support). A panic inside a decoder is recovered as ErrCorruptMedia.
//
// It returns the image (for GIF, the first frame; its Bounds may not start at
// (0,0)) and the format name ("png", "jpeg", "gif", "webp"). Errors wrap the
// sentinel and, where there is one, the decoder's error. Zero fields of lim
// take their DefaultLimits values. All errors mean INVALID_ARGUMENT.
func Decode(data []byte, lim Limits) (img image.Image, format string, err error) {
	lim = lim.withDefaults()
	if len(data) == 0 {
		return nil, "", fmt.Errorf("%w: no bytes", ErrCorruptMedia)
	}
	if len(data) > lim.MaxEncodedBytes {
		return nil, "", fmt.Errorf("%w: %d encoded bytes > bound %d", ErrMediaTooLarge, len(data), lim.MaxEncodedBytes)
	}
	format = sniff(data)
	c, ok := codecs[format]
	if !ok {
		return nil, "", fmt.Errorf("%w: unrecognised signature (accepted: png, jpeg, gif, webp)", ErrUnsupportedFormat)
	}
	defer func() {
		if r := recover(); r != nil {
			img, format, err = nil, "", fmt.Errorf("%w: %s decoder panicked: %v", ErrCorruptMedia, c.name, r)
		}
	}()
	cfg, err := c.decodeConfig(data)
	if err != nil {
		return nil, "", decodeError(c.name, "header", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, "", fmt.Errorf("%w: %s header says %dx%d", ErrCorruptMedia, c.name, cfg.Width, cfg.Height)
	}
	if px := int64(cfg.Width) * int64(cfg.Height); px > lim.MaxPixels {
		return nil, "", fmt.Errorf("%w: %s header says %dx%d = %d pixels > bound %d", ErrDecompressionBomb, c.name, cfg.Width, cfg.Height, px, lim.MaxPixels)
	}
	if err := validateStrict(c.name, data, lim); err != nil {
		return nil, "", err
	}
	img, err = c.decode(data)
	if err != nil {
		return nil, "", decodeError(c.name, "data", err)
	}
	b := img.Bounds()
	if b.Empty() || b.Dx() > cfg.Width || b.Dy() > cfg.Height {
		return nil, "", fmt.Errorf("%w: %s decoded to %v, header said %dx%d", ErrCorruptMedia, c.name, b, cfg.Width, cfg.Height)
	}
	return img, c.name, nil
}

// validateStrict runs the L-6 structure check of format (strict.go) where
// Go's decoder is lenient: PNG and JPEG, the required formats; a JPEG's
// scans are bounded by lim.MaxJPEGScans (lim has its defaults filled).
func validateStrict(format string, data []byte, lim Limits) error {
	switch format {
	case FormatPNG:
		return ValidatePNG(data)
	case FormatJPEG:
		return validateJPEG(data, lim.MaxJPEGScans)
	}
	return nil
}

// decodeError classifies a decoder error: the decoders' UnsupportedError
// types are ErrUnsupportedFormat, everything else ErrCorruptMedia.
func decodeError(format, what string, err error) error {
	var pu png.UnsupportedError
	var ju jpeg.UnsupportedError
	if errors.As(err, &pu) || errors.As(err, &ju) {
		return fmt.Errorf("%w: %s %s: %w", ErrUnsupportedFormat, format, what, err)
	}
	return fmt.Errorf("%w: %s %s: %w", ErrCorruptMedia, format, what, err)
}
