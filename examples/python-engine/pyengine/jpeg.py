"""JPEG: a structural check of our own (CONTRACT L-6), then PIL decodes the pixels.

check(data, max_pixels) -> (width, height, end) walks the marker segments from SOI: every
segment complete, a frame header (SOFn) with non-zero dimensions before the first scan, at
least one scan, and EOI; `end` is the offset just past EOI (bytes after it are ignored). The
decompression-bomb bound is checked from the frame header, before anything is decoded.
decode(data, max_pixels) -> (width, height, pixels uint16 [h, w, 4], non-premultiplied RGBA).
A JPEG's pixels (IDCT, chroma upsampling) are PIL's (libjpeg's); CONTRACT H-1 says JPEG
hashes are over the target's own decode.
"""

import io
import struct

import numpy as np
from PIL import Image

SOI = b"\xff\xd8"
# Frame headers: SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC).
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_STANDALONE = {0x01} | set(range(0xD0, 0xD8))  # TEM, RST0..RST7 carry no length


class JPEGError(ValueError):
    """Not a complete JPEG (CONTRACT L-6: INVALID_ARGUMENT)."""


class JPEGBombError(JPEGError):
    """The frame header announces more pixels than the bound."""


def check(data, max_pixels):
    n = len(data)
    if n < 4 or data[:2] != SOI:
        raise JPEGError("jpeg: no SOI marker")
    pos = 2
    size = None
    scans = 0
    while True:
        # Find the next marker: 0xFF, optional 0xFF fill bytes, then a marker code.
        if pos >= n or data[pos] != 0xFF:
            raise JPEGError("jpeg: expected a marker at offset %d" % pos)
        while pos < n and data[pos] == 0xFF:
            pos += 1
        if pos >= n:
            raise JPEGError("jpeg: truncated before EOI")
        marker = data[pos]
        pos += 1
        if marker == 0x00:
            raise JPEGError("jpeg: stuffed byte outside entropy-coded data")
        if marker == 0xD9:  # EOI
            if size is None or scans == 0:
                raise JPEGError("jpeg: EOI before a frame and a scan")
            return size[0], size[1], pos
        if marker == 0xD8:
            raise JPEGError("jpeg: second SOI")
        if marker in _STANDALONE:
            continue
        if pos + 2 > n:
            raise JPEGError("jpeg: truncated segment length")
        (length,) = struct.unpack(">H", data[pos:pos + 2])
        if length < 2 or pos + length > n:
            raise JPEGError("jpeg: segment 0x%02X is incomplete" % marker)
        seg = data[pos + 2:pos + length]
        pos += length
        if marker in _SOF:
            if size is not None:
                raise JPEGError("jpeg: second frame header")
            if len(seg) < 6:
                raise JPEGError("jpeg: short frame header")
            _, height, width, ncomp = struct.unpack(">BHHB", seg[:6])
            if width == 0 or height == 0 or ncomp == 0 or len(seg) != 6 + 3 * ncomp:
                raise JPEGError("jpeg: invalid frame header")
            if width * height > max_pixels:
                raise JPEGBombError("jpeg: %dx%d is over the bound of %d pixels" % (width, height, max_pixels))
            size = (width, height)
        elif marker == 0xDA:  # SOS: entropy-coded data follows, up to the next marker
            if size is None:
                raise JPEGError("jpeg: scan before the frame header")
            scans += 1
            while True:
                j = data.find(b"\xff", pos)
                if j < 0:
                    raise JPEGError("jpeg: truncated scan data (no EOI)")
                k = j + 1
                while k < n and data[k] == 0xFF:  # fill bytes
                    k += 1
                if k >= n:
                    raise JPEGError("jpeg: truncated scan data (no EOI)")
                if data[k] == 0x00 or 0xD0 <= data[k] <= 0xD7:  # stuffed byte or restart marker
                    pos = k + 1
                    continue
                pos = k - 1  # the 0xFF just before the next marker
                break
        elif 0xC0 <= marker <= 0xFE or marker == 0x01:
            pass  # tables, APPn, COM, DNL, ...: complete, skipped
        else:
            raise JPEGError("jpeg: invalid marker 0x%02X" % marker)


def decode(data, max_pixels):
    width, height, end = check(data, max_pixels)
    try:
        img = Image.open(io.BytesIO(bytes(data[:end])), formats=["JPEG"])
        img.load()
    except Exception as e:  # PIL raises many types for corrupt scans
        raise JPEGError("jpeg: %s" % e)
    if img.size != (width, height):
        raise JPEGError("jpeg: decoded size differs from the frame header")
    if img.mode not in ("L", "RGB"):
        img = img.convert("RGB")
    a = np.asarray(img, dtype=np.uint16)
    out = np.empty((height, width, 4), dtype=np.uint16)
    if a.ndim == 2:
        out[:, :, 0] = out[:, :, 1] = out[:, :, 2] = a * 257
    else:
        out[:, :, :3] = a * 257
    out[:, :, 3] = 0xFFFF
    return width, height, out
