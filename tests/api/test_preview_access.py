"""The preview gate: owners reach their dev server, others get 404, credentials stay out.

The "dev server" is a small app on loopback that echoes what reached it; the fake manager
resolves the sandbox to it. Requests go to the API's port with a preview ``Host``.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import httpx
import pytest
import websockets
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.api.auth import SESSION_COOKIE
from app.api.preview_access import PREVIEW_COOKIE
from tests.api.conftest import Api
from tests.api.harness import serving

pytestmark = pytest.mark.anyio
SANDBOX = "abc123"
HOST = f"{SANDBOX}.preview.localhost:8000"


async def plant_cookies(request: Request) -> Response:
    """A generated app's attempt to set kiln's own cookies for the preview host."""
    response = JSONResponse({"planted": True})
    for cookie in (f"{SESSION_COOKIE}=forged", f"{PREVIEW_COOKIE}=forged", "KILN_SESSION=x"):
        response.headers.append("set-cookie", f"{cookie}; Path=/")
    response.headers.append("set-cookie", "theme=dark; Path=/")
    return response


async def echo(request: Request) -> Response:
    return JSONResponse(
        {
            "path": request.url.path,
            "cookie": request.headers.get("cookie"),
            "authorization": request.headers.get("authorization"),
        }
    )


@pytest.fixture
async def dev_server(api: Api) -> AsyncIterator[str]:
    """An echoing upstream registered as alice's sandbox ``abc123``."""
    app = Starlette(routes=[Route("/plant", plant_cookies), Route("/{path:path}", echo)])
    async with serving(app) as url:
        port = int(url.rsplit(":", 1)[1])
        chat = api.store.create_chat(api.alice.user.id, "previewed")
        api.sandboxes.add(SANDBOX, chat.id, ip="127.0.0.1", port=port)
        yield url


async def test_the_owner_reaches_the_dev_server_without_kiln_credentials(
    api: Api, dev_server: str
) -> None:
    response = await api.alice.client.get("/src/app.js?v=1", headers={"Host": HOST})
    assert response.status_code == 200
    assert response.json() == {"path": "/src/app.js", "cookie": None, "authorization": None}


@pytest.mark.parametrize(
    ("who", "host", "status", "code"),
    [
        pytest.param("bob", HOST, 404, "not_found", id="another-user"),
        pytest.param("alice", "fff999.preview.localhost:8000", 404, "not_found", id="unknown"),
        pytest.param("anonymous", HOST, 401, "unauthenticated", id="anonymous"),
    ],
)
async def test_everyone_else_is_refused(
    api: Api, dev_server: str, who: str, host: str, status: int, code: str
) -> None:
    client = {"alice": api.alice.client, "bob": api.bob.client}.get(who, api.anonymous)
    response = await client.get("/", headers={"Host": host})
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


async def test_the_login_link_signs_the_browser_in_on_the_preview_host(
    api: Api, dev_server: str
) -> None:
    link = (await api.alice.client.post(f"/api/sandboxes/{SANDBOX}/preview-login")).json()["url"]
    path = link.split(HOST, 1)[1]
    async with httpx.AsyncClient(base_url=api.url, headers={"Host": HOST}) as browser:
        login = await browser.get(path)
        assert login.status_code == 303
        assert login.headers["location"] == "/"
        session = login.cookies[PREVIEW_COOKIE]
        page = await browser.get("/", headers={"Cookie": f"{PREVIEW_COOKIE}={session}; theme=dark"})
        again = await browser.get(path)
    assert page.status_code == 200
    assert page.json()["cookie"] == "theme=dark"
    assert again.status_code == 401
    assert again.json()["error"]["code"] == "invalid_login_token"


async def test_a_login_link_signs_in_on_its_own_preview_host_only(
    api: Api, dev_server: str
) -> None:
    link = (await api.alice.client.post(f"/api/sandboxes/{SANDBOX}/preview-login")).json()["url"]
    token = link.split("token=", 1)[1]
    alice_chat = api.store.create_chat(api.alice.user.id, "alice's second")
    api.sandboxes.add("bbb222", alice_chat.id, ip="127.0.0.1", port=1)
    other = "bbb222.preview.localhost:8000"
    async with httpx.AsyncClient(base_url=api.url, headers={"Host": other}) as browser:
        login = await browser.get(f"/__kiln/login?token={token}")
    assert login.status_code == 401
    assert login.json()["error"]["code"] == "invalid_login_token"
    assert PREVIEW_COOKIE not in login.cookies


async def test_a_preview_login_link_cannot_sign_in_the_ui(api: Api, dev_server: str) -> None:
    """The login CSRF: a generated app sent the top window to ``/login?token=<the attacker's
    preview link token>``, signing the victim's UI in as the attacker."""
    link = (await api.alice.client.post(f"/api/sandboxes/{SANDBOX}/preview-login")).json()["url"]
    token = link.split("token=", 1)[1]
    async with httpx.AsyncClient(base_url=api.url) as browser:
        ui_login = await browser.get(f"/login?token={token}")
        preview_login = await browser.get(f"/__kiln/login?token={token}", headers={"Host": HOST})
    assert ui_login.status_code == 401
    assert ui_login.json()["error"]["code"] == "invalid_login_token"
    assert SESSION_COOKIE not in ui_login.cookies
    assert preview_login.status_code == 303  # still good where it belongs


async def test_the_preview_cookie_is_no_api_credential(api: Api, dev_server: str) -> None:
    link = (await api.alice.client.post(f"/api/sandboxes/{SANDBOX}/preview-login")).json()["url"]
    async with httpx.AsyncClient(base_url=api.url, headers={"Host": HOST}) as browser:
        login = await browser.get(link.split(HOST, 1)[1])
    value = login.cookies[PREVIEW_COOKIE]
    async with httpx.AsyncClient(base_url=api.url) as ui:
        for name in (SESSION_COOKIE, PREVIEW_COOKIE):
            me = await ui.get("/api/me", headers={"Cookie": f"{name}={value}"})
            assert me.status_code == 401, name


async def test_the_dev_server_cannot_set_kilns_cookies(api: Api, dev_server: str) -> None:
    response = await api.alice.client.get("/plant", headers={"Host": HOST})
    assert response.status_code == 200
    assert response.headers.get_list("set-cookie") == ["theme=dark; Path=/"]


async def test_the_preview_cookie_is_host_only_and_httponly(api: Api, dev_server: str) -> None:
    link = (await api.alice.client.post(f"/api/sandboxes/{SANDBOX}/preview-login")).json()["url"]
    token = link.split("token=", 1)[1]
    async with httpx.AsyncClient(base_url=api.url, headers={"Host": HOST}) as browser:
        login = await browser.get(f"/__kiln/login?token={token}")
    cookie = login.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=None; Secure; Partitioned" in cookie
    assert "Domain" not in cookie


@pytest.mark.parametrize(
    "host",
    [
        pytest.param(f"{SANDBOX}.preview.evil.example", id="another-domain"),
        pytest.param(f"{SANDBOX}.preview.localhost.evil.example:8000", id="suffix-added"),
        pytest.param(f"{SANDBOX}.preview.kiln.localhost", id="deeper"),
    ],
)
async def test_previews_are_served_on_the_configured_domain_only(
    api: Api, dev_server: str, host: str
) -> None:
    link = (await api.alice.client.post(f"/api/sandboxes/{SANDBOX}/preview-login")).json()["url"]
    token = link.split("token=", 1)[1]
    login = await api.alice.client.get(f"/__kiln/login?token={token}", headers={"Host": host})
    page = await api.alice.client.get("/plant", headers={"Host": host})
    assert (login.status_code, page.status_code) == (404, 404)
    assert "set-cookie" not in login.headers
    assert "set-cookie" not in page.headers  # /plant of the dev server sets one


async def test_a_websocket_of_another_user_is_closed_as_not_found(
    api: Api, dev_server: str
) -> None:
    port = int(api.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as sock:
        async with websockets.connect(
            f"ws://{HOST}/",
            sock=sock,
            additional_headers={"Authorization": f"Bearer {api.bob.token}"},
        ) as connection:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await connection.recv()
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4404
