"""app/chat_images.py: images recognised by their bytes, limits, each refusal with its code."""

from __future__ import annotations

from typing import Any

import pytest

from app.chat_images import MAX_IMAGE_BYTES, ChatImage, read_images, sniff_media_type
from app.errors import ImageRefused
from tests.image_samples import attached, gif, jpeg, png, webp

HTML = b"<!doctype html><html><body>not an image</body></html>"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(png(), "image/png", id="png"),
        pytest.param(jpeg(), "image/jpeg", id="jpeg"),
        pytest.param(gif(), "image/gif", id="gif"),
        pytest.param(b"GIF87a" + bytes(20), "image/gif", id="gif87a"),
        pytest.param(webp(), "image/webp", id="webp"),
        pytest.param(b"RIFF\x24\x00\x00\x00WAVEfmt ", None, id="riff-but-wave"),
        pytest.param(b"\x00\x00\x00\x00WEBP", None, id="webp-without-riff"),
        pytest.param(HTML, None, id="html"),
        pytest.param(b"", None, id="empty"),
    ],
)
def test_the_kind_is_read_from_the_bytes(data: bytes, expected: str | None) -> None:
    assert sniff_media_type(data) == expected


def test_images_are_decoded_in_order_with_their_exact_bytes() -> None:
    sent = [png(), gif(), jpeg(), webp()]
    kinds = ["image/png", "image/gif", "image/jpeg", "image/webp"]
    images = read_images([attached(data, kind) for data, kind in zip(sent, kinds, strict=True)])
    assert [(image.media_type, image.data) for image in images] == list(
        zip(kinds, sent, strict=True)
    )
    assert read_images(None) == ()
    assert read_images([]) == ()


def test_an_image_of_exactly_the_limit_is_taken() -> None:
    data = png(padding=0)
    data += bytes(MAX_IMAGE_BYTES - len(data))
    [image] = read_images([attached(data)])
    assert len(image.data) == MAX_IMAGE_BYTES


@pytest.mark.parametrize(
    ("images", "code", "words"),
    [
        pytest.param([attached(png())] * 5, "too_many_images", "at most 4 images", id="five"),
        pytest.param(
            [attached(png(padding=6_000_000))], "image_too_large", "image 1 is 5.7 MB", id="6mb"
        ),
        pytest.param(
            [attached(png()), attached(png(padding=MAX_IMAGE_BYTES))],
            "image_too_large",
            "image 2 is",
            id="one-byte-over-decoded",
        ),
        pytest.param(
            [attached(HTML)], "image_type_unsupported", "not a PNG, JPEG, WebP or GIF", id="html"
        ),
        pytest.param(
            [attached(png(), "image/jpeg")],
            "image_type_mismatch",
            "declared 'image/jpeg' but its content is 'image/png'",
            id="declared-jpeg",
        ),
        pytest.param(
            [attached(png(), "image/svg+xml")], "image_type_mismatch", "svg", id="declared-svg"
        ),
        pytest.param(
            [{"media_type": "image/png", "data": "not base64!"}],
            "image_invalid",
            "not valid base64",
            id="bad-base64",
        ),
        pytest.param([{"data": "AAAA"}], "image_invalid", "media_type and data", id="no-type"),
        pytest.param(["AAAA"], "image_invalid", "must be an object", id="a-string"),
        pytest.param({"media_type": "image/png"}, "image_invalid", "must be a list", id="object"),
    ],
)
def test_each_refusal_has_its_code_and_says_which_image(images: Any, code: str, words: str) -> None:
    with pytest.raises(ImageRefused) as refused:
        read_images(images)
    assert refused.value.code == code
    assert words in str(refused.value)


def test_a_repr_never_holds_the_bytes() -> None:
    assert repr(ChatImage("image/png", bytes(1000))) == "ChatImage('image/png', 1000 bytes)"
