"""Preview: a reverse proxy (HTTP and WebSocket) from ``<sandbox>.preview.<host>`` to a dev server.

:class:`PreviewProxy` is a pure ASGI app. A request whose ``Host`` is ``<id>.preview.<anything>``
is checked with the injected ``authorize`` callable (the owner's session), its dev server's base
URL is looked up with the injected ``resolve`` callable, and the request is forwarded there:

- HTTP through one shared ``httpx.AsyncClient``, streaming the body both ways. While the dev
  server does not accept connections yet, the browser gets a small page (503, ``Retry-After``)
  that refreshes itself, never a bare 502.
- WebSocket (Vite's HMR, subprotocol ``vite-hmr``) through a ``websockets`` client, pumping
  frames both ways until either side closes.

Any other host falls through to the wrapped ``app`` (or a JSON 404), so the proxy can wrap the
service's main app.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import websockets
from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from websockets.asyncio.client import ClientConnection, connect

from sandbox.errors import SandboxUnavailable

Authorize = Callable[[HTTPConnection, str], Awaitable[bool]]
Resolve = Callable[[str], Awaitable[str | None]]

# A DNS label: what a browser can put in front of ``.preview.``.
SANDBOX_ID = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
RETRY_AFTER_SECONDS = 2
DEFAULT_TIMEOUT = httpx.Timeout(connect=3.0, read=120.0, write=60.0, pool=10.0)
# Kiln's own session must never reach the sandbox: the dev server runs generated code.
DEFAULT_PRIVATE_COOKIES = ("kiln_session",)
WS_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
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
NOT_READY_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError)
WS_TRY_AGAIN_LATER = 1013
WS_BAD_GATEWAY = 1014
WS_POLICY_VIOLATION = 1008
WS_UNKNOWN_SANDBOX = 4404
# Codes RFC 6455 reserves for reporting; they may never be sent in a close frame.
WS_UNSENDABLE = frozenset({1004, 1005, 1006, 1015})

STARTING_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{retry}"><title>Starting preview</title>
<style>body{{font:16px system-ui,sans-serif;display:grid;place-items:center;
min-height:100vh;margin:0;color:#444}}</style></head>
<body><main><h1>Starting the preview&hellip;</h1>
<p>The dev server of sandbox <code>{sandbox}</code> is not up yet.
This page retries every {retry} seconds.</p></main></body></html>
"""


async def allow_all(connection: HTTPConnection, sandbox_id: str) -> bool:
    """An ``authorize`` that lets everyone in (tests, single-user setups)."""
    return True


def validate_sandbox_id(sandbox_id: str) -> str:
    """``sandbox_id`` if it can label a preview host (lowercase ``[a-z0-9-]``); else ValueError."""
    if not SANDBOX_ID.fullmatch(sandbox_id):
        raise ValueError(f"not a valid sandbox id for a preview host: {sandbox_id!r}")
    return sandbox_id


def preview_url(
    sandbox_id: str, public_host: str, port: int | None = None, scheme: str = "http"
) -> str:
    """The browser URL of a sandbox's preview, e.g. ``http://abc.preview.localhost:8000/``."""
    validate_sandbox_id(sandbox_id)
    if scheme not in ("http", "https"):
        raise ValueError(f"preview scheme must be http or https, got {scheme!r}")
    default_port = 443 if scheme == "https" else 80
    suffix = "" if port is None or port == default_port else f":{port}"
    return f"{scheme}://{sandbox_id}.preview.{public_host}{suffix}/"


def preview_label(host: str) -> str | None:
    """The label in front of ``.preview.`` in a ``Host`` value; None for any other host."""
    label, dot, rest = host.lower().partition(".")
    if not dot or not label or not rest.startswith("preview.") or rest == "preview.":
        return None
    return label


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the proxy will not forward: an HTTP status and a WebSocket close code."""

    status: int
    code: str
    message: str
    close_code: int


class PreviewProxy:
    """ASGI app forwarding ``<id>.preview.<host>`` to the dev server ``resolve(id)`` names."""

    def __init__(
        self,
        resolve: Resolve,
        *,
        authorize: Authorize = allow_all,
        app: ASGIApp | None = None,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        private_cookies: Iterable[str] = DEFAULT_PRIVATE_COOKIES,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        """``app`` serves every other host; ``client`` defaults to one the proxy owns."""
        self.resolve = resolve
        self.authorize = authorize
        self.app = app
        self.timeout = timeout
        self.private_cookies = frozenset(private_cookies)
        # trust_env=False: a proxy from the environment must never see sandbox traffic.
        self.client = client or httpx.AsyncClient(
            timeout=timeout, trust_env=False, follow_redirects=False
        )

    async def aclose(self) -> None:
        """Close the shared HTTP client (also done at lifespan shutdown)."""
        await self.client.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Route one ASGI connection: preview hosts are proxied, the rest fall through."""
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        label = preview_label(HTTPConnection(scope).headers.get("host", ""))
        if label is None:
            await self._fall_through(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await receive()  # the client's websocket.connect; the proxy answers it below
        refusal, base_url = await self._admit(scope, receive, send, label)
        if refusal is not None:
            await refuse(scope, receive, send, refusal)
        elif scope["type"] == "http":
            await self._forward_http(scope, receive, send, base_url, label)
        else:
            await self._forward_websocket(scope, receive, send, base_url)

    async def _admit(
        self, scope: Scope, receive: Receive, send: Send, label: str
    ) -> tuple[Refusal | None, str]:
        """Validate, authorize (before resolving, so strangers cannot probe ids) and resolve."""
        if not SANDBOX_ID.fullmatch(label):
            msg = f"not a valid sandbox id: {label!r}"
            return Refusal(400, "invalid_sandbox_id", msg, WS_POLICY_VIOLATION), ""
        connection: HTTPConnection = (
            Request(scope, receive) if scope["type"] == "http" else WebSocket(scope, receive, send)
        )
        if not await self.authorize(connection, label):
            msg = f"no access to the preview of sandbox {label!r}"
            return Refusal(403, "forbidden", msg, WS_POLICY_VIOLATION), ""
        base_url = await self.resolve(label)
        if base_url is None:
            msg = f"no sandbox {label!r}"
            return Refusal(404, "unknown_sandbox", msg, WS_UNKNOWN_SANDBOX), ""
        return None, base_url

    async def _fall_through(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.app is not None:
            await self.app(scope, receive, send)
            return
        host = HTTPConnection(scope).headers.get("host", "")
        msg = f"not a preview host: {host!r}"
        await refuse(scope, receive, send, Refusal(404, "not_found", msg, WS_POLICY_VIOLATION))

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the lifespan to the wrapped app, closing the shared client at shutdown."""

        async def send_closing_client(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                await self.aclose()
            await send(message)

        if self.app is not None:
            await self.app(scope, receive, send_closing_client)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send_closing_client({"type": "lifespan.shutdown.complete"})
                return

    async def _forward_http(
        self, scope: Scope, receive: Receive, send: Send, base_url: str, sandbox_id: str
    ) -> None:
        headers = upstream_headers(scope, self.private_cookies)
        incoming = HTTPConnection(scope).headers
        has_body = "content-length" in incoming or "transfer-encoding" in incoming
        request = self.client.build_request(
            scope["method"],
            upstream_url(base_url, scope),
            headers=headers,
            content=request_body(receive) if has_body else None,
        )
        try:
            response = await self.client.send(request, stream=True)
        except ClientDisconnect:  # the browser left while sending its body
            return
        except httpx.TransportError as exc:
            await refuse(scope, receive, send, transport_refusal(exc, sandbox_id, base_url))
            return
        try:
            await send_response(scope, receive, send, response, base_url)
        finally:
            await response.aclose()

    async def _forward_websocket(
        self, scope: Scope, receive: Receive, send: Send, base_url: str
    ) -> None:
        uri = str(upstream_url(base_url, scope).copy_with(scheme=ws_scheme(base_url)))
        try:
            upstream = await connect(
                uri,
                subprotocols=scope.get("subprotocols") or None,
                additional_headers=upstream_headers(scope, self.private_cookies, WS_HANDSHAKE),
                user_agent_header=None,
                proxy=None,
                compression=None,
                open_timeout=self.timeout.connect,
                max_size=WS_MAX_MESSAGE_BYTES,
                close_timeout=5,
            )
        except (OSError, TimeoutError, websockets.WebSocketException) as exc:
            await refuse(scope, receive, send, websocket_refusal(exc, uri))
            return
        try:
            await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})
            await pump_websocket(receive, send, upstream)
        finally:
            await upstream.close()


async def refuse(scope: Scope, receive: Receive, send: Send, refusal: Refusal) -> None:
    """Answer with a JSON error (HTTP) or an accepted-then-closed socket (WebSocket)."""
    if scope["type"] == "http":
        if refusal.code == "preview_starting" and wants_html(scope):
            await starting_page(scope, receive, send, refusal.message)
            return
        body = {"error": {"code": refusal.code, "message": refusal.message}}
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if refusal.status == 503 else None
        await JSONResponse(body, refusal.status, headers)(scope, receive, send)
        return
    # Accept first so a browser sees the close code; echo a requested subprotocol because
    # browsers fail a handshake that ignores theirs, which would hide the code again.
    requested = scope.get("subprotocols") or [None]
    await send({"type": "websocket.accept", "subprotocol": requested[0]})
    reason = refusal.message.encode()[:123].decode(errors="ignore")  # RFC 6455: 123 bytes max
    await send({"type": "websocket.close", "code": refusal.close_code, "reason": reason})


def transport_refusal(exc: httpx.TransportError, sandbox_id: str, base_url: str) -> Refusal:
    """What to answer when the dev server could not give a response at all."""
    if isinstance(exc, NOT_READY_ERRORS):
        msg = f"the dev server of sandbox {sandbox_id!r} is not up yet"
        return Refusal(503, "preview_starting", msg, WS_TRY_AGAIN_LATER)
    if isinstance(exc, httpx.TimeoutException):
        msg = f"the dev server at {base_url!r} did not answer in time"
        return Refusal(504, "preview_timeout", msg, WS_TRY_AGAIN_LATER)
    msg = f"the dev server at {base_url!r} failed: {type(exc).__name__}"
    return Refusal(502, "preview_upstream_error", msg, WS_BAD_GATEWAY)


def websocket_refusal(exc: Exception, uri: str) -> Refusal:
    """What to answer when the dev server's WebSocket handshake failed."""
    if isinstance(exc, (OSError, TimeoutError)):
        msg = f"the dev server at {uri!r} is not up yet"
        return Refusal(503, "preview_starting", msg, WS_TRY_AGAIN_LATER)
    msg = f"the dev server at {uri!r} refused the WebSocket: {exc}"
    return Refusal(502, "preview_upstream_error", msg, WS_BAD_GATEWAY)


async def starting_page(scope: Scope, receive: Receive, send: Send, sandbox_id: str) -> None:
    """The self-refreshing 503 page shown while the dev server is not up."""
    html = STARTING_PAGE.format(retry=RETRY_AFTER_SECONDS, sandbox=sandbox_id)
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS), "Cache-Control": "no-store"}
    await HTMLResponse(html, 503, headers)(scope, receive, send)


def wants_html(scope: Scope) -> bool:
    """Whether the client is a browser navigating (rather than a script fetching)."""
    return "text/html" in HTTPConnection(scope).headers.get("accept", "")


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

    ``Host`` is dropped so that the client writes the dev server's own ``host:port``, which
    Vite's DNS-rebinding check accepts (it would reject ``<id>.preview.<host>``).
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


def response_headers(
    response: httpx.Response, base_url: str, public_origin: str
) -> list[tuple[bytes, bytes]]:
    """The dev server's response headers minus hop-by-hop ones, with ``Location`` made public."""
    raw = [(k.lower(), v) for k, v in response.headers.raw]
    drop = HOP_BY_HOP | connection_tokens(
        (k.decode("latin-1"), v.decode("latin-1")) for k, v in raw
    )
    upstream_origin = str(httpx.URL(base_url).copy_with(raw_path=b"")).rstrip("/").encode()
    headers = []
    for name, value in raw:
        if name.decode("latin-1") in drop:
            continue
        if name == b"location" and value.startswith(upstream_origin):
            value = public_origin.encode() + value[len(upstream_origin) :]
        headers.append((name, value))
    return headers


def public_origin(scope: Scope) -> str:
    """The origin the browser used, e.g. ``http://abc.preview.localhost:8000``."""
    scheme = "https" if scope.get("scheme") == "https" else "http"
    return f"{scheme}://{HTTPConnection(scope).headers.get('host', '')}"


async def send_response(
    scope: Scope, receive: Receive, send: Send, response: httpx.Response, base_url: str
) -> None:
    """Stream the dev server's response to the browser; stop when the browser leaves."""
    headers = response_headers(response, base_url, public_origin(scope))
    try:
        await send(
            {"type": "http.response.start", "status": response.status_code, "headers": headers}
        )
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(cancel_on_disconnect, receive, tasks.cancel_scope)
            # Raw bytes: the body stays as the dev server encoded it (gzip etc.).
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            tasks.cancel_scope.cancel()
    except OSError:
        return  # the browser went away; nothing left to tell it
    except (httpx.TransportError, httpx.StreamError) as exc:
        raise SandboxUnavailable(
            f"preview: the dev server at {base_url!r} failed mid-response: {exc!s}"
        ) from exc


async def cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once the browser disconnects (the request body is consumed by now)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


def sendable_close_code(code: int | None, fallback: int) -> int:
    """A close code that may go in a close frame: reserved ones become ``fallback``."""
    if code is None or code == 1005:
        return 1000
    return fallback if code in WS_UNSENDABLE else code


async def pump_websocket(receive: Receive, send: Send, upstream: ClientConnection) -> None:
    """Copy frames both ways until either side closes, then close the other side."""
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(browser_to_upstream, receive, upstream, tasks.cancel_scope)
        tasks.start_soon(upstream_to_browser, send, upstream, tasks.cancel_scope)


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
    send: Send, upstream: ClientConnection, done: anyio.CancelScope
) -> None:
    """Forward the dev server's messages; pass its close code on to the browser."""
    try:
        async for data in upstream:
            kind = "text" if isinstance(data, str) else "bytes"
            await send({"type": "websocket.send", kind: data})
    except websockets.ConnectionClosedError:
        pass  # the code and reason are on the connection either way
    except OSError:
        done.cancel()
        return  # the browser is gone; browser_to_upstream sees its disconnect
    code = sendable_close_code(upstream.close_code, fallback=WS_BAD_GATEWAY)
    with contextlib.suppress(OSError):  # the browser may have left meanwhile
        await send({"type": "websocket.close", "code": code, "reason": upstream.close_reason or ""})
    done.cancel()
