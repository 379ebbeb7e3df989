package encoder

import "errors"

// Sentinel errors for rejected media. Every one of them means gRPC
// INVALID_ARGUMENT on the wire (rule L-6 for the bounds, SU-4 for media that
// does not decode); functions wrap them with %w and a detail, so test with
// errors.Is.
var (
	// ErrMediaTooLarge: the encoded bytes exceed Limits.MaxEncodedBytes, or a
	// data URI exceeds Limits.MaxDataURIBytes (rule L-6). Checked before any
	// parsing.
	ErrMediaTooLarge = errors.New("encoder: media too large (L-6)")
	// ErrDecompressionBomb: the header claims more than Limits.MaxPixels
	// pixels (rule L-6); detected from the header, before the pixels are
	// allocated or decoded.
	ErrDecompressionBomb = errors.New("encoder: decoded size over the pixel bound, decompression bomb (L-6)")
	// ErrUnsupportedFormat: not PNG, JPEG, GIF or WebP (by content
	// signature), a feature of those formats that Go's decoders do not
	// support (e.g. 12-bit or arithmetic-coded JPEG), or a data URI whose
	// media type is not an accepted image type.
	ErrUnsupportedFormat = errors.New("encoder: unsupported media format")
	// ErrCorruptMedia: the bytes claim a supported format but do not decode:
	// truncated data, bad checksums, garbage, zero width or height, or no
	// bytes at all.
	ErrCorruptMedia = errors.New("encoder: corrupt media")
	// ErrBadDataURI: a data URI that is not "data:<image type>;base64,<payload>"
	// with valid base64 and a non-empty payload.
	ErrBadDataURI = errors.New("encoder: malformed data URI")
)
