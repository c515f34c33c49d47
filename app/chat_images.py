"""Images a person attaches to a chat message: which kinds kiln takes, how many, how large.

A message carries at most :data:`MAX_IMAGES` images of at most :data:`MAX_IMAGE_BYTES` each
(decoded), PNG, JPEG, WebP or GIF. The kind is recognised by the bytes' magic number, never by a
file name or the declared type: an HTML page renamed ``.png`` is refused
(``image_type_unsupported``), and a declared ``media_type`` that disagrees with the bytes is
refused too (``image_type_mismatch``) rather than corrected, since the client got it wrong. Every
refusal is an :class:`~app.errors.ImageRefused` with its own stable code and a message naming
which image (1-based, as a person counts) and why; the API raises it before any run is queued.

The limits are the strictest of the providers kiln sends images to (Anthropic's 5 MB per image);
the web composer mirrors them (app/web/composer_images.js) so most refusals never leave the page.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Literal

from app.errors import (
    ImageInvalid,
    ImageTooLarge,
    ImageTypeMismatch,
    ImageTypeRefused,
    TooManyImages,
)

MAX_IMAGES = 4
MB = 1024 * 1024
MAX_IMAGE_BYTES = 5 * MB
# The longest base64 text an image within the limit can have (4 characters per 3 bytes).
MAX_IMAGE_BASE64 = -(-MAX_IMAGE_BYTES // 3) * 4
MediaType = Literal["image/png", "image/jpeg", "image/webp", "image/gif"]
MEDIA_TYPES: tuple[MediaType, ...] = ("image/png", "image/jpeg", "image/webp", "image/gif")
# (offset, magic bytes, media type): the formats' signatures.
_SIGNATURES: tuple[tuple[int, bytes, MediaType], ...] = (
    (0, b"\x89PNG\r\n\x1a\n", "image/png"),
    (0, b"\xff\xd8\xff", "image/jpeg"),
    (0, b"GIF87a", "image/gif"),
    (0, b"GIF89a", "image/gif"),
    (8, b"WEBP", "image/webp"),  # after b"RIFF" and the chunk size, checked below
)


@dataclass(frozen=True, slots=True)
class ChatImage:
    """One image as a provider receives it: its media type and its exact bytes."""

    media_type: MediaType
    data: bytes = b""

    def __repr__(self) -> str:  # never megabytes of bytes in a log line
        return f"ChatImage({self.media_type!r}, {len(self.data)} bytes)"

    @property
    def base64(self) -> str:
        """The bytes in standard base64 (what the providers' JSON carries)."""
        return base64.b64encode(self.data).decode("ascii")

    @property
    def data_url(self) -> str:
        """``data:<media type>;base64,<bytes>`` (OpenAI's ``image_url`` form)."""
        return f"data:{self.media_type};base64,{self.base64}"


def sniff_media_type(data: bytes) -> MediaType | None:
    """The media type ``data``'s magic number says, or None for anything else."""
    for offset, magic, media_type in _SIGNATURES:
        if data[offset : offset + len(magic)] == magic:
            if media_type == "image/webp" and not data.startswith(b"RIFF"):
                continue
            return media_type
    return None


def read_images(value: Any) -> tuple[ChatImage, ...]:
    """The ``images`` field of a message (``[{media_type, data}]``, data in base64), checked:
    raises the :class:`~app.errors.ImageRefused` that says what is wrong with which image."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ImageInvalid(f"images must be a list, not {type(value).__name__}")
    if len(value) > MAX_IMAGES:
        raise TooManyImages(
            f"a message may carry at most {MAX_IMAGES} images, this one has {len(value)}"
        )
    return tuple(read_image(number, entry) for number, entry in enumerate(value, start=1))


def read_image(number: int, entry: Any) -> ChatImage:
    """Image ``number`` (1-based) of a message, decoded and recognised by its bytes."""
    if not isinstance(entry, dict) or set(entry) != {"media_type", "data"}:
        raise ImageInvalid(f"image {number} must be an object with media_type and data")
    declared, text = entry["media_type"], entry["data"]
    if not isinstance(declared, str) or not isinstance(text, str):
        raise ImageInvalid(f"image {number}: media_type and data must be strings")
    if len(text) > MAX_IMAGE_BASE64:  # refused before decoding megabytes more than allowed
        raise ImageTooLarge(too_large(number, len(text) * 3 // 4))
    data = _decoded(number, text)
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageTooLarge(too_large(number, len(data)))
    actual = sniff_media_type(data)
    if actual is None:
        raise ImageTypeRefused(
            f"image {number} is not a PNG, JPEG, WebP or GIF image (its first bytes are "
            f"{data[:8]!r}); kiln looks at the content, not the name"
        )
    if declared != actual:
        raise ImageTypeMismatch(
            f"image {number} is declared {declared!r} but its content is {actual!r}"
        )
    return ChatImage(actual, data)


def too_large(number: int, size: int) -> str:
    """The refusal of image ``number`` of ``size`` bytes."""
    return (
        f"image {number} is {size / MB:.1f} MB; an image may be at most {MAX_IMAGE_BYTES // MB} MB"
    )


def _decoded(number: int, text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImageInvalid(f"image {number}: data is not valid base64 ({exc})") from None
