"""Images for the tests of issue 26's images in the chat: real, decodable files built here.

:func:`png` is a valid PNG a browser draws (a small square of one colour); ``padding`` random
bytes after its end make it as large as a test needs while keeping every byte distinct, so a
test comparing bytes would see one changed or lost anywhere.
"""

from __future__ import annotations

import base64
import os
import struct
import zlib
from typing import Any


def _chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def png(side: int = 8, rgb: tuple[int, int, int] = (200, 40, 40), padding: int = 64) -> bytes:
    """A ``side`` x ``side`` PNG of one colour, followed by ``padding`` random bytes."""
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    row = b"\x00" + bytes(rgb) * side
    pixels = zlib.compress(row * side)
    image = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", pixels)
    return image + _chunk(b"IEND", b"") + os.urandom(padding)


def gif() -> bytes:
    """A 1x1 GIF (the smallest valid one) with random bytes after it."""
    return (
        b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00"
        b"\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;" + os.urandom(32)
    )


def jpeg() -> bytes:
    """Bytes a JPEG starts with (SOI and an APP0 marker), then random bytes."""
    return b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + os.urandom(64)


def webp() -> bytes:
    """Bytes a WebP starts with (the RIFF header naming WEBP), then random bytes."""
    return b"RIFF\x24\x00\x00\x00WEBPVP8 " + os.urandom(64)


def attached(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    """The API's form of one image: ``{media_type, data}`` in base64."""
    return {"media_type": media_type, "data": base64.b64encode(data).decode()}
