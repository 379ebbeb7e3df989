"""The H-1 content hash against engine/encoder/testdata/content_hash_vectors.json.

Synthetic vectors whose source is an NRGBA, NRGBA64 or Gray16 image are rebuilt here as
NRGBA64 pixels and checked pre-image byte for byte; every PNG fixture vector is decoded by
our own PNG decoder and must hash exactly (CONTRACT H-1: PNG hashes are exact across
implementations). JPEG (implementation-defined IDCT), GIF and WebP (not supported here) and
Go-type conversions that no PNG produces (Paletted of premultiplied colours, RGBA) are skipped.
"""

import os
import unittest

import numpy as np

from common import FIXTURES, REPO, load_json
from pyengine import contenthash, png

VECTORS = os.path.join(REPO, "engine", "encoder", "testdata", "content_hash_vectors.json")

SYNTHETIC = {
    "opaque-1x1": [[[0x12, 0x34, 0x56, 0xFF]]],
    "offset-origin-1x1": [[[0x12, 0x34, 0x56, 0xFF]]],
    "opaque-1x1-base": [[[0x12, 0x34, 0x56, 0xFF]]],
    "alpha0-2x2": [[[10, 20, 30, 255], [200, 100, 50, 0]], [[0, 0, 0, 0], [1, 2, 3, 128]]],
    "alpha0-2x2-other-hidden-colour": [[[10, 20, 30, 255], [201, 100, 50, 0]], [[0, 0, 0, 0], [1, 2, 3, 128]]],
}
SYNTHETIC16 = {
    "gray16-2x1": [[[0x1234] * 3 + [0xFFFF], [0xFEDC] * 3 + [0xFFFF]]],
    "nrgba64-2x1": [[[0x0102, 0x0304, 0x0506, 0xFFFF], [0xA0B0, 0xC0D0, 0xE0F0, 0x0000]]],
}


class ContentHashTest(unittest.TestCase):
    def vectors(self):
        return {v["name"]: v for v in load_json(VECTORS)["vectors"]}

    def test_synthetic_preimages(self):
        vs = self.vectors()
        n = 0
        for name, px8 in SYNTHETIC.items():
            px = np.array(px8, dtype=np.uint16) * 257
            n += self.check(vs[name], px)
        for name, px16 in SYNTHETIC16.items():
            n += self.check(vs[name], np.array(px16, dtype=np.uint16))
        self.assertEqual(n, len(SYNTHETIC) + len(SYNTHETIC16))

    def check(self, v, px):
        with self.subTest(v["name"]):
            h, w, _ = px.shape
            self.assertEqual((w, h), (v["width"], v["height"]))
            pre = contenthash.preimage_prefix(v["preset"], w, h) + np.ascontiguousarray(px, dtype=">u2").tobytes()
            if v.get("preimage_hex"):
                self.assertEqual(pre.hex(), v["preimage_hex"])
            self.assertEqual(contenthash.content_hash(v["preset"], w, h, px), v["sha256"])
        return 1

    def test_png_fixtures_hash_exactly(self):
        n = 0
        for name, v in self.vectors().items():
            if not name.endswith(".png"):
                continue
            with self.subTest(name):
                with open(os.path.join(FIXTURES, "images", name), "rb") as f:
                    w, h, px = png.decode(f.read(), 1 << 24)
                self.assertEqual((w, h), (v["width"], v["height"]))
                self.assertEqual(contenthash.content_hash(v["preset"], w, h, px), v["sha256"])
                n += 1
        self.assertGreaterEqual(n, 5)

    def test_well_formed(self):
        self.assertTrue(contenthash.well_formed("0" * 64))
        for bad in ("", "0" * 63, "A" * 64, "g" * 64, "0" * 65):
            self.assertFalse(contenthash.well_formed(bad))


if __name__ == "__main__":
    unittest.main()
