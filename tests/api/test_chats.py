"""Chats and messages through HTTP: shapes, validation, admission errors, isolation."""

from __future__ import annotations

from typing import Any

import pytest

from app.config import ServiceSettings
from tests.api.conftest import Api

pytestmark = pytest.mark.anyio


async def create_chat(api: Api, title: str | None = "First") -> dict[str, Any]:
    body = {} if title is None else {"title": title}
    response = await api.alice.client.post("/api/chats", json=body)
    assert response.status_code == 201, response.text
    chat: dict[str, Any] = response.json()["chat"]
    return chat


async def test_create_chat_answers_201_with_the_chat(api: Api) -> None:
    chat = await create_chat(api, "  My app  ")
    assert set(chat) == {"id", "title", "created", "sandbox_id"}
    assert chat["title"] == "My app"
    assert chat["sandbox_id"] is None


async def test_a_chat_without_title_gets_a_default(api: Api) -> None:
    chat = await create_chat(api, None)
    assert chat["title"] == "New chat"


async def test_list_chats_is_newest_first_and_only_mine(api: Api) -> None:
    first = await create_chat(api, "one")
    second = await create_chat(api, "two")
    await api.bob.client.post("/api/chats", json={"title": "bob's"})
    response = await api.alice.client.get("/api/chats")
    assert [chat["id"] for chat in response.json()["chats"]] == [second["id"], first["id"]]


async def test_get_chat_has_messages_and_runs(api: Api) -> None:
    chat = await create_chat(api)
    posted = await api.alice.client.post(
        f"/api/chats/{chat['id']}/messages", json={"content": "build a todo app"}
    )
    assert posted.status_code == 202, posted.text
    answer = (await api.alice.client.get(f"/api/chats/{chat['id']}")).json()
    assert answer["chat"]["id"] == chat["id"]
    assert [m["content"] for m in answer["messages"]] == ["build a todo app"]
    assert set(answer["messages"][0]) == {"id", "role", "content", "data", "created", "images"}
    assert [run["id"] for run in answer["runs"]] == [posted.json()["run_id"]]
    assert "user_id" not in answer["runs"][0]


async def test_post_message_answers_run_and_message_ids(api: Api) -> None:
    chat = await create_chat(api)
    response = await api.alice.client.post(
        f"/api/chats/{chat['id']}/messages",
        json={"content": "hi", "provider": "replay", "model": "todo-app", "template": "vanilla"},
    )
    assert response.status_code == 202
    assert set(response.json()) == {"run_id", "message_id"}
    run = api.store.get_run(response.json()["run_id"])
    assert run is not None
    assert (run.status, run.provider, run.model, run.template) == (
        "queued",
        "replay",
        "todo-app",
        "vanilla",
    )
    assert run.message_id == response.json()["message_id"]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        pytest.param({}, 422, "content", id="missing-content"),
        pytest.param({"content": "   "}, 422, "content", id="blank-content"),
        pytest.param({"content": 5}, 422, "content", id="content-not-a-string"),
        pytest.param({"content": "x" * 32_001}, 422, "content", id="content-too-long"),
        pytest.param({"content": "hi", "provider": "acme"}, 422, "provider", id="unknown-provider"),
        pytest.param({"content": "hi", "template": "rails"}, 422, "template", id="bad-template"),
        pytest.param({"content": "hi", "colour": "red"}, 422, "colour", id="unknown-field"),
    ],
)
async def test_post_message_validates_fields(
    api: Api, body: dict[str, Any], status: int, field: str
) -> None:
    chat = await create_chat(api)
    response = await api.alice.client.post(f"/api/chats/{chat['id']}/messages", json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["field"] == field
    assert repr(field) in error["message"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        pytest.param({"model": "../../etc/passwd"}, "model_refused", id="path-as-recording"),
        pytest.param({"model": "no-such-recording"}, "model_refused", id="unknown-recording"),
        pytest.param({"provider": "anthropic"}, "config_error", id="provider-without-key"),
        pytest.param({"model": "gpt-4o"}, "model_refused", id="model-of-keyless-provider"),
    ],
)
async def test_post_message_refuses_unusable_choices(
    api: Api, body: dict[str, Any], code: str
) -> None:
    chat = await create_chat(api)
    response = await api.alice.client.post(
        f"/api/chats/{chat['id']}/messages", json={"content": "hi", **body}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == code
    assert api.store.list_runs(chat["id"]) == []


async def test_admission_refusal_is_429_naming_the_limit(api: Api) -> None:
    chat = await create_chat(api)
    path = f"/api/chats/{chat['id']}/messages"
    first = await api.alice.client.post(path, json={"content": "one"})
    second = await api.alice.client.post(path, json={"content": "two"})
    assert first.status_code == 202
    assert second.status_code == 429
    error = second.json()["error"]
    assert error["code"] == "admission_refused"
    assert error["limit"] == "chat"
    assert "this chat has 1 active run(s)" in error["message"]
    assert len(api.store.list_runs(chat["id"])) == 1


async def test_another_users_chat_is_404_everywhere(api: Api) -> None:
    chat = await create_chat(api)
    bob = api.bob.client
    read = await bob.get(f"/api/chats/{chat['id']}")
    post = await bob.post(f"/api/chats/{chat['id']}/messages", json={"content": "mine now"})
    listing = await bob.get("/api/chats")
    assert (read.status_code, post.status_code) == (404, 404)
    assert read.json()["error"]["code"] == "not_found"
    assert listing.json()["chats"] == []
    assert api.store.list_runs(chat["id"]) == []
    unknown = await bob.get("/api/chats/0123456789abcdef")
    assert unknown.json() == {
        "error": {"code": "not_found", "message": "no chat '0123456789abcdef'"}
    }
    assert read.json()["error"]["message"] == f"no chat {chat['id']!r}"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        pytest.param("GET", "/api/chats", id="list"),
        pytest.param("POST", "/api/chats", id="create"),
        pytest.param("GET", "/api/chats/x", id="read"),
        pytest.param("POST", "/api/chats/x/messages", id="post"),
        pytest.param("PATCH", "/api/chats/x", id="rename"),
        pytest.param("DELETE", "/api/chats/x", id="delete"),
    ],
)
async def test_chats_need_a_user(api: Api, method: str, path: str) -> None:
    response = await api.anonymous.request(method, path, json={"content": "x"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"


COMPATIBLE = {"KILN_OPENAI_COMPATIBLE_BASE_URL": "http://localhost:11434/v1"}


@pytest.mark.parametrize("provider_env", [pytest.param(COMPATIBLE, id="compatible")])
@pytest.mark.parametrize(
    "model",
    [
        pytest.param("llama3.1:8b", id="ollama-tag"),
        pytest.param("meta-llama/Llama-3.1-8B-Instruct", id="hugging-face-path"),
        pytest.param("openrouter/" + "m" * 189, id="200-characters"),
    ],
)
async def test_a_message_may_name_an_openai_compatible_model(api: Api, model: str) -> None:
    chat = await create_chat(api)
    response = await api.alice.client.post(
        f"/api/chats/{chat['id']}/messages",
        json={"content": "hi", "provider": "openai-compatible", "model": model},
    )
    assert response.status_code == 202, response.text
    run = api.store.get_run(response.json()["run_id"])
    assert run is not None
    assert (run.provider, run.model) == ("openai-compatible", model)


@pytest.mark.parametrize(
    ("provider_env", "model", "status", "code", "words"),
    [
        pytest.param(
            {}, "llama3.1:8b", 400, "config_error", "KILN_OPENAI_COMPATIBLE_BASE_URL", id="unset"
        ),
        pytest.param(COMPATIBLE, "llama 3", 400, "model_refused", "'llama 3'", id="space"),
        pytest.param(COMPATIBLE, "m" * 201, 422, "invalid_request", "'model'", id="too-long"),
    ],
)
async def test_an_unusable_openai_compatible_choice_is_refused_in_words(
    api: Api, model: str, status: int, code: str, words: str
) -> None:
    chat = await create_chat(api)
    response = await api.alice.client.post(
        f"/api/chats/{chat['id']}/messages",
        json={"content": "hi", "provider": "openai-compatible", "model": model},
    )
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert words in error["message"]
    assert api.store.list_runs(chat["id"]) == []


async def test_a_chat_is_created_with_its_first_message(api: Api) -> None:
    body = {"title": "Todo", "message": {"content": "build a todo app", "template": "vanilla"}}
    response = await api.alice.client.post("/api/chats", json=body)
    assert response.status_code == 201, response.text
    answer = response.json()
    assert set(answer) == {"chat", "run_id", "message_id"}
    assert answer["chat"]["title"] == "Todo"
    run = api.store.get_run(answer["run_id"])
    assert run is not None
    assert (run.chat_id, run.status, run.template) == (answer["chat"]["id"], "queued", "vanilla")
    messages = api.store.list_messages(answer["chat"]["id"])
    assert [(m.id, m.content) for m in messages] == [(answer["message_id"], "build a todo app")]


@pytest.mark.parametrize(
    ("message", "status", "code"),
    [
        pytest.param({"content": "x" * 32_001}, 422, "invalid_request", id="too-long"),
        pytest.param({"content": " "}, 422, "invalid_request", id="blank"),
        pytest.param({"content": "hi", "provider": "anthropic"}, 400, "config_error", id="no-key"),
        pytest.param({"content": "hi", "model": "nope"}, 400, "model_refused", id="no-recording"),
        pytest.param("hi", 422, "invalid_request", id="not-an-object"),
    ],
)
async def test_a_refused_first_message_creates_no_chat(
    api: Api, message: Any, status: int, code: str
) -> None:
    response = await api.alice.client.post("/api/chats", json={"message": message})
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert api.store.list_chats(api.alice.user.id) == []


async def test_a_first_message_refused_by_admission_creates_no_chat(
    api: Api, service_settings: ServiceSettings
) -> None:
    limit = service_settings.max_active_runs_per_user
    for number in range(limit):
        created = await api.alice.client.post("/api/chats", json={"message": {"content": "go"}})
        assert created.status_code == 201, (number, created.text)
    refused = await api.alice.client.post("/api/chats", json={"message": {"content": "more"}})
    assert refused.status_code == 429
    assert refused.json()["error"]["limit"] == "user"
    assert len(api.store.list_chats(api.alice.user.id)) == limit


async def test_a_chat_is_renamed_by_its_owner_only(api: Api) -> None:
    chat = await create_chat(api, "old")
    path = f"/api/chats/{chat['id']}"
    renamed = await api.alice.client.patch(path, json={"title": "  new name "})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["chat"]["title"] == "new name"
    assert (await api.alice.client.get(path)).json()["chat"]["title"] == "new name"
    assert (await api.bob.client.patch(path, json={"title": "bob's"})).status_code == 404
    blank = await api.alice.client.patch(path, json={"title": "  "})
    assert blank.status_code == 422
    assert blank.json()["error"]["field"] == "title"
    too_long = await api.alice.client.patch(path, json={"title": "t" * 201})
    assert too_long.status_code == 422
