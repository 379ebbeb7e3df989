"""The strict PNG decoder (CONTRACT L-6, H-1's pixels) against known pixels.

Known values come from three independent sources: PIL for 8-bit non-interlaced files (PIL
reduces 16-bit PNGs to 8 bits, so it is never the oracle for those), PngSuite's SNG text
dumps in Go's source tree (every colour type and bit depth; skipped when no Go tree is
found), and this package's own test writer (tests/pngwriter.py), which encodes seeded random
samples with every filter type, Adam7 and split IDATs.
"""

import glob
import io
import os
import re
import shutil
import struct
import subprocess
import unittest
import zlib

import numpy as np
from PIL import Image

import pngwriter
from common import FIXTURES
from pyengine import png

MAX_PIXELS = 40_000_000
SEED = 20261202


def go_png_testdata():
    """Go's image/png testdata folder (PngSuite with SNG dumps), or None."""
    go = shutil.which("go")
    roots = []
    if go:
        try:
            roots.append(subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True, timeout=30).stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    roots.append("/usr/local/go")
    for r in roots:
        d = os.path.join(r, "src", "image", "png", "testdata")
        if r and os.path.isdir(os.path.join(d, "pngsuite")):
            return d
    return None


def decode_file(path):
    with open(path, "rb") as f:
        return png.decode(f.read(), MAX_PIXELS)


def expected16(samples, depth):
    return (samples.astype(np.uint64) * 65535 // ((1 << depth) - 1)).astype(np.uint16)


class RoundTripTest(unittest.TestCase):
    """Seeded random samples of every colour type and bit depth, encoded by the test writer."""

    def check(self, ctype, depth, w, h, interlace, rng, filters=None, idat_split=None):
        chans = pngwriter._CHANNELS[ctype]
        samples = rng.integers(0, 1 << depth, size=(h, w, chans), dtype=np.int64)
        palette = trns = None
        if ctype == 3:
            n = 1 << depth
            palette = rng.integers(0, 256, size=(n, 3))
            alphas = rng.integers(0, 256, size=n // 2 + 1)
            trns = bytes(alphas.tolist())
        data = pngwriter.encode(samples, depth, ctype, interlace=interlace, filters=filters,
                                palette=palette, trns=trns, idat_split=idat_split)
        gw, gh, px = png.decode(data, MAX_PIXELS)
        self.assertEqual((gw, gh), (w, h))
        self.assertEqual(px.shape, (h, w, 4))
        self.assertEqual(px.dtype, np.uint16)
        if ctype == 3:
            idx = samples[:, :, 0]
            want = np.zeros((h, w, 4), dtype=np.uint16)
            want[:, :, :3] = palette[idx] * 257
            a = np.full(len(palette), 0xFFFF, dtype=np.int64)
            a[:len(alphas)] = alphas * 257
            want[:, :, 3] = a[idx]
        else:
            v = expected16(samples, depth)
            want = np.zeros((h, w, 4), dtype=np.uint16)
            if ctype in (0, 4):
                for k in range(3):
                    want[:, :, k] = v[:, :, 0]
                want[:, :, 3] = v[:, :, 1] if ctype == 4 else 0xFFFF
            else:
                want[:, :, :3] = v[:, :, :3]
                want[:, :, 3] = v[:, :, 3] if ctype == 6 else 0xFFFF
        np.testing.assert_array_equal(px, want, err_msg="ctype %d depth %d %dx%d interlace %s" % (ctype, depth, w, h, interlace))

    def test_every_colour_type_bit_depth_and_filter(self):
        print("RoundTripTest seed", SEED)
        rng = np.random.default_rng(SEED)
        combos = [(0, d) for d in (1, 2, 4, 8, 16)] + [(2, 8), (2, 16), (4, 8), (4, 16), (6, 8), (6, 16)] + \
                 [(3, d) for d in (1, 2, 4, 8)]
        for ctype, depth in combos:
            for w, h in ((1, 1), (3, 2), (13, 7), (17, 9)):
                for interlace in (False, True):
                    with self.subTest(ctype=ctype, depth=depth, w=w, h=h, interlace=interlace):
                        self.check(ctype, depth, w, h, interlace, rng)

    def test_single_filter_images(self):
        """Every row with one filter type: the row-wise path (0..2) and the wavefront (3, 4)."""
        rng = np.random.default_rng(SEED + 1)
        for f in range(5):
            for ctype, depth in ((0, 8), (2, 8), (6, 16), (0, 2)):
                with self.subTest(filter=f, ctype=ctype, depth=depth):
                    self.check(ctype, depth, 23, 11, False, rng, filters=lambda y, f=f: f)

    def test_idat_split_into_many_chunks(self):
        rng = np.random.default_rng(SEED + 2)
        self.check(2, 8, 40, 30, False, rng, idat_split=7)
        self.check(6, 16, 40, 30, True, rng, idat_split=1)

    def test_grey_trns_makes_exactly_that_grey_transparent(self):
        samples = np.array([[[0], [5], [9]]], dtype=np.int64)
        data = pngwriter.encode(samples, 4, 0, trns=struct.pack(">H", 5))
        _, _, px = png.decode(data, MAX_PIXELS)
        self.assertEqual(px[0, :, 3].tolist(), [0xFFFF, 0, 0xFFFF])
        self.assertEqual(px[0, 1, :3].tolist(), [5 * 0x1111] * 3)  # colour kept under alpha 0

    def test_rgb_trns(self):
        samples = np.array([[[1, 2, 3], [1, 2, 4]]], dtype=np.int64)
        data = pngwriter.encode(samples, 16, 2, trns=struct.pack(">HHH", 1, 2, 3))
        _, _, px = png.decode(data, MAX_PIXELS)
        self.assertEqual(px[0, :, 3].tolist(), [0, 0xFFFF])
        self.assertEqual(px[0, 0, :3].tolist(), [1, 2, 3])


class FixtureTest(unittest.TestCase):
    def fixture_pngs(self):
        files = sorted(glob.glob(os.path.join(FIXTURES, "images", "*.png")))
        go = go_png_testdata()
        if go:
            files += sorted(glob.glob(os.path.join(go, "*.png"))) + sorted(glob.glob(os.path.join(go, "pngsuite", "*.png")))
        return [f for f in files if "invalid" not in os.path.basename(f)]

    def test_8bit_non_interlaced_match_pil(self):
        n = 0
        for path in self.fixture_pngs():
            with open(path, "rb") as f:
                data = f.read()
            _, _, depth, ctype, interlace = png.read_header(data)
            if depth != 8 or interlace:
                continue
            with self.subTest(path=os.path.basename(path)):
                _, _, px = png.decode(data, MAX_PIXELS)
                np.testing.assert_array_equal(px & 0xFF, px >> 8)  # 8-bit samples scale by 257
                want = np.asarray(Image.open(io.BytesIO(data)).convert("RGBA"), dtype=np.uint16)
                np.testing.assert_array_equal(px >> 8, want)
                n += 1
        self.assertGreaterEqual(n, 6)

    def test_project_fixtures_of_every_kind_decode(self):
        for path in sorted(glob.glob(os.path.join(FIXTURES, "images", "*.png"))):
            with self.subTest(path=os.path.basename(path)):
                w, h, px = decode_file(path)
                self.assertEqual(px.shape, (h, w, 4))

    def test_pngsuite_against_sng_dumps(self):
        go = go_png_testdata()
        if not go:
            self.skipTest("no Go source tree with image/png/testdata/pngsuite")
        n = 0
        for sng in sorted(glob.glob(os.path.join(go, "pngsuite", "*.sng"))):
            with open(sng) as f:
                text = f.read()
            m = re.search(r"bitdepth:\s*(\d+);\s*using ([a-z ]+);", text)
            if not m or "palette" in m.group(2):
                continue
            bits = int(m.group(1))
            chans = {"grayscale": 1, "color": 3, "grayscale alpha": 2, "color alpha": 4}[m.group(2).strip()]
            body = text[text.index("pixels hex") + len("pixels hex"):]
            body = body[:body.index("}")]
            hexw = bits // 4
            rows = [re.sub(r"\s", "", line) for line in body.strip().splitlines()]
            vals = np.array([[int(r[i:i + hexw], 16) for i in range(0, len(r), hexw)] for r in rows], dtype=np.int64)
            h = len(rows)
            vals = vals.reshape(h, -1, chans)
            if bits == 8:
                vals = vals * 257
            with self.subTest(sng=os.path.basename(sng)):
                w, gh, px = decode_file(sng[:-4] + ".png")
                self.assertEqual(vals.shape[:2], (gh, w))
                if chans in (1, 2):
                    np.testing.assert_array_equal(px[:, :, 0], vals[:, :, 0])
                    np.testing.assert_array_equal(px[:, :, 2], vals[:, :, 0])
                else:
                    np.testing.assert_array_equal(px[:, :, :3], vals[:, :, :3])
                if chans in (2, 4):
                    np.testing.assert_array_equal(px[:, :, 3], vals[:, :, chans - 1])
                n += 1
        self.assertGreaterEqual(n, 15)

    def test_interlaced_equals_non_interlaced(self):
        go = go_png_testdata()
        if not go:
            self.skipTest("no Go source tree with image/png/testdata")
        for a, b in (("benchRGB-interlace.png", "benchRGB.png"), ("gray-gradient.interlaced.png", "gray-gradient.png")):
            with self.subTest(a=a):
                _, _, pa = decode_file(os.path.join(go, a))
                _, _, pb = decode_file(os.path.join(go, b))
                np.testing.assert_array_equal(pa, pb)


class MalformedTest(unittest.TestCase):
    def valid(self):
        rng = np.random.default_rng(SEED + 3)
        return pngwriter.encode(rng.integers(0, 256, size=(6, 5, 3)), 8, 2, idat_split=20)

    def test_malformed_corpus_is_rejected(self):
        files = sorted(glob.glob(os.path.join(FIXTURES, "malformed", "*.png")))
        go = go_png_testdata()
        if go:
            files += sorted(glob.glob(os.path.join(go, "invalid-*.png")))
        self.assertGreaterEqual(len(files), 6)
        for path in files:
            with self.subTest(path=os.path.basename(path)):
                with self.assertRaises(png.PNGError):
                    decode_file(path)

    def test_bomb_is_rejected_from_its_header(self):
        with open(os.path.join(FIXTURES, "malformed", "bomb.png"), "rb") as f:
            data = f.read()
        with self.assertRaises(png.PNGBombError):
            png.decode(data, MAX_PIXELS)
        w, h, _, _, _ = png.read_header(data)
        self.assertGreater(w * h, MAX_PIXELS)

    def test_bytes_after_iend_are_ignored(self):
        data = self.valid()
        _, _, a = png.decode(data, MAX_PIXELS)
        _, _, b = png.decode(data + b"trailing garbage \x00\xff", MAX_PIXELS)
        np.testing.assert_array_equal(a, b)

    def chunks(self, data):
        out, pos = [], 8
        while pos < len(data):
            (n,) = struct.unpack(">I", data[pos:pos + 4])
            out.append((data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]))
            pos += 12 + n
        return out

    def build(self, chunks):
        return png.SIGNATURE + b"".join(pngwriter.chunk(t, p) for t, p in chunks)

    def test_structural_violations(self):
        cs = self.chunks(self.valid())
        ihdr, idats, iend = cs[0], [c for c in cs if c[0] == b"IDAT"], cs[-1]
        z = b"".join(p for _, p in idats)
        text = (b"tEXt", b"k\x00v")
        raw = zlib.decompress(z)
        cases = {
            "no IEND": [ihdr] + idats,
            "no IDAT": [ihdr, iend],
            "IHDR not first": [text, ihdr] + idats + [iend],
            "IDATs not consecutive": [ihdr, idats[0], text] + idats[1:] + [iend],
            "IDAT after the stream": [ihdr] + idats + [(b"IDAT", b"\x00")] + [iend],
            "bytes after the zlib stream": [ihdr, (b"IDAT", z + b"\x00")] + [iend],
            "truncated zlib stream": [ihdr, (b"IDAT", z[:-5])] + [iend],
            "bad Adler-32": [ihdr, (b"IDAT", z[:-1] + bytes([z[-1] ^ 1]))] + [iend],
            "too much pixel data": [ihdr, (b"IDAT", zlib.compress(raw + b"\x00"))] + [iend],
            "too little pixel data": [ihdr, (b"IDAT", zlib.compress(raw[:-1]))] + [iend],
            "bad filter type": [ihdr, (b"IDAT", zlib.compress(b"\x05" + raw[1:]))] + [iend],
            "unknown critical chunk": [ihdr, (b"CRIT", b"")] + idats + [iend],
            "second IHDR": [ihdr, ihdr] + idats + [iend],
            "PLTE in an RGB image after IDAT": [ihdr] + idats + [(b"PLTE", b"\x00\x00\x00"), iend],
            "IEND not empty": [ihdr] + idats + [(b"IEND", b"x")],
            "bad IHDR depth": [(b"IHDR", ihdr[1][:8] + b"\x03" + ihdr[1][9:])] + idats + [iend],
            "zero width": [(b"IHDR", b"\x00\x00\x00\x00" + ihdr[1][4:])] + idats + [iend],
        }
        for name, chunks in cases.items():
            with self.subTest(case=name):
                with self.assertRaises(png.PNGError):
                    png.decode(self.build(chunks), MAX_PIXELS)
        # Sanity: the pieces rebuild into a valid image, with an ancillary chunk skipped.
        png.decode(self.build([ihdr, text] + idats + [iend]), MAX_PIXELS)

    def test_bad_crc_in_an_ancillary_chunk(self):
        data = self.valid()
        i = data.index(b"IEND") - 4
        bad = data[:i] + struct.pack(">I", 3) + b"tEXt" + b"a\x00b" + b"\x00\x00\x00\x00" + data[i:]
        with self.assertRaises(png.PNGError):
            png.decode(bad, MAX_PIXELS)

    def test_palette_index_outside_the_palette(self):
        samples = np.array([[[0], [3]]], dtype=np.int64)
        data = pngwriter.encode(samples, 8, 3, palette=[[1, 2, 3], [4, 5, 6]])
        with self.assertRaises(png.PNGError):
            png.decode(data, MAX_PIXELS)

    def test_every_truncation_is_rejected(self):
        data = self.valid()
        for n in range(len(data) - 12):  # before the end of IEND
            with self.assertRaises(png.PNGError, msg="prefix of %d bytes" % n):
                png.decode(data[:n], MAX_PIXELS)


if __name__ == "__main__":
    unittest.main()
