"""``GET /api/me``: the user, stored and available providers, the default choice and the demos."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api

pytestmark = pytest.mark.anyio


async def test_me_without_keys_defaults_to_the_replay_demo(api: Api) -> None:
    response = await api.alice.client.get("/api/me")
    assert response.status_code == 200
    body = response.json()
    assert body["user"] == {"id": api.alice.user.id, "name": "alice"}
    assert body["providers"] == []
    assert body["available"] == ["replay"]
    assert body["default"] == {"provider": "replay", "model": "todo-app"}
    assert "todo-app" in body["demos"]
    assert body["limits"] == {"message_chars": 32_000, "title_chars": 200}


async def test_me_with_a_stored_key_defaults_to_that_provider(api: Api) -> None:
    api.store.set_provider_key(api.alice.user.id, "openai", "sk-" + "a" * 40)
    body = (await api.alice.client.get("/api/me")).json()
    assert body["providers"] == ["openai"]
    assert body["default"]["provider"] == "openai"
    other = (await api.bob.client.get("/api/me")).json()
    assert other["user"]["name"] == "bob"
    assert other["providers"] == []


async def test_me_needs_a_user(api: Api) -> None:
    response = await api.anonymous.get("/api/me")
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/json"


COMPATIBLE = {
    "KILN_OPENAI_COMPATIBLE_BASE_URL": "http://localhost:11434/v1",
    "KILN_OPENAI_COMPATIBLE_MODEL": "qwen2.5-coder:32b",
}


@pytest.mark.parametrize("provider_env", [pytest.param(COMPATIBLE, id="compatible")])
async def test_me_offers_a_configured_compatible_server_without_a_key(api: Api) -> None:
    body = (await api.alice.client.get("/api/me")).json()
    assert body["providers"] == []
    assert body["available"] == ["openai-compatible", "replay"]
    assert body["default"] == {"provider": "openai-compatible", "model": "qwen2.5-coder:32b"}
