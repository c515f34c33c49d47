"""Authentication: bearer API tokens, the session cookie, and the one-time login link."""

from __future__ import annotations

import httpx
import pytest

from app.api.auth import HOST_SESSION_COOKIE, SESSION_COOKIE
from tests.api.conftest import Api

pytestmark = pytest.mark.anyio


async def test_login_link_sets_an_httponly_lax_cookie_and_redirects(api: Api) -> None:
    token = api.store.create_token(api.alice.user.id, "login", 60)
    response = await api.anonymous.get(f"/login?token={token}")
    assert response.status_code == 303
    assert response.headers["location"] == "/"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie
    assert "Path=/" in cookie
    assert "Domain" not in cookie
    me = await api.anonymous.get("/api/me")
    assert me.json()["user"]["name"] == "alice"


async def test_a_login_link_works_once(api: Api) -> None:
    token = api.store.create_token(api.alice.user.id, "login", 60)
    first = await api.anonymous.get(f"/login?token={token}")
    async with httpx.AsyncClient(base_url=api.url) as other:
        second = await other.get(f"/login?token={token}")
    assert first.status_code == 303
    assert second.status_code == 401
    assert second.json()["error"]["code"] == "invalid_login_token"
    assert "set-cookie" not in second.headers


async def test_a_browser_opening_a_spent_link_gets_a_page_in_words(api: Api) -> None:
    token = api.store.create_token(api.alice.user.id, "login", 60)
    await api.anonymous.get(f"/login?token={token}")
    async with httpx.AsyncClient(base_url=api.url) as browser:
        again = await browser.get(f"/login?token={token}", headers={"accept": "text/html"})
    assert again.status_code == 401
    assert again.headers["content-type"].startswith("text/html")
    assert "This sign-in link cannot be used" in again.text
    assert "already used" in again.text
    assert "set-cookie" not in again.headers


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("", id="no-token"),
        pytest.param("?token=", id="empty"),
        pytest.param("?token=made-up", id="unknown"),
        pytest.param("?token=" + "x" * 5000, id="huge"),
    ],
)
async def test_bad_login_links_are_401(api: Api, query: str) -> None:
    response = await api.anonymous.get(f"/login{query}")
    assert response.status_code == 401


async def test_an_api_token_is_no_login_token(api: Api) -> None:
    response = await api.anonymous.get(f"/login?token={api.alice.token}")
    assert response.status_code == 401
    still = await api.alice.client.get("/api/me")
    assert still.status_code == 200


async def test_an_expired_login_token_is_refused(api: Api) -> None:
    token = api.store.create_token(api.alice.user.id, "login", -1)
    assert (await api.anonymous.get(f"/login?token={token}")).status_code == 401


@pytest.mark.parametrize(
    ("headers", "cookies"),
    [
        pytest.param({"Authorization": "Bearer nope"}, {}, id="unknown-bearer"),
        pytest.param({"Authorization": "Basic YWxpY2U6eA=="}, {}, id="basic"),
        pytest.param({"Authorization": "Bearer"}, {}, id="empty-bearer"),
        pytest.param({}, {SESSION_COOKIE: "nope"}, id="unknown-cookie"),
    ],
)
async def test_unknown_credentials_are_401(
    api: Api, headers: dict[str, str], cookies: dict[str, str]
) -> None:
    async with httpx.AsyncClient(base_url=api.url, headers=headers, cookies=cookies) as client:
        response = await client.get("/api/me")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"


async def test_token_kinds_are_not_interchangeable(api: Api) -> None:
    session = api.store.create_token(api.alice.user.id, "session", 60)
    as_bearer = {"Authorization": f"Bearer {session}"}
    async with httpx.AsyncClient(base_url=api.url, headers=as_bearer) as client:
        assert (await client.get("/api/me")).status_code == 401
    as_cookie = {SESSION_COOKIE: api.alice.token}
    async with httpx.AsyncClient(base_url=api.url, cookies=as_cookie) as client:
        assert (await client.get("/api/me")).status_code == 401
    async with httpx.AsyncClient(base_url=api.url, cookies={SESSION_COOKIE: session}) as client:
        assert (await client.get("/api/me")).json()["user"]["name"] == "alice"


async def test_the_bearer_token_wins_over_the_cookie(api: Api) -> None:
    session = api.store.create_token(api.bob.user.id, "session", 60)
    async with httpx.AsyncClient(
        base_url=api.url,
        headers={"Authorization": f"Bearer {api.alice.token}"},
        cookies={SESSION_COOKIE: session},
    ) as client:
        assert (await client.get("/api/me")).json()["user"]["name"] == "alice"


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        pytest.param(None, 201, id="no-origin"),
        pytest.param("same", 201, id="same-origin"),
        pytest.param("http://abc123.preview.localhost:8000", 403, id="preview-page"),
        pytest.param("https://evil.example", 403, id="other-site"),
    ],
)
async def test_cookie_requests_that_change_things_must_come_from_the_ui(
    api: Api, origin: str | None, status: int
) -> None:
    session = api.store.create_token(api.alice.user.id, "session", 60)
    headers = {} if origin is None else {"Origin": api.url if origin == "same" else origin}
    async with httpx.AsyncClient(base_url=api.url, cookies={SESSION_COOKIE: session}) as client:
        response = await client.post("/api/chats", content=b"{}", headers=headers)
        read = await client.get("/api/chats", headers=headers)
    assert response.status_code == status
    assert read.status_code == 200  # reading is not a forgery risk
    if status == 403:
        assert response.json()["error"]["code"] == "cross_origin"
        assert api.store.list_chats(api.alice.user.id) == []


async def test_bearer_requests_are_not_origin_checked(api: Api) -> None:
    response = await api.alice.client.post(
        "/api/chats", json={}, headers={"Origin": "https://evil.example"}
    )
    assert response.status_code == 201


@pytest.mark.parametrize(
    ("site", "status"),
    [
        pytest.param("same-origin", 200, id="the-ui"),
        pytest.param("none", 200, id="typed"),
        pytest.param("same-site", 403, id="a-preview"),
        pytest.param("cross-site", 403, id="another-site"),
    ],
)
async def test_cookie_requests_of_any_method_must_come_from_the_ui_by_fetch_metadata(
    api: Api, site: str, status: int
) -> None:
    session = api.store.create_token(api.alice.user.id, "session", 60)
    headers = {"Sec-Fetch-Site": site}
    async with httpx.AsyncClient(base_url=api.url, cookies={SESSION_COOKIE: session}) as client:
        read = await client.get("/api/chats", headers=headers)
    assert read.status_code == status
    if status == 403:
        assert read.json()["error"]["code"] == "cross_origin"


async def test_bearer_requests_are_not_checked_by_fetch_metadata(api: Api) -> None:
    response = await api.alice.client.get("/api/chats", headers={"Sec-Fetch-Site": "same-site"})
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("host", "cookie"),
    [
        pytest.param("kiln.localhost:8000", HOST_SESSION_COOKIE, id="localhost-name"),
        pytest.param("127.0.0.1:8000", SESSION_COOKIE, id="plain-http"),
    ],
)
async def test_the_ui_cookie_is_host_prefixed_where_secure_cookies_work(
    api: Api, host: str, cookie: str
) -> None:
    token = api.store.create_token(api.alice.user.id, "login", 60)
    response = await api.anonymous.get(f"/login?token={token}", headers={"Host": host})
    assert response.headers["set-cookie"].startswith(f"{cookie}=")
    session = response.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
    # Only that name is read on that host: a plain kiln_session may have come from a preview.
    for name, status in ((cookie, 200), (SESSION_COOKIE if cookie != SESSION_COOKIE else "x", 401)):
        headers = {"Host": host, "Cookie": f"{name}={session}"}
        assert (await api.anonymous.get("/api/me", headers=headers)).status_code == status
