"""Seeded random mutations of valid inputs for every parser: each either accepts or raises its
own error type (which the engine answers INVALID_ARGUMENT), never anything else (which would
be an INTERNAL answer or a dead request). The seed is fixed and printed."""

import os
import struct
import unittest
import zlib

import numpy as np

import pngwriter
from common import FIXTURES, read_bytes
from pyengine import errors, jpeg, png, reference, safetensors

SEED = 77031
ROUNDS = 300


def mutate(rng, data):
    b = bytearray(data)
    kind = rng.integers(0, 4)
    if kind == 0 and b:  # flip bits
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(0, len(b)))
            b[i] ^= 1 << int(rng.integers(0, 8))
    elif kind == 1:  # truncate
        b = b[:int(rng.integers(0, len(b) + 1))]
    elif kind == 2:  # insert bytes
        i = int(rng.integers(0, len(b) + 1))
        b[i:i] = bytes(rng.integers(0, 256, size=int(rng.integers(1, 9)), dtype=np.uint8).tolist())
    elif b:  # overwrite a run
        i = int(rng.integers(0, len(b)))
        n = int(rng.integers(1, 9))
        b[i:i + n] = bytes(rng.integers(0, 256, size=n, dtype=np.uint8).tolist())
    return bytes(b)


def fix_crcs(data):
    """Recomputes every chunk CRC so mutations reach zlib, filters and sample unpacking."""
    out, pos = bytearray(data[:8]), 8
    while pos + 8 <= len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        body = data[pos + 4:pos + 8 + n]
        if pos + 12 + n > len(data):
            out += data[pos:]
            break
        out += data[pos:pos + 4] + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
        pos += 12 + n
    return bytes(out)


class FuzzTest(unittest.TestCase):
    def test_png(self):
        print("FuzzTest.test_png seed", SEED)
        rng = np.random.default_rng(SEED)
        seeds = [read_bytes(os.path.join(FIXTURES, "images", n)) for n in ("basn6a16.png", "basn3p08-trns.png", "one-pixel.png")]
        seeds.append(pngwriter.encode(rng.integers(0, 4, size=(5, 7, 1)), 2, 0, interlace=True))
        seeds.append(pngwriter.encode(rng.integers(0, 256, size=(6, 9, 4)), 8, 6, filters=lambda y: 4))
        for r in range(ROUNDS * 2):
            data = mutate(rng, seeds[r % len(seeds)])
            if r % 2:
                data = fix_crcs(data)
            try:
                w, h, px = png.decode(data, 1 << 16)
                self.assertEqual(px.shape, (h, w, 4))
            except png.PNGError:
                pass

    def test_jpeg(self):
        rng = np.random.default_rng(SEED + 1)
        seed = read_bytes(os.path.join(FIXTURES, "images", "video-001.progressive.jpeg"))
        for _ in range(ROUNDS // 3):
            try:
                jpeg.decode(mutate(rng, seed), 1 << 16)
            except jpeg.JPEGError:
                pass

    def test_reference(self):
        rng = np.random.default_rng(SEED + 2)
        key = bytes(32)
        seed = reference.seal(key, "shared_dir", "6f1c2a3b-4d5e-4f60-8172-93a4b5c6d7e8", ("h", 1, "grpc"), "ab" * 16, 5,
                              [reference.Item("cd" * 32, 3, 4), reference.Item("", 1, 1)])
        accepted = 0
        for _ in range(ROUNDS * 3):
            data = mutate(rng, seed)
            try:
                ref = reference.parse(data)
                reference.check_ids(ref, "6f1c2a3b-4d5e-4f60-8172-93a4b5c6d7e8")
                reference.verify(ref, key, "shared_dir", "6f1c2a3b-4d5e-4f60-8172-93a4b5c6d7e8", ("h", 1, "grpc"))
                self.assertEqual(data, seed)  # only the original verifies
                accepted += 1
            except errors.RuleError as e:
                self.assertIn(e.rule, ("L-1", "SU-4", "H-3", "SU-5"))

    def test_safetensors(self):
        rng = np.random.default_rng(SEED + 3)
        seed = safetensors.dumps([("item.0", np.ones((2, 3), np.float32)), ("item.1", np.zeros((1, 4), np.float32))],
                                 {"baton.entry_id": "x", "baton.items": '[{"hash":"","rows":2,"cols":3}]'})
        for _ in range(ROUNDS * 2):
            try:
                safetensors.loads(mutate(rng, seed))
            except safetensors.SafetensorsError:
                pass


if __name__ == "__main__":
    unittest.main()
