"""A strict PNG decoder (CONTRACT L-6), written from the PNG specification (W3C PNG 2nd ed.).

decode(data, max_pixels) -> (width, height, pixels) where pixels is a numpy uint16 array of
shape [height, width, 4]: non-premultiplied 16-bit RGBA (CONTRACT H-1), every sample scaled
to 16 bits exactly (v * 65535 // (2**depth - 1); an 8-bit sample v becomes v * 257), alpha
0xffff unless tRNS says otherwise.

Strictness (each violation raises PNGError, which the engine answers INVALID_ARGUMENT):
- the 8-byte signature, then IHDR first (13 bytes, a valid colour type / bit depth pair,
  compression 0, filter 0, interlace 0 or 1, 1 <= width, height <= 2**31 - 1);
- every chunk complete and its CRC-32 right (ancillary chunks too); an unknown critical
  chunk is an error, unknown ancillary chunks are skipped;
- PLTE (required for colour type 3, forbidden for 0 and 4) before the first IDAT; tRNS
  after PLTE and before IDAT, of the size its colour type allows;
- the IDAT chunks consecutive, their data exactly one complete zlib stream (Adler-32
  checked by zlib) that inflates to exactly the bytes the header implies, nothing after it;
- IEND present (empty); bytes after IEND are ignored;
- every scanline filter type in 0..4, every palette index inside the palette;
- the decompression-bomb bound: width * height > max_pixels is rejected from IHDR, before
  anything is inflated, and inflation never produces more than the header implies + 1 byte.
"""

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"

# colour type -> (allowed bit depths, samples per pixel)
_COLOR_TYPES = {
    0: ((1, 2, 4, 8, 16), 1),  # greyscale
    2: ((8, 16), 3),  # truecolour
    3: ((1, 2, 4, 8), 1),  # indexed
    4: ((8, 16), 2),  # greyscale with alpha
    6: ((8, 16), 4),  # truecolour with alpha
}

# Adam7 passes: (x0, y0, dx, dy)
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


class PNGError(ValueError):
    """The bytes are not a complete, valid PNG (CONTRACT L-6: INVALID_ARGUMENT)."""


class PNGBombError(PNGError):
    """The header announces more pixels than the bound (a decompression bomb)."""


def _chunks(data, check_crc=True):
    """Yields (type, payload) for every chunk up to and including IEND, checking CRCs."""
    if len(data) < 8 or data[:8] != SIGNATURE:
        raise PNGError("png: not a PNG signature")
    pos = 8
    n = len(data)
    while True:
        if pos + 8 > n:
            raise PNGError("png: truncated chunk header (no IEND)")
        length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
        if length > 0x7FFFFFFF:
            raise PNGError("png: chunk length over 2^31-1")
        if not all(65 <= b <= 90 or 97 <= b <= 122 for b in ctype):
            raise PNGError("png: invalid chunk type %r" % ctype)
        end = pos + 8 + length
        if end + 4 > n:
            raise PNGError("png: truncated %s chunk" % ctype.decode("ascii"))
        payload = data[pos + 8:end]
        (crc,) = struct.unpack(">I", data[end:end + 4])
        if check_crc and zlib.crc32(payload, zlib.crc32(ctype)) & 0xFFFFFFFF != crc:
            raise PNGError("png: bad CRC in %s chunk" % ctype.decode("ascii"))
        yield ctype, payload
        if ctype == b"IEND":
            return  # bytes after IEND are ignored (CONTRACT L-6)
        pos = end + 4


def read_header(data):
    """Returns (width, height, bit_depth, color_type, interlace) from IHDR (first chunk)."""
    if len(data) < 33 or data[:8] != SIGNATURE:
        raise PNGError("png: not a PNG signature")
    length, ctype = struct.unpack(">I4s", data[8:16])
    if ctype != b"IHDR" or length != 13:
        raise PNGError("png: first chunk is not a 13-byte IHDR")
    return _parse_ihdr(data[16:29])


def _parse_ihdr(p):
    if len(p) != 13:
        raise PNGError("png: IHDR is not 13 bytes")
    width, height, depth, ctype, comp, filt, interlace = struct.unpack(">IIBBBBB", p)
    if not (1 <= width <= 0x7FFFFFFF and 1 <= height <= 0x7FFFFFFF):
        raise PNGError("png: invalid dimensions %dx%d" % (width, height))
    if ctype not in _COLOR_TYPES or depth not in _COLOR_TYPES[ctype][0]:
        raise PNGError("png: invalid colour type %d / bit depth %d" % (ctype, depth))
    if comp != 0 or filt != 0 or interlace not in (0, 1):
        raise PNGError("png: invalid compression, filter or interlace method")
    return width, height, depth, ctype, interlace


def _pass_sizes(width, height, interlace):
    if not interlace:
        return [(0, 0, 1, 1, width, height)]
    out = []
    for x0, y0, dx, dy in _ADAM7:
        pw = (width - x0 + dx - 1) // dx if width > x0 else 0
        ph = (height - y0 + dy - 1) // dy if height > y0 else 0
        out.append((x0, y0, dx, dy, pw, ph))
    return out


def _row_bytes(w, bits_per_pixel):
    return (w * bits_per_pixel + 7) // 8


def decode(data, max_pixels, check_crc=True):
    """Decodes a whole PNG strictly; see the module docstring. Raises PNGError.

    check_crc=False exists only for the seeded bug `png-crc-unchecked` (bugs.py).
    """
    data = bytes(data)
    it = _chunks(data, check_crc)
    try:
        first_type, first = next(it)
    except StopIteration:  # pragma: no cover - _chunks always yields or raises
        raise PNGError("png: no chunks")
    if first_type != b"IHDR":
        raise PNGError("png: first chunk is %r, not IHDR" % first_type)
    width, height, depth, ctype, interlace = _parse_ihdr(first)
    if width * height > max_pixels:
        raise PNGBombError("png: %dx%d is over the bound of %d pixels" % (width, height, max_pixels))
    channels = _COLOR_TYPES[ctype][1]
    bits_pp = depth * channels
    passes = _pass_sizes(width, height, interlace)
    expected = sum(ph * (1 + _row_bytes(pw, bits_pp)) for _, _, _, _, pw, ph in passes if pw and ph)

    palette = None
    trns = None
    inflater = zlib.decompressobj()
    raw = []
    raw_len = 0
    idat_state = 0  # 0 before IDAT, 1 inside the IDAT run, 2 after it
    seen_iend = False
    for ctype_b, payload in it:
        if ctype_b == b"IHDR":
            raise PNGError("png: second IHDR")
        if ctype_b == b"IDAT":
            if idat_state == 2:
                raise PNGError("png: IDAT chunks are not consecutive")
            if ctype == 3 and palette is None:
                raise PNGError("png: indexed image without PLTE before IDAT")
            idat_state = 1
            if inflater.eof:
                # CONTRACT L-6: no byte and no IDAT (an empty one included) after the stream.
                raise PNGError("png: IDAT after the end of the zlib stream")
            try:
                chunk = inflater.decompress(payload, expected + 1 - raw_len)
            except zlib.error as e:
                raise PNGError("png: invalid zlib stream: %s" % e)
            raw.append(chunk)
            raw_len += len(chunk)
            if raw_len > expected:
                raise PNGError("png: too much pixel data")
            if inflater.unconsumed_tail:
                # Output was capped at expected+1 and more input remains: too much data.
                raise PNGError("png: too much pixel data")
            if inflater.unused_data:
                raise PNGError("png: data after the end of the zlib stream")
            continue
        if idat_state == 1:
            idat_state = 2
        if ctype_b == b"IEND":
            if payload:
                raise PNGError("png: IEND is not empty")
            seen_iend = True
            break
        if ctype_b == b"PLTE":
            if palette is not None or idat_state:
                raise PNGError("png: PLTE repeated or after IDAT")
            if ctype in (0, 4):
                raise PNGError("png: PLTE in a greyscale image")
            if len(payload) % 3 or not 3 <= len(payload) <= 768:
                raise PNGError("png: invalid PLTE length")
            palette = np.frombuffer(payload, dtype=np.uint8).reshape(-1, 3)
            continue
        if ctype_b == b"tRNS":
            if trns is not None or idat_state:
                raise PNGError("png: tRNS repeated or after IDAT")
            if ctype == 0 and len(payload) == 2:
                trns = struct.unpack(">H", payload)[0]
            elif ctype == 2 and len(payload) == 6:
                trns = struct.unpack(">HHH", payload)
            elif ctype == 3 and palette is not None and len(payload) <= len(palette):
                trns = np.frombuffer(payload, dtype=np.uint8)
            else:
                raise PNGError("png: invalid tRNS for colour type %d" % ctype)
            continue
        if 65 <= ctype_b[0] <= 90:
            raise PNGError("png: unknown critical chunk %r" % ctype_b)
        # Unknown or unused ancillary chunk: its CRC was checked; skip it.
    if not seen_iend:
        raise PNGError("png: no IEND")
    if idat_state == 0:
        raise PNGError("png: no IDAT")
    if not inflater.eof:
        raise PNGError("png: zlib stream incomplete (truncated or bad Adler-32)")
    if raw_len != expected:
        raise PNGError("png: %d bytes of pixel data, want %d" % (raw_len, expected))
    raw = b"".join(raw)

    samples = np.zeros((height, width, channels), dtype=np.uint16)
    off = 0
    for x0, y0, dx, dy, pw, ph in passes:
        if not pw or not ph:
            continue
        rb = _row_bytes(pw, bits_pp)
        size = ph * (1 + rb)
        rows = np.frombuffer(raw, dtype=np.uint8, count=size, offset=off).reshape(ph, 1 + rb)
        off += size
        recon = unfilter(rows, max(1, bits_pp // 8))
        samples[y0::dy, x0::dx, :] = _unpack(recon, pw, depth, channels)
    return width, height, _to_nrgba64(samples, depth, ctype, palette, trns)


def unfilter(rows, bpp):
    """Reverses PNG scanline filtering. rows: uint8 [h, 1 + rowbytes] (filter byte first).

    Returns uint8 [h, rowbytes]. Rows filtered None, Sub or Up are undone one row at a time;
    if any row is Average or Paeth (whose bytes depend on the reconstructed byte to their
    left) the whole image is undone along anti-diagonals of bpp-byte groups, which are
    independent of each other, so the work stays vectorized.
    """
    filters = rows[:, 0]
    if filters.size and int(filters.max()) > 4:
        raise PNGError("png: invalid filter type %d" % int(filters.max()))
    data = rows[:, 1:]
    h, rb = data.shape
    if not (filters >= 3).any():
        out = np.empty((h, rb), dtype=np.uint8)
        prev = np.zeros(rb, dtype=np.uint8)
        for y in range(h):
            f = filters[y]
            row = data[y]
            if f == 0:
                cur = row.copy()
            elif f == 2:
                cur = row + prev  # uint8 arithmetic wraps mod 256
            else:  # Sub: a running sum per byte lane, mod 256
                pad = (-rb) % bpp
                lanes = np.concatenate([row, np.zeros(pad, dtype=np.uint8)]).reshape(-1, bpp)
                cur = np.cumsum(lanes, axis=0, dtype=np.uint8).reshape(-1)[:rb]
            out[y] = cur
            prev = cur
        return out
    return _unfilter_wavefront(filters, data, bpp)


def _unfilter_wavefront(filters, data, bpp):
    h, rb = data.shape
    ng = (rb + bpp - 1) // bpp
    stride = ng + 1  # grid column 0 is a zero border, and so is grid row 0
    grid = np.zeros(((h + 1) * stride, bpp), dtype=np.int32)
    padded = np.zeros((h, ng * bpp), dtype=np.int32)
    padded[:, :rb] = data
    filt = np.zeros((h, stride, bpp), dtype=np.int32)
    filt[:, 1:, :] = padded.reshape(h, ng, bpp)
    filt = filt.reshape(-1, bpp)
    ft = filters.astype(np.int32)
    is_sub = (ft == 1).astype(np.int32)[:, None]
    is_up = (ft == 2).astype(np.int32)[:, None]
    is_avg = (ft == 3).astype(np.int32)[:, None]
    is_paeth = (ft == 4)[:, None]
    rows = np.arange(h)
    for t in range(h + ng - 1):
        rr = rows[max(0, t - ng + 1):min(h - 1, t) + 1]
        here = (rr + 1) * stride + (t - rr + 1)
        a = grid[here - 1]
        b = grid[here - stride]
        c = grid[here - stride - 1]
        pred = a * is_sub[rr] + b * is_up[rr] + ((a + b) >> 1) * is_avg[rr]
        pm = is_paeth[rr]
        if pm.any():
            p = a + b - c
            pa = np.abs(b - c)  # |p - a|
            pb = np.abs(a - c)  # |p - b|
            pc = np.abs(p - c)
            paeth = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
            pred = np.where(pm, paeth, pred)
        grid[here] = (filt[rr * stride + (t - rr + 1)] + pred) & 0xFF
    out = grid.reshape(h + 1, stride, bpp)[1:, 1:, :].reshape(h, ng * bpp)
    return out[:, :rb].astype(np.uint8)


def _unpack(recon, w, depth, channels):
    """Reconstructed scanline bytes -> samples uint16 [h, w, channels] (raw sample values)."""
    h = recon.shape[0]
    if depth == 8:
        return recon[:, :w * channels].reshape(h, w, channels).astype(np.uint16)
    if depth == 16:
        v = recon[:, :w * channels * 2].reshape(h, w * channels, 2).astype(np.uint16)
        return ((v[:, :, 0] << 8) | v[:, :, 1]).reshape(h, w, channels)
    bits = np.unpackbits(recon, axis=1)  # MSB first, as PNG packs samples
    per = bits[:, :w * depth].reshape(h, w, depth).astype(np.uint16)
    weights = (1 << np.arange(depth - 1, -1, -1)).astype(np.uint16)
    return (per * weights).sum(axis=2, dtype=np.uint16).reshape(h, w, 1)


def _to_nrgba64(s, depth, ctype, palette, trns):
    h, w, _ = s.shape
    out = np.empty((h, w, 4), dtype=np.uint16)
    if ctype == 3:
        idx = s[:, :, 0]
        if int(idx.max()) >= len(palette):
            raise PNGError("png: palette index %d outside a palette of %d" % (int(idx.max()), len(palette)))
        pal = np.empty((len(palette), 4), dtype=np.uint16)
        pal[:, :3] = palette.astype(np.uint16) * 257
        pal[:, 3] = 0xFFFF
        if trns is not None:
            pal[:len(trns), 3] = trns.astype(np.uint16) * 257
        return pal[idx]
    scale = 65535 // ((1 << depth) - 1)  # exact for 1, 2, 4, 8 and 16 bits
    v = (s.astype(np.uint32) * scale).astype(np.uint16)
    if ctype in (0, 4):
        out[:, :, 0] = out[:, :, 1] = out[:, :, 2] = v[:, :, 0]
        out[:, :, 3] = v[:, :, 1] if ctype == 4 else 0xFFFF
        if ctype == 0 and trns is not None:
            out[:, :, 3][s[:, :, 0] == trns] = 0
    else:
        out[:, :, :3] = v[:, :, :3]
        out[:, :, 3] = v[:, :, 3] if ctype == 6 else 0xFFFF
        if ctype == 2 and trns is not None:
            m = (s[:, :, 0] == trns[0]) & (s[:, :, 1] == trns[1]) & (s[:, :, 2] == trns[2])
            out[:, :, 3][m] = 0
    return out
