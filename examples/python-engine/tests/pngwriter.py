"""A small PNG writer for the decoder's tests: every colour type and bit depth, Adam7, and a
chosen filter per scanline (filters applied forward, independently of the decoder's code)."""

import struct
import zlib

import numpy as np

_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def chunk(ctype, payload):
    return struct.pack(">I", len(payload)) + ctype + payload + struct.pack(">I", zlib.crc32(ctype + payload) & 0xFFFFFFFF)


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _filter_row(row, prev, ftype, bpp):
    out = bytearray([ftype])
    for i, x in enumerate(row):
        a = row[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        pred = (0, a, b, (a + b) // 2, _paeth(a, b, c))[ftype]
        out.append((x - pred) & 0xFF)
    return bytes(out)


def _pack_rows(samples, depth):
    """samples: int array [h, w, channels] of raw sample values -> list of row bytes."""
    h, w, c = samples.shape
    rows = []
    for y in range(h):
        flat = samples[y].reshape(-1)
        if depth == 16:
            rows.append(b"".join(struct.pack(">H", int(v)) for v in flat))
        elif depth == 8:
            rows.append(bytes(int(v) for v in flat))
        else:
            bits = []
            for v in flat:
                bits.extend((int(v) >> (depth - 1 - k)) & 1 for k in range(depth))
            while len(bits) % 8:
                bits.append(0)
            rows.append(bytes(np.packbits(np.array(bits, dtype=np.uint8)).tolist()))
    return rows


def encode(samples, depth, ctype, interlace=False, filters=None, palette=None, trns=None,
           idat_split=None, level=6):
    """Encodes raw samples [h, w, channels]; filters(y) gives each scanline's filter type."""
    h, w, c = samples.shape
    assert c == _CHANNELS[ctype]
    bpp = max(1, depth * c // 8)
    filters = filters or (lambda y: y % 5)
    raw = bytearray()
    passes = _ADAM7 if interlace else ((0, 0, 1, 1),)
    for x0, y0, dx, dy in passes:
        sub = samples[y0::dy, x0::dx, :]
        if sub.shape[0] == 0 or sub.shape[1] == 0:
            continue
        rows = _pack_rows(sub, depth)
        prev = bytes(len(rows[0]))
        for y, row in enumerate(rows):
            raw += _filter_row(row, prev, filters(y), bpp)
            prev = row
    z = zlib.compress(bytes(raw), level)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 1 if interlace else 0))
    if palette is not None:
        out += chunk(b"PLTE", bytes(np.asarray(palette, dtype=np.uint8).reshape(-1).tolist()))
    if trns is not None:
        out += chunk(b"tRNS", trns)
    parts = [z] if not idat_split else [z[i:i + idat_split] for i in range(0, len(z), idat_split)]
    for p in parts:
        out += chunk(b"IDAT", p)
    return out + chunk(b"IEND", b"")
