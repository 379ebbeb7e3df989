#!/usr/bin/python3
"""Independent safetensors reader for shareddir's interop test.

Usage: read_safetensors.py MANIFEST.json

The manifest (written by the Go test) lists files and what each must hold:
  {"files": [{"path": ..., "metadata": {...} or null,
              "tensors": [{"name", "dtype", "shape", "values"?, "sum"?,
                           "samples"?: [[flat_index, value], ...]}]}]}
This script parses every file with struct/json/numpy only (no Go code, no
safetensors package), checks the layout rules and compares the values. It
prints one line per file and exits 1 on the first mismatch.
"""
import json
import math
import struct
import sys

import numpy

NUMPY_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}


def fail(path, msg):
    print("FAIL %s: %s" % (path, msg))
    sys.exit(1)


def as_array(raw, dtype, shape):
    if dtype == "BF16":  # upper half of a float32
        u = numpy.frombuffer(raw, dtype="<u2").astype(numpy.uint32) << 16
        arr = u.view(numpy.float32)
    else:
        arr = numpy.frombuffer(raw, dtype=NUMPY_DTYPES[dtype])
    return arr.reshape(shape)


def check_file(spec):
    path = spec["path"]
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail(path, "shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if n % 8 != 0:
        fail(path, "header length %d not a multiple of 8" % n)
    if 8 + n > len(blob):
        fail(path, "header length %d past the end" % n)
    text = blob[8:8 + n].decode("utf-8")
    if text.rstrip(" ") != text.strip() or not text.startswith("{"):
        fail(path, "header is not a space-padded JSON object: %r" % text[:80])
    header = json.loads(text)
    data = blob[8 + n:]

    metadata = header.pop("__metadata__", None)
    if metadata is not None and not all(isinstance(v, str) for v in metadata.values()):
        fail(path, "non-string metadata %r" % metadata)
    if metadata != spec["metadata"]:
        fail(path, "metadata %r, want %r" % (metadata, spec["metadata"]))

    entries = sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"]))
    want_names = [t["name"] for t in spec["tensors"]]
    if [k for k, _ in entries] != want_names:
        fail(path, "tensors in data order %r, want %r" % ([k for k, _ in entries], want_names))
    pos = 0
    for (name, info), want in zip(entries, spec["tensors"]):
        if set(info) != {"dtype", "shape", "data_offsets"}:
            fail(path, "%s has fields %r" % (name, sorted(info)))
        begin, end = info["data_offsets"]
        if begin != pos:
            fail(path, "%s begins at %d, want %d (contiguous)" % (name, begin, pos))
        if info["dtype"] != want["dtype"] or info["shape"] != want["shape"]:
            fail(path, "%s is %s%r, want %s%r" % (name, info["dtype"], info["shape"], want["dtype"], want["shape"]))
        itemsize = 2 if info["dtype"] == "BF16" else numpy.dtype(NUMPY_DTYPES[info["dtype"]]).itemsize
        count = int(numpy.prod(info["shape"], dtype=numpy.int64)) if info["shape"] else 1
        if end - begin != count * itemsize:
            fail(path, "%s spans %d bytes, shape needs %d" % (name, end - begin, count * itemsize))
        arr = as_array(data[begin:end], info["dtype"], info["shape"])
        flat = arr.reshape(-1)
        if "values" in want and flat.tolist() != want["values"]:
            fail(path, "%s values %r, want %r" % (name, flat.tolist()[:16], want["values"][:16]))
        if "sum" in want:
            got = math.fsum(flat.astype(numpy.float64).tolist())
            if got != want["sum"]:
                fail(path, "%s sum %r, want %r" % (name, got, want["sum"]))
        for idx, v in want.get("samples", []):
            if float(flat[idx]) != v:
                fail(path, "%s[%d] = %r, want %r" % (name, idx, float(flat[idx]), v))
        pos = end
    if pos != len(data):
        fail(path, "tensors end at %d of %d data bytes" % (pos, len(data)))
    print("ok %s: %d tensors, header %d bytes" % (path, len(entries), n))


def main():
    with open(sys.argv[1]) as f:
        manifest = json.load(f)
    for spec in manifest["files"]:
        check_file(spec)
    print("checked %d files" % len(manifest["files"]))


if __name__ == "__main__":
    main()
