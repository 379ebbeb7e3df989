"""A deterministic toy vision encoder: resize, patchify, a fixed random projection.

Preset `py-tiny`: the image is resampled (nearest sample at pixel centres) to 112x112,
cut into 7x7 patches of 16x16 RGBA pixels, each patch (1024 values in [0, 1]) projected by a
fixed Gaussian matrix (seed 0x5EED) to 256 columns, a fixed position term added, then tanh:
float32 [49, 256] per image. `py-small` is the same at 224x224 (196 rows). Everything is
numpy in float64, cast to float32 at the end, with fixed seeds: the same pixels give the same
bytes in every process, which is what B-1 (E+PD == aggregated) needs.
"""

import numpy as np

PRESETS = {
    # name: (side in pixels, patch side, columns)
    "py-tiny": (112, 16, 256),
    "py-small": (224, 16, 256),
}


class Encoder:
    def __init__(self, preset):
        if preset not in PRESETS:
            raise ValueError("unknown preset %r (have %s)" % (preset, ", ".join(sorted(PRESETS))))
        self.preset = preset
        self.side, self.patch, self.cols = PRESETS[preset]
        n = self.side // self.patch
        self.rows = n * n
        rng = np.random.default_rng(0x5EED)
        fan_in = self.patch * self.patch * 4
        self.proj = rng.standard_normal((fan_in, self.cols)) / np.sqrt(fan_in)
        self.pos = 0.1 * rng.standard_normal((self.rows, self.cols))

    def item_bytes(self):
        """Bytes of one item's float32 embeddings."""
        return self.rows * self.cols * 4

    def encode(self, pixels):
        """pixels: uint16 [h, w, 4] NRGBA64 -> float32 [rows, cols]."""
        h, w, _ = pixels.shape
        ys = ((np.arange(self.side) + 0.5) * h / self.side).astype(np.int64)
        xs = ((np.arange(self.side) + 0.5) * w / self.side).astype(np.int64)
        img = pixels[ys][:, xs].astype(np.float64) / 65535.0
        n, p = self.side // self.patch, self.patch
        patches = img.reshape(n, p, n, p, 4).transpose(0, 2, 1, 3, 4).reshape(n * n, p * p * 4)
        centred = patches - 0.5
        return np.tanh(centred @ self.proj + self.pos).astype(np.float32)
