package encoder

// Limits bounds client media before decoding (rule L-6).
//
// MaxEncodedBytes bounds the encoded (wire) bytes of one image, raw or after
// base64 decoding of a data URI. MaxPixels bounds width*height as declared by
// the image header; it is checked before the pixels are allocated, so a
// decompression bomb costs only its header. MaxDataURIBytes bounds the length
// of a data URI string in bytes, checked before it is parsed. MaxJPEGScans
// bounds a JPEG's scans (SOS segments), counted by the structure check
// before the pixels are decoded (each scan is a pass over the image).
//
// A zero or negative field takes its DefaultLimits value: there is no
// "unlimited".
type Limits struct {
	// MaxEncodedBytes bounds one image's encoded bytes (default
	// DefaultMaxEncodedBytes, 20 MiB).
	MaxEncodedBytes int
	// MaxPixels bounds the header's width*height (default DefaultMaxPixels,
	// 40 M).
	MaxPixels int64
	// MaxDataURIBytes bounds a data URI's length in bytes (default
	// DefaultMaxDataURIBytes, 28 MiB).
	MaxDataURIBytes int
	// MaxJPEGScans bounds the scans of one JPEG (default MaxJPEGScans, 32;
	// CONTRACT SE-4: decode CPU is bounded). Only the se4-no-jpeg-scan-bound
	// mutant (conformance/mutants) raises it far above what any encoder
	// writes.
	MaxJPEGScans int
}

// Default bounds. 20 MiB of encoded bytes; 40 megapixels (so a 4000x3000
// = 12 MP camera image is accepted, and a decoded image takes at most 40M *
// 8 bytes = 320 MB as 16-bit RGBA); 28 MiB of data URI (the base64 of
// 20 MiB is 26.7 MiB, plus room for the header). The scan bound's default
// is MaxJPEGScans (strict.go).
const (
	DefaultMaxEncodedBytes = 20 << 20
	DefaultMaxPixels       = 40_000_000
	DefaultMaxDataURIBytes = 28 << 20
)

// DefaultLimits returns the default bounds: 20 MiB encoded, 40 megapixels,
// 28 MiB data URI, MaxJPEGScans scans.
func DefaultLimits() Limits {
	return Limits{
		MaxEncodedBytes: DefaultMaxEncodedBytes,
		MaxPixels:       DefaultMaxPixels,
		MaxDataURIBytes: DefaultMaxDataURIBytes,
		MaxJPEGScans:    MaxJPEGScans,
	}
}

// withDefaults replaces zero or negative fields by their defaults.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxEncodedBytes <= 0 {
		l.MaxEncodedBytes = d.MaxEncodedBytes
	}
	if l.MaxPixels <= 0 {
		l.MaxPixels = d.MaxPixels
	}
	if l.MaxDataURIBytes <= 0 {
		l.MaxDataURIBytes = d.MaxDataURIBytes
	}
	if l.MaxJPEGScans <= 0 {
		l.MaxJPEGScans = d.MaxJPEGScans
	}
	return l
}
