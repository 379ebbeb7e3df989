"""Paths shared by the tests: the engine package, its generated stubs and the fixtures."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINE = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(ENGINE))
FIXTURES = os.path.join(REPO, "fixtures")
GEN = os.path.join(ENGINE, "build", "gen")
for p in (ENGINE, GEN):
    if p not in sys.path:
        sys.path.insert(0, p)


def vectors_dir():
    """fixtures/vectors (docs/implementing.md section 4), or $BATON_VECTORS_DIR, or None."""
    for d in (os.environ.get("BATON_VECTORS_DIR", ""), os.path.join(FIXTURES, "vectors")):
        if d and os.path.exists(os.path.join(d, "reference.json")):
            return d
    return None


def load_json(path):
    import json
    with open(path) as f:
        return json.load(f)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)
