"""A deterministic toy language model with a prefix cache keyed by content (CONTRACT H-2, H-5).

Tokenizer: words split on whitespace; `<image>` marks an image position (CONTRACT "How
requests look"); a word's id is 3 + crc32(word) mod (VOCAB - 3). Ids 0..2 are reserved
(0 pad, 1 EOS, 2 image placeholder) and never generated.

Model: a small recurrent net in float64 numpy with fixed seeds. Each prompt position feeds
h <- tanh(A h + x): a text token's x is its embedding row; an image's rows (float32
[rows, cols], any shape) are each projected to the hidden size by a matrix fixed per `cols`
(seed derived from cols). Each image also leaves a memory m (the mean of its projected rows
through tanh, scaled, one per image, added up) that does not fade while tokens are
generated. Generation is greedy: the argmax of W (h + m) over ids >= 3, then
h <- tanh(A h + E[token]). Answers depend on the prompt tokens and on every embedding value,
so two different images under one prompt get different answers.

Prefix cache: the hidden state after the prompt, keyed by the token ids with each image
position replaced by that item's identity (its content hash, or a fresh random identity when
the hash is missing: H-2). Never keyed by placeholder tokens alone, never by MediaItem.uuid
(H-5).
"""

import collections
import secrets
import threading
import zlib

import numpy as np

VOCAB = 4096
HIDDEN = 64
IMAGE_MARKER = "<image>"
IMAGE_TOKEN = 2
FIRST_WORD = 3
IMAGE_GAIN = 3.0
MEMORY_GAIN = 1.5


def tokenize(prompt):
    """Prompt text -> token ids (IMAGE_TOKEN at each marker)."""
    ids = []
    for part in prompt.replace(IMAGE_MARKER, " %s " % IMAGE_MARKER).split():
        ids.append(IMAGE_TOKEN if part == IMAGE_MARKER else FIRST_WORD + zlib.crc32(part.encode("utf-8")) % (VOCAB - FIRST_WORD))
    return ids


def token_text(tid):
    return "t%d " % tid


def fresh_identity():
    """A random identity for an item without content hash (H-2): never equal to another."""
    return "fresh:" + secrets.token_hex(16)


class Model:
    def __init__(self, cache_entries=256):
        rng = np.random.default_rng(20260101)
        self.A = rng.standard_normal((HIDDEN, HIDDEN)) * (0.9 / np.sqrt(HIDDEN))
        self.E = rng.standard_normal((VOCAB, HIDDEN)) * 0.8
        self.W = rng.standard_normal((VOCAB, HIDDEN))
        self._proj = {}
        self._cache = collections.OrderedDict()
        self._cache_entries = cache_entries
        self._lock = threading.Lock()
        self.cache_hits = 0

    def _projection(self, cols):
        with self._lock:
            p = self._proj.get(cols)
            if p is None:
                p = np.random.default_rng(1_000_003 + cols).standard_normal((cols, HIDDEN)) * (IMAGE_GAIN / np.sqrt(cols))
                self._proj[cols] = p
            return p

    def layout(self, ids, n_items):
        """Where images go: at each IMAGE_TOKEN, or (no markers) all before the prompt.

        Returns the sequence as a list of ('text', id) / ('image', k). Raises ValueError when
        markers are present but their count differs from the number of items.
        """
        markers = ids.count(IMAGE_TOKEN)
        if markers and markers != n_items:
            raise ValueError("prompt has %d <image> markers for %d items" % (markers, n_items))
        seq = []
        if not markers:
            seq = [("image", k) for k in range(n_items)]
        k = 0
        for t in ids:
            if t == IMAGE_TOKEN:
                seq.append(("image", k))
                k += 1
            else:
                seq.append(("text", t))
        return seq

    def prompt_state(self, seq, images, identities, use_cache=True, cache_key_override=None):
        """State (h, m) after the prompt (read-only). images[k]: float32 [rows, cols]; identities[k]: str."""
        key = cache_key_override
        if key is None:
            key = tuple(t if kind == "text" else ("image", identities[t]) for kind, t in seq)
        if use_cache:
            with self._lock:
                state = self._cache.get(key)
                if state is not None:
                    self._cache.move_to_end(key)
                    self.cache_hits += 1
                    return state
        h = np.zeros(HIDDEN)
        m = np.zeros(HIDDEN)
        for kind, t in seq:
            if kind == "text":
                h = np.tanh(self.A @ h + self.E[t])
            else:
                emb = np.asarray(images[t], dtype=np.float64)
                xs = emb @ self._projection(emb.shape[1])
                m = m + MEMORY_GAIN * np.tanh(np.tanh(xs).mean(axis=0) * 4.0)
                for x in xs:
                    h = np.tanh(self.A @ h + x)
        state = (h, m)
        if use_cache:
            with self._lock:
                self._cache[key] = state
                while len(self._cache) > self._cache_entries:
                    self._cache.popitem(last=False)
        return state

    def generate(self, state, max_tokens, stop_ids=()):
        """Greedy tokens from the prompt state (h, m): yields (token id, stopped) one at a time."""
        h, m = state
        for _ in range(max_tokens):
            logits = self.W @ (h + m)
            logits[:FIRST_WORD] = -np.inf
            t = int(np.argmax(logits))
            stop = t in stop_ids
            yield t, stop
            if stop:
                return
            h = np.tanh(self.A @ h + self.E[t])
