"""``/api/chats/{id}/env``: secrets are write-only, names and values checked, others' chats 404."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api

SECRET = "sk_live_write-only-0123456789"


@pytest.mark.anyio
async def test_a_secret_is_stored_but_never_returned(api: Api) -> None:
    chat = api.store.create_chat(api.alice.user.id, "app")
    client = api.alice.client
    put = await client.put(
        f"/api/chats/{chat.id}/env/STRIPE_KEY", json={"value": SECRET, "secret": True}
    )
    assert put.status_code == 200, put.text
    assert SECRET not in put.text
    assert put.json()["variable"] == {
        "name": "STRIPE_KEY",
        "secret": True,
        "public": False,
        "updated": put.json()["variable"]["updated"],
    }
    await client.put(f"/api/chats/{chat.id}/env/VITE_API_URL", json={"value": "https://x.test"})
    listed = await client.get(f"/api/chats/{chat.id}/env")
    assert listed.status_code == 200
    assert SECRET not in listed.text
    by_name = {item["name"]: item for item in listed.json()["variables"]}
    assert "value" not in by_name["STRIPE_KEY"]
    assert by_name["VITE_API_URL"]["value"] == "https://x.test"
    assert by_name["VITE_API_URL"]["public"] is True
    assert listed.json()["limits"]["public_prefixes"] == ["VITE_", "NEXT_PUBLIC_"]
    assert [item.value for item in api.store.app_variables(chat.id)] == [SECRET, "https://x.test"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "body", "field", "words"),
    [
        pytest.param("PATH", {"value": "/x"}, "name", "reserved", id="reserved"),
        pytest.param("npm_config_registry", {"value": "hunter2"}, "name", "reserved", id="npm"),
        pytest.param("MY-KEY", {"value": "hunter2"}, "name", "not an environment", id="dash"),
        pytest.param(
            "VITE_SECRET",
            {"value": SECRET, "secret": True},
            "secret",
            "visitor",
            id="public-secret",
        ),
        pytest.param("BIG", {"value": "x" * 9000, "secret": True}, "value", "over", id="too-big"),
    ],
)
async def test_refused_variables_say_why_and_never_echo_the_value(
    api: Api, name: str, body: dict[str, object], field: str, words: str
) -> None:
    chat = api.store.create_chat(api.alice.user.id, "app")
    response = await api.alice.client.put(f"/api/chats/{chat.id}/env/{name}", json=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "app_env_refused"
    assert error["field"] == field
    assert words in error["message"]
    assert str(body["value"]) not in error["message"]
    assert api.store.app_variables(chat.id) == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({}, "value", id="no-value"),
        pytest.param({"value": 3}, "value", id="number"),
        pytest.param({"value": "x", "secret": "yes"}, "secret", id="secret-not-bool"),
        pytest.param({"value": "x", "public": True}, "public", id="unknown-field"),
    ],
)
async def test_malformed_bodies_are_422(api: Api, body: dict[str, object], field: str) -> None:
    chat = api.store.create_chat(api.alice.user.id, "app")
    response = await api.alice.client.put(f"/api/chats/{chat.id}/env/MODE", json=body)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == field


@pytest.mark.anyio
async def test_another_persons_chat_is_404(api: Api) -> None:
    chat = api.store.create_chat(api.alice.user.id, "app")
    api.store.set_chat_sandbox(chat.id, "s1")
    for response in (
        await api.bob.client.get(f"/api/chats/{chat.id}/env"),
        await api.bob.client.put(f"/api/chats/{chat.id}/env/MODE", json={"value": "x"}),
        await api.bob.client.delete(f"/api/chats/{chat.id}/env/MODE"),
    ):
        assert response.status_code == 404
    assert api.store.app_variables(chat.id) == []


@pytest.mark.anyio
async def test_a_change_reaches_the_chats_running_sandbox(api: Api) -> None:
    chat = api.store.create_chat(api.alice.user.id, "app")
    client = api.alice.client
    first = await client.put(f"/api/chats/{chat.id}/env/MODE", json={"value": "a"})
    assert first.json()["dev_server"] == "not_running"  # no sandbox yet
    api.sandboxes.add("s1", chat.id)
    api.store.set_chat_sandbox(chat.id, "s1")
    api.sandboxes.containers["s1"] = object()
    second = await client.put(f"/api/chats/{chat.id}/env/MODE", json={"value": "b"})
    assert second.json()["dev_server"] == "restarting"
    deleted = await client.delete(f"/api/chats/{chat.id}/env/MODE")
    assert deleted.json() == {"dev_server": "restarting"}
    assert api.sandboxes.applied == ["s1", "s1"]
    missing = await client.delete(f"/api/chats/{chat.id}/env/MODE")
    assert missing.status_code == 404
