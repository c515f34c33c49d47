"""Signing out (app/api/sessions.py): ``POST /api/logout`` ends this browser's session, ``POST
/api/me/sessions/revoke`` every browser session of the user; API tokens and other users'
sessions stay."""

from __future__ import annotations

import httpx
import pytest

from app.api.auth import SESSION_COOKIE
from tests.api.conftest import Api

pytestmark = pytest.mark.anyio


def browser(api: Api, session: str) -> httpx.AsyncClient:
    """A browser signed in with ``session``, sending the UI's own origin."""
    return httpx.AsyncClient(
        base_url=api.url, cookies={SESSION_COOKIE: session}, headers={"Origin": api.url}
    )


def cleared(response: httpx.Response) -> bool:
    """Whether the response clears the session cookie."""
    cookie = response.headers.get("set-cookie", "")
    return cookie.startswith(f'{SESSION_COOKIE}=""') and "Max-Age=0" in cookie


async def test_logout_ends_this_session_only_and_clears_its_cookie(api: Api) -> None:
    this = api.store.create_token(api.alice.user.id, "session", 60)
    other = api.store.create_token(api.alice.user.id, "session", 60)
    async with browser(api, this) as client:
        response = await client.post("/api/logout")
        assert response.status_code == 204
        assert cleared(response)
    async with browser(api, this) as client:
        assert (await client.get("/api/me")).status_code == 401
    async with browser(api, other) as client:
        assert (await client.get("/api/me")).status_code == 200
    assert (await api.alice.client.get("/api/me")).status_code == 200  # the API token


@pytest.mark.parametrize(
    "cookies",
    [
        pytest.param({}, id="no-cookie"),
        pytest.param({SESSION_COOKIE: "made-up"}, id="unknown-session"),
    ],
)
async def test_logout_without_a_live_session_is_no_error(api: Api, cookies: dict[str, str]) -> None:
    async with httpx.AsyncClient(base_url=api.url, cookies=cookies) as client:
        response = await client.post("/api/logout")
    assert response.status_code == 204
    assert cleared(response)


async def test_a_page_of_another_origin_cannot_sign_its_user_out(api: Api) -> None:
    session = api.store.create_token(api.alice.user.id, "session", 60)
    forged = {"Origin": "http://abc123.preview.localhost:8000"}
    async with httpx.AsyncClient(base_url=api.url, cookies={SESSION_COOKIE: session}) as client:
        for path in ("/api/logout", "/api/me/sessions/revoke"):
            response = await client.post(path, headers=forged)
            assert response.status_code == 403, path
            assert response.json()["error"]["code"] == "cross_origin"
        assert (await client.get("/api/me")).status_code == 200


async def test_revoke_ends_every_browser_session_and_link_of_the_user_only(api: Api) -> None:
    sessions = [api.store.create_token(api.alice.user.id, "session", 60) for _ in range(3)]
    link = api.store.create_token(api.alice.user.id, "login", 60)
    bobs = api.store.create_token(api.bob.user.id, "session", 60)
    async with browser(api, sessions[0]) as client:
        response = await client.post("/api/me/sessions/revoke")
    assert response.status_code == 200
    assert response.json() == {"revoked": 4}
    assert cleared(response)
    for session in sessions:
        async with browser(api, session) as client:
            assert (await client.get("/api/me")).status_code == 401
    assert api.store.consume_login_token(link) is None
    async with browser(api, bobs) as client:
        assert (await client.get("/api/me")).status_code == 200
    assert (await api.alice.client.get("/api/me")).status_code == 200  # the API token


async def test_revoke_needs_a_signed_in_user(api: Api) -> None:
    response = await api.anonymous.post("/api/me/sessions/revoke")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
