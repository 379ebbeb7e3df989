"""The `baton-json-v1` reference format, byte for byte (docs/implementing.md section 4.2).

opaque_state = BODY + ',"tag":"<TAG>"}' with
  BODY = {"v":1,"id":"<ID>","exp":<EXP>,"items":[<ITEM>,...]
  ITEM = {"hash":"<HASH>","rows":<ROWS>,"cols":<COLS>}
and TAG = lowercase hex HMAC-SHA256(key, MAC input), where
  MAC input = LP("baton.encoder.v1/baton-json-v1/tag") LP(backend) LP(producer_instance_id)
              LP(endpoint.host) U32(endpoint.port) LP(endpoint.protocol) LP(BODY)
  (U32 = 4 bytes big-endian; LP(s) = U32(len(s)) s; an absent endpoint is "", 0, "").

parse() checks the grammar exactly (SU-4), then the hashes (H-3); a caller then checks the
backend (N-1), verify() the ids and the tag (SU-5), and the entry's state (SU-2). Every
failure raises RuleError with the rule that decides it, in that order.
"""

import collections
import hashlib
import hmac
import re
import struct

from . import errors

MAX_BYTES = 65536  # CONTRACT L-1
MAX_ITEMS = 64
MAX_ITEM_BYTES = 256 << 20
TAG_DOMAIN = b"baton.encoder.v1/baton-json-v1/tag"

Item = collections.namedtuple("Item", "hash rows cols")
Reference = collections.namedtuple("Reference", "id exp items tag body")

_STR = r'([\x20\x21\x23-\x5b\x5d-\x7e]*)'  # printable ASCII without " and \
_NUM = r'(0|[1-9][0-9]*)'
_ITEM = r'\{"hash":' + '"' + _STR + '"' + r',"rows":' + _NUM + r',"cols":' + _NUM + r'\}'
_ITEM_RE = re.compile(_ITEM)
_BODY_RE = re.compile(
    r'\{"v":1,"id":"' + _STR + r'","exp":(-?(?:0|[1-9][0-9]*)),"items":\[(' + _ITEM + r'(?:,' + _ITEM + r')*)\]'
)
_TAIL_RE = re.compile(r',"tag":"([0-9a-f]{64})"\}')
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _lp(b):
    return struct.pack(">I", len(b)) + b


def mac_input(backend, instance_id, endpoint, body, body_only=False):
    """endpoint: (host, port, protocol) or None (absent). body_only: the seeded bug
    `tag-body-only` (bugs.py), never otherwise."""
    if body_only:  # seeded bug: the outer fields are not under the tag
        return _lp(TAG_DOMAIN) + _lp(body)
    host, port, protocol = endpoint if endpoint is not None else ("", 0, "")
    return (_lp(TAG_DOMAIN) + _lp(backend.encode("utf-8")) + _lp(instance_id.encode("utf-8"))
            + _lp(host.encode("utf-8")) + struct.pack(">I", port) + _lp(protocol.encode("utf-8")) + _lp(body))


def compute_tag(key, backend, instance_id, endpoint, body, body_only=False):
    return hmac.new(key, mac_input(backend, instance_id, endpoint, body, body_only), hashlib.sha256).hexdigest()


def body_bytes(entry_id, exp, items):
    parts = ['{"hash":"%s","rows":%d,"cols":%d}' % (i.hash, i.rows, i.cols) for i in items]
    return ('{"v":1,"id":"%s","exp":%d,"items":[%s]' % (entry_id, exp, ",".join(parts))).encode("ascii")


def seal(key, backend, instance_id, endpoint, entry_id, exp, items, body_only=False):
    """The opaque_state bytes of a new reference."""
    body = body_bytes(entry_id, exp, items)
    tag = compute_tag(key, backend, instance_id, endpoint, body, body_only)
    return body + (',"tag":"%s"}' % tag).encode("ascii")


def check_size(opaque, limit=MAX_BYTES):
    """L-1: decided on the length alone, before anything else is read."""
    if len(opaque) > limit:
        raise errors.invalid("L-1", "opaque_state of %d bytes is over the bound of %d" % (len(opaque), limit))


def parse(opaque, check_hashes=True):
    """Grammar (SU-4) then hashes (H-3). Returns a Reference; raises RuleError."""
    check_size(opaque)
    try:
        text = bytes(opaque).decode("ascii")
    except UnicodeDecodeError:
        raise errors.invalid("SU-4", "reference is not ASCII")
    m = _BODY_RE.match(text)
    if not m:
        raise errors.invalid("SU-4", "reference does not match the baton-json-v1 grammar")
    t = _TAIL_RE.fullmatch(text, m.end())
    if not t:
        raise errors.invalid("SU-4", "reference does not end with a 64-hex-digit tag")
    if m.group(2) == "-0":
        raise errors.invalid("SU-4", "exp is -0")
    exp = int(m.group(2))
    if not -(1 << 63) <= exp < (1 << 63):
        raise errors.invalid("SU-4", "exp out of the signed 64-bit range")
    items = []
    for im in _ITEM_RE.finditer(m.group(3)):
        rows, cols = int(im.group(2)), int(im.group(3))
        if not (1 <= rows <= 0xFFFFFFFF and 1 <= cols <= 0xFFFFFFFF):
            raise errors.invalid("SU-4", "rows/cols out of range")
        if rows * cols * 4 > MAX_ITEM_BYTES:
            raise errors.invalid("SU-4", "an item over 256 MiB")
        items.append(Item(im.group(1), rows, cols))
    if not 1 <= len(items) <= MAX_ITEMS:
        raise errors.invalid("SU-4", "%d items (1..%d allowed)" % (len(items), MAX_ITEMS))
    ref = Reference(m.group(1), exp, tuple(items), t.group(1), m.group(0).encode("ascii"))
    if check_hashes:
        for i, it in enumerate(ref.items):
            if it.hash and not _HEX64.match(it.hash):
                raise errors.invalid("H-3", "item %d: content hash %r is not 64 lowercase hex digits" % (i, it.hash[:80]))
    return ref


def check_ids(ref, instance_id):
    """SU-5, the id forms: nothing that is not an id ever goes into a path."""
    if not _HEX32.match(ref.id):
        raise errors.invalid("SU-5", "entry id is not 32 lowercase hex digits")
    if not UUID_RE.match(instance_id):
        raise errors.invalid("SU-5", "producer_instance_id is not a lowercase UUID")


def verify(ref, key, backend, instance_id, endpoint, body_only=False):
    """SU-5, the tag (constant-time compare)."""
    want = compute_tag(key, backend, instance_id, endpoint, ref.body, body_only)
    if not hmac.compare_digest(want, ref.tag):
        raise errors.invalid("SU-5", "the reference's tag does not verify")


def endpoint_of(msg_ref):
    """EncoderCacheRef -> the endpoint triple of the MAC input (None when absent)."""
    if not msg_ref.HasField("producer_endpoint"):
        return None
    e = msg_ref.producer_endpoint
    return (e.host, e.port, e.protocol)
