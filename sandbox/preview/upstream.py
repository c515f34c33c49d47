"""Forwarding to a sandbox's dev server: the preview proxy's HTTP streaming and WebSocket pump.

Header rules (hop-by-hop headers dropped, private cookies stripped both ways: not sent to the
dev server, and a ``Set-Cookie`` of one from it dropped; ``X-Forwarded-*`` set, ``Host`` left
to the client so it names the dev server) and the two directions of each protocol. Routing,
authorization and error pages live in :mod:`sandbox.preview.proxy`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
import httpx
import websockets
from starlette.requests import ClientDisconnect, HTTPConnection
from starlette.types import Receive, Scope, Send
from websockets.asyncio.client import ClientConnection, connect

from sandbox.errors import SandboxUnavailable
from sandbox.preview.hmr_hold import HmrHold
from sandbox.preview.reporter_injection import send_with_reporter

# RFC 9110 7.6.1: hop-by-hop headers are the proxy's business, never forwarded.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# The proxy sets these itself; whatever the client sent is not trusted.
PROXY_SET = frozenset({"host", "x-forwarded-host", "x-forwarded-proto"})
# The websockets client writes its own handshake headers.
WS_HANDSHAKE = frozenset(
    {
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "sec-websocket-protocol",
        "sec-websocket-accept",
    }
)
WS_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
WS_BAD_GATEWAY = 1014
# Codes RFC 6455 reserves for reporting; they may never be sent in a close frame.
WS_UNSENDABLE = frozenset({1004, 1005, 1006, 1015})


def ws_scheme(base_url: str) -> str:
    """``ws`` or ``wss`` for a dev server's ``http``/``https`` base URL."""
    return "wss" if base_url.startswith("https:") else "ws"


def upstream_url(base_url: str, scope: Scope) -> httpx.URL:
    """The dev server URL for this request: its base, the request's raw path and query."""
    raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
    query: bytes = scope.get("query_string", b"")
    return httpx.URL(base_url).copy_with(raw_path=raw_path + (b"?" + query if query else b""))


def upstream_headers(
    scope: Scope, private_cookies: frozenset[str], also_drop: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """The request headers to forward: no hop-by-hop, no private cookies, ``X-Forwarded-*`` set.

    ``Host`` is dropped so that the client writes the dev server's own ``host:port``, which a
    DNS-rebinding check (Vite's ``allowedHosts``) accepts, unlike ``<id>.preview.<host>``.
    """
    incoming = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
    drop = HOP_BY_HOP | PROXY_SET | also_drop | connection_tokens(incoming)
    headers: list[tuple[str, str]] = []
    for name, value in incoming:
        if name == "cookie":
            value = strip_cookies(value, private_cookies)
        if name not in drop and value:
            headers.append((name, value))
    client = scope.get("client")
    if client:
        forwarded = [v for k, v in headers if k == "x-forwarded-for"] + [client[0]]
        headers = [(k, v) for k, v in headers if k != "x-forwarded-for"]
        headers.append(("x-forwarded-for", ", ".join(forwarded)))
    headers.append(("x-forwarded-host", HTTPConnection(scope).headers.get("host", "")))
    headers.append(
        ("x-forwarded-proto", "https" if scope.get("scheme") in ("https", "wss") else "http")
    )
    return headers


def connection_tokens(headers: Iterable[tuple[str, str]]) -> frozenset[str]:
    """Header names listed in ``Connection``: hop-by-hop for this one connection."""
    tokens = (t.strip().lower() for k, v in headers if k == "connection" for t in v.split(","))
    return frozenset(t for t in tokens if t)


def strip_cookies(cookie_header: str, private_cookies: frozenset[str]) -> str:
    """A ``Cookie`` value without the private cookies (kiln's session)."""
    pairs = (pair.strip() for pair in cookie_header.split(";"))
    kept = [p for p in pairs if p and p.partition("=")[0].strip() not in private_cookies]
    return "; ".join(kept)


async def request_body(receive: Receive) -> AsyncIterator[bytes]:
    """The request body as the browser sends it, chunk by chunk (never buffered whole)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        if chunk:
            yield chunk
        if not message.get("more_body", False):
            return


def sets_private_cookie(set_cookie: bytes, private_cookies: frozenset[str]) -> bool:
    """Whether a ``Set-Cookie`` value sets one of the private cookies (kiln's session)."""
    name = set_cookie.split(b";", 1)[0].partition(b"=")[0].strip().decode("latin-1")
    return name.lower() in {cookie.lower() for cookie in private_cookies}


def response_headers(
    response: httpx.Response,
    base_url: str,
    origin: str,
    private_cookies: frozenset[str] = frozenset(),
) -> list[tuple[bytes, bytes]]:
    """The dev server's response headers minus hop-by-hop ones and ``Set-Cookie`` of private
    cookies (generated code must not plant kiln's session), with ``Location`` made public."""
    raw = [(k.lower(), v) for k, v in response.headers.raw]
    drop = HOP_BY_HOP | connection_tokens(
        (k.decode("latin-1"), v.decode("latin-1")) for k, v in raw
    )
    upstream_origin = str(httpx.URL(base_url).copy_with(raw_path=b"")).rstrip("/").encode()
    headers = []
    for name, value in raw:
        if name.decode("latin-1") in drop:
            continue
        if name == b"set-cookie" and sets_private_cookie(value, private_cookies):
            continue
        if name == b"location" and value.startswith(upstream_origin):
            value = origin.encode() + value[len(upstream_origin) :]
        headers.append((name, value))
    return headers


def public_origin(scope: Scope) -> str:
    """The origin the browser used, e.g. ``http://abc.preview.localhost:8000``."""
    scheme = "https" if scope.get("scheme") == "https" else "http"
    return f"{scheme}://{HTTPConnection(scope).headers.get('host', '')}"


async def send_response(
    scope: Scope,
    receive: Receive,
    send: Send,
    response: httpx.Response,
    base_url: str,
    private_cookies: frozenset[str] = frozenset(),
    with_reporter: bool = False,
) -> None:
    """Stream the dev server's response to the browser; stop when the browser leaves.

    ``with_reporter``: the response is a page's plain HTML and gets the error reporter's tag
    (:mod:`sandbox.preview.reporter_injection`).

    A dev server failing mid-body raises ``SandboxUnavailable``, so the server drops the
    connection and the browser sees a truncated response rather than a complete-looking one.
    """
    headers = response_headers(response, base_url, public_origin(scope), private_cookies)
    failure: Exception | None = None  # stays None when the browser's leaving cancels the relay
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(cancel_on_disconnect, receive, tasks.cancel_scope)
        # Failures come back as values: raised inside the group they would be wrapped.
        relay = relay_with_reporter if with_reporter else relay_response
        failure = await relay(send, response, headers)
        tasks.cancel_scope.cancel()
    if failure is not None:
        raise SandboxUnavailable(
            f"preview: the dev server at {base_url!r} failed mid-response: {failure!s}"
        ) from failure


async def relay_response(
    send: Send, response: httpx.Response, headers: list[tuple[bytes, bytes]]
) -> Exception | None:
    """Send status, headers and raw body chunks; return the dev server's failure, if any."""
    try:
        start = {"type": "http.response.start", "status": response.status_code}
        await send({**start, "headers": headers})
        # Raw bytes: the body stays as the dev server encoded it (gzip etc.).
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:
        return None  # the browser went away; nothing left to tell it
    except (httpx.TransportError, httpx.StreamError) as exc:
        return exc
    return None


async def relay_with_reporter(
    send: Send, response: httpx.Response, headers: list[tuple[bytes, bytes]]
) -> Exception | None:
    """:func:`relay_response` for a page's HTML, the reporter's tag inserted."""
    try:
        await send_with_reporter(send, response, headers)
    except OSError:
        return None
    except (httpx.TransportError, httpx.StreamError) as exc:
        return exc
    return None


async def cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once the browser disconnects (the request body is consumed by now)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def open_websocket(
    base_url: str, scope: Scope, private_cookies: frozenset[str], open_timeout: float | None
) -> ClientConnection:
    """Connect to the dev server's WebSocket, offering the browser's subprotocols.

    Raises what ``websockets`` raises (``OSError``, ``TimeoutError``, ``WebSocketException``).
    """
    uri = str(upstream_url(base_url, scope).copy_with(scheme=ws_scheme(base_url)))
    return await connect(
        uri,
        subprotocols=scope.get("subprotocols") or None,
        additional_headers=upstream_headers(scope, private_cookies, WS_HANDSHAKE),
        user_agent_header=None,
        proxy=None,  # an environment proxy must never see sandbox traffic
        compression=None,
        open_timeout=open_timeout,
        max_size=WS_MAX_MESSAGE_BYTES,
        close_timeout=5,
    )


def sendable_close_code(code: int | None, fallback: int) -> int:
    """A close code that may go in a close frame: reserved ones become ``fallback``."""
    if code is None or code == 1005:
        return 1000
    return fallback if code in WS_UNSENDABLE else code


async def pump_websocket(
    receive: Receive, send: Send, upstream: ClientConnection, hold: HmrHold | None = None
) -> None:
    """Copy frames both ways until either side closes, then close the other side.

    With ``hold``, the dev server's messages are dropped while it is held and one full reload
    goes to the browser when it is released (:mod:`sandbox.preview.hmr_hold`).
    """

    async def send_text(text: str) -> None:
        with contextlib.suppress(OSError):  # the browser left: the pumps see it themselves
            await send({"type": "websocket.send", "text": text})

    if hold is not None:
        await hold.refresh()  # before the first message: one sent mid-answer is never let out
    async with anyio.create_task_group() as tasks:
        if hold is not None:
            tasks.start_soon(hold.watch, send_text)
        tasks.start_soon(browser_to_upstream, receive, upstream, tasks.cancel_scope)
        tasks.start_soon(upstream_to_browser, send, upstream, tasks.cancel_scope, hold)


async def browser_to_upstream(
    receive: Receive, upstream: ClientConnection, done: anyio.CancelScope
) -> None:
    """Forward the browser's messages; pass its close code on to the dev server."""
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            code = sendable_close_code(message.get("code"), fallback=1001)
            done.cancel()  # the browser is gone: stop the other pump before closing upstream
            with anyio.CancelScope(shield=True):
                await upstream.close(code, message.get("reason") or "")
            return
        data: Any = message.get("text") if message.get("text") is not None else message["bytes"]
        try:
            await upstream.send(data)
        except websockets.ConnectionClosed:
            return  # upstream_to_browser reports the close


async def upstream_to_browser(
    send: Send, upstream: ClientConnection, done: anyio.CancelScope, hold: HmrHold | None = None
) -> None:
    """Forward the dev server's messages (none while ``hold`` holds them); pass its close code
    on to the browser."""
    try:
        async for data in upstream:
            if hold is not None and hold.held:
                continue  # an update of a state not yet complete: the release reloads anyway
            kind = "text" if isinstance(data, str) else "bytes"
            await send({"type": "websocket.send", kind: data})
    except websockets.ConnectionClosedError:
        pass  # the code and reason are on the connection either way
    except OSError:
        done.cancel()  # the browser is gone; the caller closes the upstream side
        return
    code = sendable_close_code(upstream.close_code, fallback=WS_BAD_GATEWAY)
    with contextlib.suppress(OSError):  # the browser may have left meanwhile
        await send({"type": "websocket.close", "code": code, "reason": upstream.close_reason or ""})
    done.cancel()
