"""Request bodies: the size limit (declared or streamed), JSON objects only, field checks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.requests import Request

from app.api.bodies import (
    MAX_BODY_BYTES,
    optional_text,
    read_object,
    reject_unknown,
    required_int,
    required_text,
)
from app.api.chats import MESSAGE_BODY_BYTES
from app.api.errors import ApiError
from tests.api.conftest import Api

pytestmark = pytest.mark.anyio
# 60 KB of nested arrays: deeper than Python's recursion limit, inside the size limit.
NESTED = b'{"title": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"


async def test_a_declared_oversized_body_is_413(api: Api) -> None:
    body = b'{"title": "' + b"x" * MESSAGE_BODY_BYTES + b'"}'
    response = await api.alice.client.post("/api/chats", content=body)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"
    assert api.store.list_chats(api.alice.user.id) == []


async def test_a_streamed_oversized_body_is_413(api: Api) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"title": "'
        for _ in range(MESSAGE_BODY_BYTES // 65_536 + 1):
            yield b"x" * 65_536
        yield b'"}'

    response = await api.alice.client.post("/api/chats", content=chunks())
    assert response.status_code == 413


async def test_only_a_message_may_be_larger_than_64_kb(api: Api) -> None:
    """The room for images is a message's alone: a rename is held to the 64 KB of any body."""
    created = await api.alice.client.post("/api/chats", json={"title": "t"})
    body = b'{"title": "' + b"x" * MAX_BODY_BYTES + b'"}'
    path = f"/api/chats/{created.json()['chat']['id']}"
    response = await api.alice.client.patch(path, content=body)
    assert response.status_code == 413
    assert f"over {MAX_BODY_BYTES} bytes" in response.json()["error"]["message"]


async def test_a_content_length_in_other_digits_is_no_size() -> None:
    """uvicorn refuses such a header itself; behind another server, '²' (a digit to
    ``isdigit()``, latin-1 as headers are) must not reach ``int()``."""

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b'{"a": 1}', "more_body": False}

    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(b"content-length", "²".encode("latin-1"))],
    }
    assert await read_object(Request(scope, receive)) == {"a": 1}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"{nope", "not valid JSON", id="malformed"),
        pytest.param(b"[1, 2]", "must be a JSON object, not list", id="array"),
        pytest.param(b'"text"', "must be a JSON object, not str", id="string"),
        pytest.param(b"\xff\xfe", "not valid JSON", id="not-utf8"),
        pytest.param(NESTED, "nested deeper than", id="nested-60kb-array"),
        pytest.param(b'{"title": ' + b"7" * 5000 + b"}", "more digits than", id="5000-digits"),
        pytest.param(b'{"title": "\\ud800"}', "lone surrogate", id="lone-surrogate"),
        pytest.param(b'{"t\\udfff": "x"}', "lone surrogate", id="lone-surrogate-in-a-key"),
    ],
)
async def test_bodies_that_are_no_json_object_are_400(api: Api, body: bytes, message: str) -> None:
    response = await api.alice.client.post("/api/chats", content=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_json"
    assert message in error["message"]


async def test_an_empty_body_is_an_empty_object(api: Api) -> None:
    response = await api.alice.client.post("/api/chats")
    assert response.status_code == 201


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        pytest.param({}, "is required", id="missing"),
        pytest.param({"name": None}, "is required", id="null"),
        pytest.param({"name": ""}, "must not be empty", id="empty"),
        pytest.param({"name": 3}, "must be a string, not int", id="number"),
        pytest.param({"name": "abcdef"}, "is longer than 5 characters (6)", id="long"),
    ],
)
def test_required_text_names_the_field_and_the_problem(body: dict[str, Any], problem: str) -> None:
    with pytest.raises(ApiError) as caught:
        required_text(body, "name", 5)
    assert caught.value.status == 422
    assert caught.value.message == f"field 'name' {problem}"
    assert caught.value.extra == {"field": "name"}


def test_optional_text_and_unknown_fields() -> None:
    assert optional_text({}, "title", 5) is None
    assert optional_text({"title": "ok"}, "title", 5) == "ok"
    reject_unknown({"title": "x"}, frozenset({"title"}))
    with pytest.raises(ApiError, match="'colour' is not accepted here"):
        reject_unknown({"title": "x", "colour": "red"}, frozenset({"title"}))


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param(None, "is required", id="missing"),
        pytest.param(True, "must be a whole number, not bool", id="a-bool"),
        pytest.param(1.0, "must be a whole number, not float", id="a-float"),
        pytest.param("3", "must be a whole number, not str", id="a-string"),
        pytest.param(0, "must be from 1 to 10, not 0", id="below"),
        pytest.param(11, "must be from 1 to 10, not 11", id="above"),
    ],
)
def test_required_int_names_the_field_and_the_problem(value: Any, problem: str) -> None:
    with pytest.raises(ApiError) as refused:
        required_int({"line": value}, "line", 1, 10)
    assert refused.value.status == 422
    assert str(refused.value) == f"field 'line' {problem}"


def test_required_int_takes_a_whole_number_in_range() -> None:
    assert required_int({"line": 10}, "line", 1, 10) == 10
