"""The content hash of one decoded image (CONTRACT H-1; docs/implementing.md section 4.2).

SHA-256 over: "baton.encoder.v1/content-hash" and one 0x00 byte, U32(len(preset)), the preset
name, U32(width), U32(height), then every pixel row by row, left to right, as R, G, B, A,
each a big-endian uint16 of the non-premultiplied colour (U32 = 4 bytes big-endian). The
pixels come from png.decode / jpeg.decode, which already give that NRGBA64 form (8-bit
samples times 0x101, grey as R = G = B, palette entries expanded with their tRNS alpha,
no alpha = 0xFFFF, alpha-0 pixels keep their colour). Vectors:
engine/encoder/testdata/content_hash_vectors.json.
"""

import hashlib
import re
import struct

import numpy as np

DOMAIN = b"baton.encoder.v1/content-hash\x00"

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def preimage_prefix(preset, width, height):
    p = preset.encode("utf-8")
    return DOMAIN + struct.pack(">I", len(p)) + p + struct.pack(">II", width, height)


def content_hash(preset, width, height, pixels):
    """pixels: uint16 [height, width, 4] NRGBA64 -> 64 lowercase hex digits."""
    h = hashlib.sha256(preimage_prefix(preset, width, height))
    h.update(np.ascontiguousarray(pixels, dtype=">u2").tobytes())
    return h.hexdigest()


def well_formed(h):
    """A content hash as the wire carries it: 64 lowercase hex digits (H-3)."""
    return bool(_HEX64.match(h))
