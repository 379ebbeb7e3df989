package encoder

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// DataURIMIMETypes are the media types DecodeDataURI accepts ("image/jpg" is
// a common misspelling of "image/jpeg" and is accepted as such).
var DataURIMIMETypes = []string{"image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp"}

// DecodeDataURI parses a data URI of the form
// "data:<image type>[;param=value]*;base64,<payload>" (RFC 2397, base64 form
// only) and returns the decoded payload bytes and the media type, lowercased
// (e.g. "image/png"). Checks, in order:
//
//   - len(uri) > lim.MaxDataURIBytes -> ErrMediaTooLarge (before parsing, L-6);
//   - no "data:" scheme (case-insensitive), no comma, no ";base64" as the
//     last parameter, an empty payload, or invalid base64 (standard alphabet,
//     padded or unpadded) -> ErrBadDataURI;
//   - a media type that is not an image type -> ErrBadDataURI; an image type
//     not in DataURIMIMETypes -> ErrUnsupportedFormat;
//   - a payload that would decode to more than lim.MaxEncodedBytes ->
//     ErrMediaTooLarge (computed from the base64 length, before decoding).
//
// The media type is advisory: Decode picks the decoder from the payload's
// signature, so a data URI and the raw bytes it carries decode, hash and
// encode identically (rule H-4). Zero fields of lim take their DefaultLimits
// values. All errors mean INVALID_ARGUMENT.
func DecodeDataURI(uri string, lim Limits) (data []byte, mime string, err error) {
	lim = lim.withDefaults()
	if len(uri) > lim.MaxDataURIBytes {
		return nil, "", fmt.Errorf("%w: data URI of %d bytes > bound %d", ErrMediaTooLarge, len(uri), lim.MaxDataURIBytes)
	}
	const scheme = "data:"
	if len(uri) < len(scheme) || !strings.EqualFold(uri[:len(scheme)], scheme) {
		return nil, "", fmt.Errorf("%w: no data: scheme", ErrBadDataURI)
	}
	header, payload, ok := strings.Cut(uri[len(scheme):], ",")
	if !ok {
		return nil, "", fmt.Errorf("%w: no comma after the media type", ErrBadDataURI)
	}
	params := strings.Split(header, ";")
	if len(params) < 2 || !strings.EqualFold(params[len(params)-1], "base64") {
		return nil, "", fmt.Errorf("%w: only the ;base64 form is accepted", ErrBadDataURI)
	}
	mime = strings.ToLower(strings.TrimSpace(params[0]))
	if !strings.HasPrefix(mime, "image/") {
		return nil, "", fmt.Errorf("%w: media type %q is not an image type", ErrBadDataURI, mime)
	}
	accepted := false
	for _, m := range DataURIMIMETypes {
		accepted = accepted || m == mime
	}
	if !accepted {
		return nil, "", fmt.Errorf("%w: data URI media type %q (accepted: %s)", ErrUnsupportedFormat, mime, strings.Join(DataURIMIMETypes, ", "))
	}
	if payload == "" {
		return nil, "", fmt.Errorf("%w: empty payload", ErrBadDataURI)
	}
	enc := base64.StdEncoding
	if !strings.HasSuffix(payload, "=") && len(payload)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	if n := enc.DecodedLen(len(payload)); n > lim.MaxEncodedBytes+2 { // +2: DecodedLen rounds up padding
		return nil, "", fmt.Errorf("%w: payload of about %d bytes > bound %d", ErrMediaTooLarge, n, lim.MaxEncodedBytes)
	}
	data, err = enc.DecodeString(payload)
	if err != nil {
		return nil, "", fmt.Errorf("%w: base64: %w", ErrBadDataURI, err)
	}
	if len(data) == 0 {
		// Only line breaks, which base64 skips (found by FuzzDecodeDataURI).
		return nil, "", fmt.Errorf("%w: empty payload", ErrBadDataURI)
	}
	if len(data) > lim.MaxEncodedBytes {
		return nil, "", fmt.Errorf("%w: payload of %d bytes > bound %d", ErrMediaTooLarge, len(data), lim.MaxEncodedBytes)
	}
	return data, mime, nil
}
