"""Provider keys: format checks per provider, encrypted storage, never echoed."""

from __future__ import annotations

import pytest

from app.api.errors import ApiError
from app.api.keys import validate_key
from tests.api.conftest import Api

ANTHROPIC = "sk-ant-api03-" + "a1B2_c3-D4" * 4
OPENAI = "sk-proj-" + "Zz9" * 10
GOOGLE = "AIzaSy" + "x" * 33


@pytest.mark.parametrize(
    ("provider", "key"),
    [
        pytest.param("anthropic", ANTHROPIC, id="anthropic"),
        pytest.param("openai", OPENAI, id="openai-project"),
        pytest.param("openai", "sk-" + "a" * 48, id="openai-legacy"),
        pytest.param("google", GOOGLE, id="google-aiza"),
        pytest.param("google", "gw_" + "k" * 30, id="google-gateway"),
        pytest.param("openai-compatible", "sk-or-v1-" + "f" * 64, id="openrouter"),
        pytest.param("openai-compatible", "token-abc123", id="vllm-api-key"),
    ],
)
def test_well_formed_keys_pass(provider: str, key: str) -> None:
    assert validate_key(provider, f"  {key}\n") == key


@pytest.mark.parametrize(
    ("provider", "key"),
    [
        pytest.param("anthropic", OPENAI, id="anthropic-given-openai"),
        pytest.param("anthropic", "sk-ant-short", id="anthropic-too-short"),
        pytest.param("openai", ANTHROPIC, id="openai-given-anthropic"),
        pytest.param("openai", "pk-" + "a" * 40, id="openai-wrong-prefix"),
        pytest.param("openai", "sk-" + "a" * 20 + " b", id="openai-with-space"),
        pytest.param("google", "AIza short", id="google-with-space"),
        pytest.param("google", "AIzaSyShort", id="google-too-short"),
        pytest.param("openai-compatible", "two words", id="compatible-with-space"),
    ],
)
def test_malformed_keys_are_refused_without_echo(provider: str, key: str) -> None:
    with pytest.raises(ApiError) as caught:
        validate_key(provider, key)
    assert caught.value.status == 422
    assert provider in caught.value.message
    assert key not in caught.value.message


@pytest.mark.anyio
async def test_put_key_stores_it_encrypted_and_lists_the_provider(api: Api) -> None:
    response = await api.alice.client.put("/api/me/keys/anthropic", json={"key": ANTHROPIC})
    assert response.status_code == 204
    assert response.content == b""
    assert api.store.provider_keys(api.alice.user.id) == {"anthropic": ANTHROPIC}
    assert api.store.provider_keys(api.bob.user.id) == {}
    me = (await api.alice.client.get("/api/me")).json()
    assert me["providers"] == ["anthropic"]
    assert ANTHROPIC not in (await api.alice.client.get("/api/me")).text
    raw = api.store.path.read_bytes()
    assert ANTHROPIC.encode() not in raw


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        pytest.param("/api/me/keys/openai", {"key": "nope"}, 422, "invalid_request", id="bad"),
        pytest.param("/api/me/keys/openai", {}, 422, "invalid_request", id="missing"),
        pytest.param("/api/me/keys/replay", {"key": OPENAI}, 404, "not_found", id="replay"),
        pytest.param("/api/me/keys/acme", {"key": OPENAI}, 404, "not_found", id="unknown"),
    ],
)
async def test_put_key_refusals(
    api: Api, path: str, body: dict[str, str], status: int, code: str
) -> None:
    response = await api.alice.client.put(path, json=body)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert api.store.provider_key_names(api.alice.user.id) == []


@pytest.mark.anyio
async def test_put_key_needs_a_user(api: Api) -> None:
    response = await api.anonymous.put("/api/me/keys/openai", json={"key": OPENAI})
    assert response.status_code == 401


@pytest.mark.anyio
async def test_delete_key_forgets_only_that_users_key(api: Api) -> None:
    for person in (api.alice, api.bob):
        stored = await person.client.put("/api/me/keys/openai", json={"key": OPENAI})
        assert stored.status_code == 204, stored.text
    response = await api.alice.client.delete("/api/me/keys/openai")
    assert response.status_code == 204, response.text
    assert (await api.alice.client.get("/api/me")).json()["providers"] == []
    assert api.store.provider_key_names(api.bob.user.id) == ["openai"]
    again = await api.alice.client.delete("/api/me/keys/openai")
    assert again.status_code == 404
    assert again.json()["error"]["code"] == "key_not_found"
    assert "no openai key" in again.json()["error"]["message"]


@pytest.mark.anyio
async def test_delete_key_of_an_unknown_provider_or_anonymous(api: Api) -> None:
    unknown = await api.alice.client.delete("/api/me/keys/nobody")
    assert unknown.status_code == 404
    assert (await api.anonymous.delete("/api/me/keys/openai")).status_code == 401
