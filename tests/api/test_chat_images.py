"""Images on a message through HTTP (app/api/chats.py): taken, listed, served to their owner
only; every refusal in words, before any run; gone with the chat."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from app.chat_images import MAX_IMAGE_BYTES
from tests.api.conftest import Api
from tests.image_samples import attached, gif, jpeg, png, webp

pytestmark = pytest.mark.anyio

HTML = b"<!doctype html><html><body><script>alert(1)</script></body></html>"


async def new_chat(api: Api) -> str:
    response = await api.alice.client.post("/api/chats", json={"title": "With images"})
    assert response.status_code == 201, response.text
    chat_id: str = response.json()["chat"]["id"]
    return chat_id


async def test_a_message_carries_its_images_listed_and_served_byte_for_byte(api: Api) -> None:
    chat_id = await new_chat(api)
    sent = [(png(), "image/png"), (gif(), "image/gif"), (jpeg(), "image/jpeg")]
    sent.append((webp(), "image/webp"))
    body = {"content": "like this", "images": [attached(data, kind) for data, kind in sent]}
    posted = await api.alice.client.post(f"/api/chats/{chat_id}/messages", json=body)
    assert posted.status_code == 202, posted.text
    chat = (await api.alice.client.get(f"/api/chats/{chat_id}")).json()
    [message] = chat["messages"]
    assert message["id"] == posted.json()["message_id"]
    listed = message["images"]
    assert [(i["media_type"], i["size"]) for i in listed] == [(k, len(d)) for d, k in sent]
    for image, (data, kind) in zip(listed, sent, strict=True):
        served = await api.alice.client.get(f"/api/chats/{chat_id}/images/{image['id']}")
        assert served.status_code == 200
        assert served.content == data
        assert served.headers["content-type"] == kind
        assert served.headers["x-content-type-options"] == "nosniff"


async def test_four_images_of_the_largest_size_fit_the_body_limit(api: Api) -> None:
    chat_id = await new_chat(api)
    largest = png(padding=0)
    largest += bytes(MAX_IMAGE_BYTES - len(largest))
    body = {"content": "four big ones", "images": [attached(largest)] * 4}
    posted = await api.alice.client.post(f"/api/chats/{chat_id}/messages", json=body)
    assert posted.status_code == 202, posted.text
    [message] = api.store.list_messages(chat_id)
    assert [image.size for image in message.images] == [MAX_IMAGE_BYTES] * 4


REFUSALS = [
    pytest.param(
        [attached(png(padding=6 * 1024 * 1024))],
        "image_too_large",
        "image 1 is 6.0 MB; an image may be at most 5 MB",
        id="six-mb",
    ),
    pytest.param(
        [attached(HTML, "image/png")],
        "image_type_unsupported",
        "image 1 is not a PNG, JPEG, WebP or GIF image",
        id="html-renamed-png",
    ),
    pytest.param(
        [attached(png())] * 5,
        "too_many_images",
        "at most 4 images, this one has 5",
        id="a-fifth-image",
    ),
    pytest.param(
        [attached(png()), attached(gif(), "image/png")],
        "image_type_mismatch",
        "image 2 is declared 'image/png' but its content is 'image/gif'",
        id="declared-type-disagrees",
    ),
    pytest.param(
        [{"media_type": "image/png", "data": "%%%"}],
        "image_invalid",
        "image 1: data is not valid base64",
        id="not-base64",
    ),
]


@pytest.mark.parametrize(("images", "code", "words"), REFUSALS)
async def test_each_refusal_is_in_words_before_any_run(
    api: Api, images: list[dict[str, Any]], code: str, words: str
) -> None:
    chat_id = await new_chat(api)
    body = {"content": "like this", "images": images}
    response = await api.alice.client.post(f"/api/chats/{chat_id}/messages", json=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert words in error["message"]
    assert api.store.list_runs(chat_id) == []
    assert api.store.list_messages(chat_id) == []


@pytest.mark.parametrize(("images", "code", "words"), REFUSALS[:3])
async def test_a_refused_first_message_with_images_creates_no_chat(
    api: Api, images: list[dict[str, Any]], code: str, words: str
) -> None:
    body = {"message": {"content": "like this", "images": images}}
    response = await api.alice.client.post("/api/chats", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == code
    assert api.store.list_chats(api.alice.user.id) == []


@pytest.mark.parametrize(
    ("provider_env", "choice", "words"),
    [
        pytest.param(
            {"OPENAI_API_KEY": "sk-test"},
            {"provider": "openai", "model": "gpt-3.5-turbo"},
            "openai model 'gpt-3.5-turbo' cannot read images",
            id="text-only-model",
        ),
        pytest.param(
            {"KILN_OPENAI_COMPATIBLE_BASE_URL": "http://127.0.0.1:9/v1"},
            {"provider": "openai-compatible", "model": "llama3.1:8b"},
            "KILN_OPENAI_COMPATIBLE_IMAGES",
            id="compatible-server-not-set-up",
        ),
    ],
)
async def test_images_for_a_model_that_cannot_read_them_are_refused_before_the_run(
    api: Api, choice: dict[str, str], words: str
) -> None:
    chat_id = await new_chat(api)
    body = {"content": "like this", "images": [attached(png())], **choice}
    response = await api.alice.client.post(f"/api/chats/{chat_id}/messages", json=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "images_unsupported"
    assert words in error["message"]
    assert api.store.list_runs(chat_id) == []
    without = await api.alice.client.post(
        f"/api/chats/{chat_id}/messages", json={"content": "no images", **choice}
    )
    assert without.status_code == 202, without.text


async def test_another_user_and_a_deleted_chat_get_404(api: Api) -> None:
    chat_id = await new_chat(api)
    data = png()
    body = {"content": "like this", "images": [{"media_type": "image/png", "data": ""}]}
    body["images"][0]["data"] = base64.b64encode(data).decode()
    posted = await api.alice.client.post(f"/api/chats/{chat_id}/messages", json=body)
    assert posted.status_code == 202, posted.text
    [message] = api.store.list_messages(chat_id)
    [image] = message.images
    path = f"/api/chats/{chat_id}/images/{image.id}"
    assert (await api.alice.client.get(path)).content == data

    assert (await api.bob.client.get(path)).status_code == 404
    bobs = await api.bob.client.post("/api/chats", json={"title": "bob's"})
    bobs_path = f"/api/chats/{bobs.json()['chat']['id']}/images/{image.id}"
    refused = await api.bob.client.get(bobs_path)
    assert refused.status_code == 404  # his own chat does not reach her image either
    assert refused.json()["error"]["code"] == "not_found"
    assert (await api.anonymous.get(path)).status_code == 401

    api.store.finish_run(posted.json()["run_id"], "completed", "done")
    deleted = await api.alice.client.delete(f"/api/chats/{chat_id}")
    assert deleted.status_code in (200, 204), deleted.text
    assert (await api.alice.client.get(path)).status_code == 404
    assert api.store.chat_image(chat_id, image.id) is None
