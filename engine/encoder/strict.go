package encoder

import (
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// The strict structure checks of rule L-6, run before Go's decoders, which
// are lenient where the contract is not (CONTRACT L-6: "a lenient one could
// give E and the baseline different pixels"). Measured against Go 1.26:
// image/png accepts a chunk before IHDR, bytes after the end of the zlib
// stream inside the last IDAT, and IDAT chunks after the stream ended;
// image/jpeg skips extraneous bytes between marker segments. Everything the
// decoders already refuse (a bad CRC, a bad Adler-32, too much or too little
// pixel data, a missing IEND or EOI, a truncated segment) is refused here
// too, before any pixel is allocated.

// maxPNGChunkBytes is the largest chunk length PNG allows (2^31-1).
const maxPNGChunkBytes = 1<<31 - 1

// pngHeader is the part of IHDR the structure check needs.
type pngHeader struct {
	width, height     uint32
	bitDepth, colType byte
	interlaced        bool
}

// channels of each PNG colour type; 0 for an invalid one.
func pngChannels(colType byte) int {
	switch colType {
	case 0, 3:
		return 1
	case 2:
		return 3
	case 4:
		return 2
	case 6:
		return 4
	}
	return 0
}

// rawBytes is the size of the decompressed image data IHDR implies: per
// scanline one filter byte and the packed pixels, per Adam7 pass when
// interlaced (PNG specification, sections 7.2 and 8.2).
func (h pngHeader) rawBytes() int64 {
	bpp := int64(pngChannels(h.colType)) * int64(h.bitDepth)
	lines := func(w, rows int64) int64 {
		if w <= 0 || rows <= 0 {
			return 0
		}
		return rows * (1 + (w*bpp+7)/8)
	}
	w, hh := int64(h.width), int64(h.height)
	if !h.interlaced {
		return lines(w, hh)
	}
	var n int64
	for _, p := range [7][4]int64{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
		x0, y0, dx, dy := p[0], p[1], p[2], p[3]
		n += lines((w-x0+dx-1)/dx, (hh-y0+dy-1)/dy)
	}
	return n
}

// errStrict is wrapped by every structure error (then ErrCorruptMedia).
var errStrict = errors.New("not strictly well-formed")

// ValidatePNG checks the structure of a PNG stream (CONTRACT L-6): the
// signature; IHDR first (13 bytes); every chunk complete with its CRC-32
// right, up to and including IEND (empty), which must be present; the IDAT
// chunks consecutive; their data one complete zlib stream whose Adler-32
// is right, which inflates to exactly the image data IHDR implies, with no
// byte after it and no IDAT after the run. Bytes after IEND are ignored.
// The stream is inflated once, in a small buffer, never past the size IHDR
// implies (so check IHDR's dimensions against the pixel bound first).
// Errors wrap ErrCorruptMedia (a cut-off stream included: both are
// INVALID_ARGUMENT).
func ValidatePNG(b []byte) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: png %w: %s", ErrCorruptMedia, errStrict, fmt.Sprintf(format, args...))
	}
	const sig = "\x89PNG\r\n\x1a\n"
	if len(b) < len(sig) || string(b[:len(sig)]) != sig {
		return bad("no PNG signature")
	}
	var (
		hdr       pngHeader
		idat      [][]byte
		idatState = 0 // 0 none yet, 1 in the run, 2 after it
		seenIEND  bool
	)
	for off, i := len(sig), 0; !seenIEND; i++ {
		if len(b)-off < 12 {
			return bad("chunk %d at byte %d: %d bytes left, a chunk needs at least 12 (no IEND)", i, off, len(b)-off)
		}
		n := binary.BigEndian.Uint32(b[off:])
		typ := b[off+4 : off+8]
		if n > maxPNGChunkBytes {
			return bad("chunk %d length %d > 2^31-1", i, n)
		}
		for _, c := range typ {
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
				return bad("chunk %d type %q is not four letters", i, typ)
			}
		}
		end := int64(off) + 8 + int64(n) + 4
		if end > int64(len(b)) {
			return bad("chunk %d (%s) of %d bytes ends past the end of the stream", i, typ, n)
		}
		data := b[off+8 : off+8+int(n)]
		if got, want := crc32.ChecksumIEEE(b[off+4:off+8+int(n)]), binary.BigEndian.Uint32(b[off+8+int(n):]); got != want {
			return bad("chunk %d (%s): CRC-32 %08x, the chunk says %08x", i, typ, got, want)
		}
		name := string(typ)
		switch {
		case i == 0 && name != "IHDR":
			return bad("the first chunk is %s; IHDR must be first", name)
		case name == "IHDR":
			if i != 0 {
				return bad("a second IHDR (chunk %d)", i)
			}
			if n != 13 {
				return bad("IHDR holds %d bytes, want 13", n)
			}
			hdr = pngHeader{width: binary.BigEndian.Uint32(data[0:]), height: binary.BigEndian.Uint32(data[4:]),
				bitDepth: data[8], colType: data[9], interlaced: data[12] == 1}
			if pngChannels(hdr.colType) == 0 || hdr.bitDepth == 0 || hdr.width == 0 || hdr.height == 0 {
				return bad("IHDR %dx%d, bit depth %d, colour type %d", hdr.width, hdr.height, hdr.bitDepth, hdr.colType)
			}
		case name == "IDAT":
			switch idatState {
			case 0:
				idatState = 1
			case 2:
				return bad("an IDAT (chunk %d) after another chunk followed the IDAT run: the image data must be consecutive", i)
			}
			idat = append(idat, data)
		case name == "IEND":
			if n != 0 {
				return bad("IEND holds %d bytes, want none", n)
			}
			seenIEND = true
		default:
			if idatState == 1 {
				idatState = 2
			}
		}
		off = int(end)
	}
	if len(idat) == 0 {
		return bad("no IDAT chunk")
	}
	return checkZlib(idat, hdr.rawBytes(), bad)
}

// checkZlib inflates the concatenated IDAT data, which must be one zlib
// stream with a right Adler-32 that inflates to exactly want bytes and is
// followed by nothing.
func checkZlib(parts [][]byte, want int64, bad func(string, ...any) error) error {
	r := &chunkReader{parts: parts}
	z, err := zlib.NewReader(r)
	if err != nil {
		return bad("image data: %v", err)
	}
	got, err := io.Copy(io.Discard, io.LimitReader(z, want+1))
	switch {
	case err != nil:
		return bad("image data: %v after %d of %d bytes", err, got, want)
	case got > want:
		return bad("image data inflates to more than the %d bytes IHDR implies", want)
	case got < want:
		return bad("image data inflates to %d bytes, IHDR implies %d", got, want)
	}
	// The stream must end exactly here: its Adler-32 next, then nothing.
	var one [1]byte
	if n, err := z.Read(one[:]); n != 0 || err != io.EOF {
		return bad("image data goes on past the %d bytes IHDR implies (%v)", want, err)
	}
	if left := r.remaining(); left != 0 {
		return bad("%d bytes of IDAT data follow the end of the zlib stream", left)
	}
	if r.last < len(parts)-1 {
		return bad("%d IDAT chunks follow the one where the zlib stream ended", len(parts)-1-r.last)
	}
	return nil
}

// chunkReader reads the IDAT payloads as one stream, byte by byte when
// asked (it is an io.ByteReader, so compress/flate reads exactly the
// stream and no further, and what is left over is what follows it).
type chunkReader struct {
	parts [][]byte
	i, j  int
	last  int // the part that held the last byte read
}

// ReadByte returns the stream's next byte, io.EOF after the last part.
func (r *chunkReader) ReadByte() (byte, error) {
	for r.i < len(r.parts) {
		if r.j < len(r.parts[r.i]) {
			c := r.parts[r.i][r.j]
			r.j++
			r.last = r.i
			return c, nil
		}
		r.i, r.j = r.i+1, 0
	}
	return 0, io.EOF
}

// Read copies up to len(p) of the stream's next bytes into p; io.EOF once
// nothing is left.
func (r *chunkReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.i < len(r.parts) {
		c := copy(p[n:], r.parts[r.i][r.j:])
		if c > 0 {
			r.last = r.i
		}
		n += c
		r.j += c
		if r.j == len(r.parts[r.i]) {
			r.i, r.j = r.i+1, 0
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (r *chunkReader) remaining() int {
	left := 0
	for i := r.i; i < len(r.parts); i++ {
		left += len(r.parts[i])
		if i == r.i {
			left -= r.j
		}
	}
	return left
}

// MaxJPEGScans bounds the scans (SOS segments) of one JPEG (CONTRACT L-6:
// media are bounded before decoding; SE-4: decode CPU is bounded). Go's
// progressive decoder walks every block of a component in every scan of
// it, so a few bytes per scan buy a full pass over the image: a 6000x6000
// progressive JPEG of 20000 empty scans (1.3 MB) held a decode slot for six
// minutes (attack F1, stop 22). Encoders write far fewer: libjpeg's and
// mozjpeg's progressive scripts use 10 scans for YCbCr and 6 for gray, and a
// baseline JPEG has one per component at most. At 32 the worst image (40
// megapixels, 32 scans of its full-size components) decodes in under 2 s
// on the CI machine.
const MaxJPEGScans = 32

// ValidateJPEG checks the structure of a JPEG stream (CONTRACT L-6): SOI
// first; then marker segments, each preceded only by optional 0xFF fill
// bytes (no extraneous bytes, which Go's decoder skips), each complete (its
// length at least 2 and all of it present); after each SOS, entropy-coded
// data up to the next marker (stuffed 0xFF00 and RSTn markers belong to
// it); and EOI, after which everything is ignored. Errors wrap
// ErrCorruptMedia, except more than MaxJPEGScans scans, which wraps
// ErrDecompressionBomb (a bound, not a corruption). Decode checks against
// its Limits.MaxJPEGScans instead (the same by default).
func ValidateJPEG(b []byte) error { return validateJPEG(b, MaxJPEGScans) }

// validateJPEG is ValidateJPEG with a scan bound of maxScans.
func validateJPEG(b []byte, maxScans int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: jpeg %w: %s", ErrCorruptMedia, errStrict, fmt.Sprintf(format, args...))
	}
	if len(b) < 2 || b[0] != 0xff || b[1] != 0xd8 {
		return bad("no SOI marker first")
	}
	off, scans := 2, 0
	for {
		if off >= len(b) {
			return bad("the stream ends at byte %d without EOI", off)
		}
		if b[off] != 0xff {
			return bad("byte %d is %#02x where a marker must start (extraneous data between segments)", off, b[off])
		}
		for off < len(b) && b[off] == 0xff { // the marker, after any fill bytes
			off++
		}
		if off >= len(b) {
			return bad("the stream ends in fill bytes without EOI")
		}
		m := b[off]
		off++
		switch {
		case m == 0xd9: // EOI: bytes after it change no pixel
			return nil
		case m == 0x00 || m == 0xd8 || (m >= 0xd0 && m <= 0xd7):
			return bad("marker %#02x at byte %d outside entropy-coded data", m, off-1)
		case m == 0x01: // TEM: no segment
			continue
		}
		if len(b)-off < 2 {
			return bad("marker %#02x at byte %d: the segment length is cut off", m, off-1)
		}
		n := int(binary.BigEndian.Uint16(b[off:]))
		if n < 2 || off+n > len(b) {
			return bad("marker %#02x at byte %d: segment of %d bytes, %d left", m, off-1, n, len(b)-off)
		}
		off += n
		if m != 0xda { // not SOS
			continue
		}
		if scans++; scans > maxScans {
			return fmt.Errorf("%w: jpeg has more than %d scans (SOS segments); each scan is a pass over the image", ErrDecompressionBomb, maxScans)
		}
		// Entropy-coded data: up to a 0xFF that is neither stuffing (0x00),
		// a fill byte, nor a restart marker.
		for {
			for off < len(b) && b[off] != 0xff {
				off++
			}
			if off+1 >= len(b) {
				return bad("the scan data runs to the end of the stream without EOI")
			}
			next := b[off+1]
			if next == 0x00 || (next >= 0xd0 && next <= 0xd7) {
				off += 2
				continue
			}
			break // a marker (possibly after fill bytes): the outer loop reads it
		}
	}
}

// DecodedBytesPerPixel is what one decoded pixel is charged by default: 8
// bytes, the 16-bit RGBA form (image.NRGBA64) of the H-1 content hash and
// the largest form a decoder returns (a 16-bit PNG), so every format holds
// at most that once decoded (DecodePeakBytes).
const DecodedBytesPerPixel = 8

// DecodePeakBytes is how many bytes decoding data holds at its peak, from
// its header alone (engine/server's decode budget charges it; CONTRACT
// SE-4), for an image the header declares width x height: width * height *
// DecodedBytesPerPixel, or more for a progressive JPEG. Go's progressive
// decoder keeps the 64 int32 coefficients of every 8x8 block of every
// component until the last scan (4 bytes per sample) beside the decoded
// samples (1 byte each), over whole MCUs: a gray image holds 5 bytes per
// pixel, YCbCr 4:2:0 7.5, YCbCr 4:4:4 15 and CMYK 20 (measured: a 36
// megapixel CMYK progressive JPEG peaked at 825 MB of heap against the 288
// MB that 8 bytes per pixel charged, attack F3, stop 22). Data whose frame
// header cannot be read is charged the default (Decode refuses it later).
func DecodePeakBytes(data []byte, width, height int) int64 {
	base := int64(width) * int64(height) * DecodedBytesPerPixel
	if width <= 0 || height <= 0 {
		return 0
	}
	sof, ok := jpegFrameHeader(data)
	if !ok || sof.marker != 0xc2 {
		return base
	}
	var hmax, vmax int64 = 1, 1
	for _, c := range sof.sampling {
		hmax, vmax = max(hmax, int64(c[0])), max(vmax, int64(c[1]))
	}
	mxx := (int64(width) + 8*hmax - 1) / (8 * hmax)  // MCUs across
	myy := (int64(height) + 8*vmax - 1) / (8 * vmax) // MCUs down
	var blocks int64
	for _, c := range sof.sampling {
		blocks += mxx * myy * int64(c[0]) * int64(c[1])
	}
	return max(base, blocks*64*(4+1)) // coefficients (int32) and samples (bytes) of every block
}

// jpegFrame is what DecodePeakBytes needs of a JPEG's frame header (SOFn).
type jpegFrame struct {
	marker   byte      // 0xc0 baseline, 0xc1 extended, 0xc2 progressive, ...
	sampling [][2]byte // each component's horizontal and vertical sampling factor (1..4)
}

// jpegFrameHeader finds the first SOFn segment of a JPEG stream by walking
// its marker segments from SOI (a frame header comes before the first
// scan); ok is false when there is none to read or it is malformed.
func jpegFrameHeader(b []byte) (f jpegFrame, ok bool) {
	if len(b) < 2 || b[0] != 0xff || b[1] != 0xd8 {
		return f, false
	}
	off := 2
	for off+4 <= len(b) && b[off] == 0xff {
		for off < len(b) && b[off] == 0xff {
			off++
		}
		if off+3 > len(b) {
			return f, false
		}
		m := b[off]
		n := int(binary.BigEndian.Uint16(b[off+1:]))
		body := off + 3
		if n < 2 || body+n-2 > len(b) || m == 0xda || m == 0xd9 {
			return f, false // truncated, or a scan or the end before any frame header
		}
		if m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc { // SOFn, not DHT, JPG or DAC
			seg := b[body : body+n-2]
			if len(seg) < 6 || len(seg) < 6+3*int(seg[5]) || seg[5] == 0 {
				return f, false
			}
			f.marker = m
			for i := 0; i < int(seg[5]); i++ {
				hv := seg[6+3*i+1]
				h, v := hv>>4, hv&0x0f
				if h < 1 || h > 4 || v < 1 || v > 4 {
					return f, false
				}
				f.sampling = append(f.sampling, [2]byte{h, v})
			}
			return f, true
		}
		off = body + n - 2
	}
	return f, false
}
