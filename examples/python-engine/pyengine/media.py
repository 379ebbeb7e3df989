"""Media items -> decoded pixels, with the bounds of CONTRACT L-6 checked before decoding.

decode_item(item, limits) -> Image(width, height, pixels uint16 [h, w, 4] NRGBA64, format).
Raises RuleError: INVALID_ARGUMENT (L-6) for anything over a bound, undecodable or of an
unsupported format (GIF and WebP are optional in the CONTRACT and this engine does not
declare them), UNIMPLEMENTED (L-6) for a `url` source (this engine never fetches).
Modality checks (L-3: video and audio are UNIMPLEMENTED) are the caller's, before this.
"""

import base64
import binascii
import collections
import re

from . import errors, jpeg, png

Image = collections.namedtuple("Image", "width height pixels format")

MiB = 1 << 20


class Limits:
    """Bounds on one media item (CONTRACT L-6)."""

    def __init__(self, max_encoded_bytes=16 * MiB, max_pixels=16 * MiB):
        self.max_encoded_bytes = max_encoded_bytes  # raw bytes, or the base64 payload decoded
        self.max_pixels = max_pixels  # width * height, checked from the header
        # A data URI is base64: 4 characters per 3 bytes, plus the "data:...;base64," prefix.
        self.max_data_uri_chars = (max_encoded_bytes + 2) // 3 * 4 + 256

    def receive_limit_bytes(self):
        """The gRPC receive limit: at least the media bound plus 1 MiB (CONTRACT L-6)."""
        return self.max_data_uri_chars + 2 * MiB


_DATA_URI = re.compile(r"^data:([^,;]*)((?:;[^,;]*)*),", re.ASCII)


def encoded_bytes(item, limits):
    """The item's encoded bytes, from raw_bytes or a data URI (bounded before decoding)."""
    which = item.WhichOneof("source")
    if which == "url":
        raise errors.unimplemented("L-6", "url media are not fetched by this engine")
    if which == "raw_bytes":
        data = item.raw_bytes
        if len(data) > limits.max_encoded_bytes:
            raise errors.invalid("L-6", "media of %d bytes is over the bound of %d" % (len(data), limits.max_encoded_bytes))
        return data
    if which == "data_uri":
        uri = item.data_uri
        if len(uri) > limits.max_data_uri_chars:
            raise errors.invalid("L-6", "data URI of %d characters is over the bound of %d" % (len(uri), limits.max_data_uri_chars))
        m = _DATA_URI.match(uri)
        if not m:
            raise errors.invalid("L-6", "malformed data URI")
        params = [p for p in m.group(2).split(";") if p]
        if "base64" not in params:
            raise errors.invalid("L-6", "data URI is not base64")
        try:
            data = base64.b64decode(uri[m.end():], validate=True)
        except (binascii.Error, ValueError) as e:
            raise errors.invalid("L-6", "data URI: invalid base64: %s" % e)
        if len(data) > limits.max_encoded_bytes:
            raise errors.invalid("L-6", "media of %d bytes is over the bound of %d" % (len(data), limits.max_encoded_bytes))
        return data
    raise errors.invalid("L-6", "media item without a source")


def sniff(data):
    if data[:8] == png.SIGNATURE:
        return "png"
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return "unknown"


def decode_item(item, limits, lenient_png_crc=False):
    data = encoded_bytes(item, limits)
    fmt = sniff(data)
    try:
        if fmt == "png":
            w, h, px = png.decode(data, limits.max_pixels, check_crc=not lenient_png_crc)
        elif fmt == "jpeg":
            w, h, px = jpeg.decode(data, limits.max_pixels)
        elif fmt in ("gif", "webp"):
            raise errors.invalid("L-6", "%s media are not supported by this engine (PNG and JPEG are)" % fmt.upper())
        else:
            raise errors.invalid("L-6", "media bytes are neither PNG nor JPEG")
    except (png.PNGError, jpeg.JPEGError) as e:
        raise errors.invalid("L-6", str(e))
    return Image(w, h, px, fmt)
