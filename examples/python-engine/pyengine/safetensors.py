"""Safetensors entries of the shared_dir backend (docs/implementing.md section 4.3).

File: N (u64 little-endian), then N bytes of header (one JSON object, padded with spaces so
that N is a multiple of 8), then each tensor's float32 little-endian data, row-major, in
order, no gaps. dumps() writes the header the way baton does (compact, `__metadata__` first
with its keys in byte order, then the tensors in order, each as
{"dtype":"F32","shape":[R,C],"data_offsets":[B,E]}), so fixtures/vectors/entry.safetensors
comes out byte for byte. loads() reads the header as JSON (not byte for byte): at most 1 MiB,
valid UTF-8, one object, no duplicate keys anywhere, every tensor with exactly dtype, shape
and data_offsets, F32 and 2-D, the tensors tiling the data exactly.
"""

import json
import struct

import numpy as np

MAX_HEADER_BYTES = 1 << 20


class SafetensorsError(ValueError):
    pass


def dumps(tensors, metadata):
    """tensors: list of (name, float32 2-D array), in order; metadata: {str: str} -> bytes."""
    parts = ['"__metadata__":' + json.dumps(dict(sorted(metadata.items())), separators=(",", ":"))]
    off = 0
    blobs = []
    for name, arr in tensors:
        a = np.ascontiguousarray(arr, dtype="<f4")
        if a.ndim != 2:
            raise ValueError("tensor %s is not 2-D" % name)
        blobs.append(a.tobytes())
        parts.append('%s:{"dtype":"F32","shape":[%d,%d],"data_offsets":[%d,%d]}'
                     % (json.dumps(name), a.shape[0], a.shape[1], off, off + a.nbytes))
        off += a.nbytes
    header = ("{" + ",".join(parts) + "}").encode("utf-8")
    header += b" " * ((-len(header)) % 8)
    return struct.pack("<Q", len(header)) + header + b"".join(blobs)


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise SafetensorsError("safetensors: duplicate key %r" % k)
        out[k] = v
    return out


def loads(data):
    """bytes -> (metadata {str: str}, [(name, float32 array)] in data order). Raises SafetensorsError."""
    if len(data) < 8:
        raise SafetensorsError("safetensors: shorter than its header length")
    (n,) = struct.unpack("<Q", bytes(data[:8]))
    if n > MAX_HEADER_BYTES or 8 + n > len(data):
        raise SafetensorsError("safetensors: header length %d out of bounds" % n)
    try:
        header = json.loads(bytes(data[8:8 + n]).decode("utf-8"), object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError as e:
        raise SafetensorsError("safetensors: header is not UTF-8: %s" % e)
    except RecursionError:
        raise SafetensorsError("safetensors: header nests too deeply")
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        if isinstance(e, SafetensorsError):
            raise
        raise SafetensorsError("safetensors: header is not JSON: %s" % e)
    if not isinstance(header, dict):
        raise SafetensorsError("safetensors: header is not an object")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise SafetensorsError("safetensors: __metadata__ is not a string map")
    body = memoryview(data)[8 + n:]
    tensors = []
    for name, t in header.items():
        if not isinstance(t, dict) or set(t) != {"dtype", "shape", "data_offsets"}:
            raise SafetensorsError("safetensors: tensor %r is malformed" % name)
        shape, offs = t["shape"], t["data_offsets"]
        if t["dtype"] != "F32":
            raise SafetensorsError("safetensors: tensor %r is %r, not F32" % (name, t["dtype"]))
        if not (isinstance(shape, list) and len(shape) == 2 and all(type(d) is int and d > 0 for d in shape)):
            raise SafetensorsError("safetensors: tensor %r shape %r is not [rows, cols]" % (name, shape))
        if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int and o >= 0 for o in offs)):
            raise SafetensorsError("safetensors: tensor %r offsets are malformed" % name)
        b, e = offs
        if e - b != shape[0] * shape[1] * 4 or e > len(body):
            raise SafetensorsError("safetensors: tensor %r offsets do not fit its shape" % name)
        tensors.append((b, e, name, shape))
    tensors.sort()
    pos = 0
    out = []
    for b, e, name, shape in tensors:
        if b != pos:
            raise SafetensorsError("safetensors: tensor data has a gap or an overlap")
        out.append((name, np.frombuffer(body[b:e], dtype="<f4").reshape(shape).astype(np.float32)))
        pos = e
    if pos != len(body):
        raise SafetensorsError("safetensors: %d bytes after the last tensor" % (len(body) - pos))
    return meta, out
