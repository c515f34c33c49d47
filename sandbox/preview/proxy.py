"""Preview: a reverse proxy (HTTP and WebSocket) from ``<sandbox>.preview.<host>`` to a dev server.

:class:`PreviewProxy` is a pure ASGI app. A request whose ``Host`` is ``<id>.preview.<public host>``
is checked with the injected ``authorize`` callable (the owner's session), its dev server's base
URL is looked up with the injected ``resolve`` callable, and the request is forwarded there:

- HTTP through one shared ``httpx.AsyncClient``, streaming the body both ways. While the dev
  server does not accept connections yet, or sends no response headers within
  ``headers_timeout``, a page navigation gets a small page (503, ``Retry-After``) that refreshes
  itself, never a bare 502 nor a wait for the read timeout; other refusals of a navigation are a
  page in words too (JSON is for scripts: ``Sec-Fetch-Mode`` other than ``navigate``). A page
  navigation first waits up to ``starting_wait`` for a dev server that refuses connections (one
  starting, or starting over), asking again every :data:`STARTING_POLL_SECONDS`: the frame shows
  the app at its first good response, not at the starting page's next refresh (kiln issue 24).
- WebSocket (Vite's HMR, subprotocol ``vite-hmr``) through a ``websockets`` client, pumping
  frames both ways until either side closes.

Any other host falls through to the wrapped ``app`` (or a JSON 404), so the proxy can wrap the
service's main app.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from html import escape

import anyio
import httpx
import websockets
from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from sandbox.errors import SandboxUnavailable
from sandbox.preview.error_ingest import PreviewErrorIngest
from sandbox.preview.hmr_hold import HmrHold
from sandbox.preview.reporter_injection import (
    REPORTS_PATH,
    SCRIPTS,
    identity_encoding,
    is_plain_html,
    send_script,
)
from sandbox.preview.upstream import (
    WS_BAD_GATEWAY,
    open_websocket,
    pump_websocket,
    request_body,
    send_response,
    upstream_headers,
    upstream_url,
)

# authorize(request_or_websocket, sandbox_id): may read headers and cookies, never the body.
Authorize = Callable[[HTTPConnection, str], Awaitable[bool]]
Resolve = Callable[[str], Awaitable[str | None]]

# A DNS label: what a browser can put in front of ``.preview.``.
SANDBOX_ID = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
RETRY_AFTER_SECONDS = 2
DEFAULT_TIMEOUT = httpx.Timeout(connect=3.0, read=120.0, write=60.0, pool=10.0)
# How long a browser waits for the dev server's response headers before it gets the retrying
# "starting" page (a navigation) or a 504 (anything else); ``read`` still bounds a body's gaps.
DEFAULT_HEADERS_TIMEOUT = 15.0
# How long a page navigation waits for a dev server that refuses connections, asking this often.
DEFAULT_STARTING_WAIT = 10.0
STARTING_POLL_SECONDS = 0.1
# What a dev server starting (or starting over) answers a connection with.
STARTING_ERRORS = (httpx.ConnectError, httpx.RemoteProtocolError)
# Refusals worth retrying: a navigation gets the self-refreshing page for these.
RETRYABLE_STATUSES = frozenset({503, 504})
# Idle connections expire before Node's 5 s keep-alive timeout closes them under a request.
LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50, keepalive_expiry=2.0)
# Kiln's own session must never reach the sandbox: the dev server runs generated code.
DEFAULT_PRIVATE_COOKIES = ("kiln_session",)
# Also a dev server with no address yet (a sandbox started again after a restart: no scheme).
NOT_READY_ERRORS = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.UnsupportedProtocol,
)
WS_TRY_AGAIN_LATER = 1013
WS_POLICY_VIOLATION = 1008
WS_NOT_FOUND = 4404  # private-use range (4000-4999), mirrors HTTP 404

STARTING_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{retry}"><title>Starting preview</title>
<style>body{{font:16px system-ui,sans-serif;display:grid;place-items:center;
min-height:100vh;margin:0;color:#444}}</style></head>
<body><main><h1>Starting the preview&hellip;</h1>
<p>{message}.</p><p>This page retries every {retry} seconds.</p></main></body></html>
"""
ERROR_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Preview unavailable</title>
<style>body{{font:16px system-ui,sans-serif;display:grid;place-items:center;
min-height:100vh;margin:0;color:#444}}</style></head>
<body><main><h1>The preview cannot be shown</h1>
<p>{message}.</p><p>Error code: <code>{code}</code></p></main></body></html>
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


def host_name(host: str) -> str:
    """The name in a ``Host`` value, lowercase, without its port (``[::1]`` stays whole)."""
    name = host.strip().lower()
    if name.startswith("["):
        return name.partition("]")[0] + "]"
    return name.partition(":")[0]


def preview_domain(public_host: str) -> str:
    """The domain previews live under: ``preview.<public host>``."""
    return f"preview.{public_host.lower()}"


def preview_label(host: str, public_host: str) -> str | None:
    """The label in front of ``.preview.<public_host>`` in a ``Host`` value (any port); None
    for any other host: previews are served on the configured domain only, so that a name
    another site controls (``x.preview.evil.example``) never reaches a dev server."""
    label, dot, rest = host_name(host).partition(".")
    if not dot or not label or rest != preview_domain(public_host):
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
        public_host: str,
        authorize: Authorize = allow_all,
        app: ASGIApp | None = None,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        private_cookies: Iterable[str] = DEFAULT_PRIVATE_COOKIES,
        client: httpx.AsyncClient | None = None,
        headers_timeout: float = DEFAULT_HEADERS_TIMEOUT,
        hold: Callable[[str], HmrHold] | None = None,
        reports: PreviewErrorIngest | None = None,
        starting_wait: float = DEFAULT_STARTING_WAIT,
    ) -> None:
        """Previews are ``<id>.preview.<public_host>``; ``app`` serves every other host;
        ``client`` defaults to one the proxy owns; ``headers_timeout`` bounds the wait for the
        dev server's response headers (seconds); ``hold`` gives a sandbox's
        :class:`~sandbox.preview.hmr_hold.HmrHold` (hot updates held while a run writes);
        with ``reports``, pages get the error reporter and their reports are stored
        (:mod:`sandbox.preview.reporter_injection`, :mod:`sandbox.preview.error_ingest`);
        ``starting_wait``: how long a page navigation waits for a dev server that is not up."""
        if not headers_timeout > 0:
            raise ValueError(f"headers_timeout must be positive, got {headers_timeout!r}")
        self.resolve = resolve
        self.public_host = public_host
        self.authorize = authorize
        self.app = app
        self.timeout = timeout
        self.headers_timeout = headers_timeout
        self.starting_wait = starting_wait
        self.private_cookies = frozenset(private_cookies)
        self.hold = hold
        self.reports = reports
        # trust_env=False: a proxy from the environment must never see sandbox traffic.
        self.client = client or httpx.AsyncClient(
            timeout=timeout, limits=LIMITS, trust_env=False, follow_redirects=False
        )

    async def aclose(self) -> None:
        """Close the shared HTTP client (also done at lifespan shutdown)."""
        await self.client.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Route one ASGI connection: preview hosts are proxied, the rest fall through."""
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        label = preview_label(HTTPConnection(scope).headers.get("host", ""), self.public_host)
        if label is None:
            await self._fall_through(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await receive()  # the client's websocket.connect; the proxy answers it below
        target = await self._admit(scope, receive, send, label)
        if isinstance(target, Refusal):
            await refuse(scope, receive, send, target)
        elif scope["type"] == "http" and self.reports is not None and scope["path"] == REPORTS_PATH:
            await self.reports.handle(scope, receive, send, label, target, self.client)
        elif scope["type"] == "http" and self.reports is not None and scope["path"] in SCRIPTS:
            await send_script(send, scope["path"])
        elif scope["type"] == "http":
            await self._forward_http(scope, receive, send, target, label)
        else:
            await self._forward_websocket(scope, receive, send, target, label)

    async def _admit(self, scope: Scope, receive: Receive, send: Send, label: str) -> str | Refusal:
        """The dev server's base URL, or why not: validate, authorize, resolve.

        Authorizing comes before resolving so that strangers cannot probe which ids exist.
        """
        bad_target = target_refusal(scope)
        if bad_target is not None:
            return bad_target
        if not SANDBOX_ID.fullmatch(label):
            msg = f"not a valid sandbox id: {label!r}"
            return Refusal(400, "invalid_sandbox_id", msg, WS_POLICY_VIOLATION)
        connection: HTTPConnection = (
            Request(scope, receive) if scope["type"] == "http" else WebSocket(scope, receive, send)
        )
        if not await self.authorize(connection, label):
            msg = f"no access to the preview of sandbox {label!r}"
            return Refusal(403, "forbidden", msg, WS_POLICY_VIOLATION)
        try:
            base_url = await self.resolve(label)
        except SandboxUnavailable as exc:  # an outage, not an unknown sandbox: retry later
            msg = f"the preview of sandbox {label!r} cannot be reached right now: {exc}"
            return Refusal(503, "sandbox_unavailable", msg, WS_TRY_AGAIN_LATER)
        if base_url is None:
            msg = f"no sandbox {label!r}"
            return Refusal(404, "unknown_sandbox", msg, WS_NOT_FOUND)
        return base_url

    async def _fall_through(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.app is not None:
            await self.app(scope, receive, send)
            return
        host = HTTPConnection(scope).headers.get("host", "")
        msg = f"not a preview host: {host!r}"
        await refuse(scope, receive, send, Refusal(404, "not_found", msg, WS_NOT_FOUND))

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
        # A page the reporter goes into: asked uncompressed, so the proxy can edit it.
        with_reporter = (
            self.reports is not None and scope["method"] == "GET" and is_navigation(scope)
        )
        if with_reporter:
            headers = identity_encoding(headers)
        incoming = HTTPConnection(scope).headers
        has_body = "content-length" in incoming or "transfer-encoding" in incoming
        request = self.client.build_request(
            scope["method"],
            upstream_url(base_url, scope),
            headers=headers,
            content=request_body(receive) if has_body else None,
        )
        try:
            response = await self._send_when_up(request, scope, has_body)
        except ClientDisconnect:  # the browser left while sending its body
            return
        except httpx.TransportError as exc:
            await refuse(scope, receive, send, transport_refusal(exc, sandbox_id))
            return
        except TimeoutError:
            await refuse(scope, receive, send, too_slow(sandbox_id, self.headers_timeout))
            return
        try:
            await send_response(
                scope,
                receive,
                send,
                response,
                base_url,
                self.private_cookies,
                with_reporter=with_reporter and is_plain_html(response),
            )
        finally:
            await response.aclose()

    async def _send_when_up(
        self, request: httpx.Request, scope: Scope, has_body: bool
    ) -> httpx.Response:
        """The dev server's response headers, each try bounded by ``headers_timeout`` (a dev
        server holding a request must not hold the browser for the read timeout; cancelling
        drops that connection); a page navigation is sent again while the dev server refuses
        connections, until ``starting_wait`` has passed (see the module docstring)."""
        again = not has_body and scope["method"] == "GET" and is_navigation(scope)
        deadline = anyio.current_time() + (self.starting_wait if again else 0.0)
        while True:
            try:
                with anyio.fail_after(self.headers_timeout):
                    return await self.client.send(request, stream=True)
            except STARTING_ERRORS:
                if anyio.current_time() + STARTING_POLL_SECONDS > deadline:
                    raise
            await anyio.sleep(STARTING_POLL_SECONDS)

    async def _forward_websocket(
        self, scope: Scope, receive: Receive, send: Send, base_url: str, sandbox_id: str
    ) -> None:
        try:
            upstream = await open_websocket(
                base_url, scope, self.private_cookies, self.timeout.connect
            )
        except (OSError, TimeoutError, websockets.WebSocketException) as exc:
            await refuse(scope, receive, send, websocket_refusal(exc, sandbox_id))
            return
        try:
            await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})
            hold = self.hold(sandbox_id) if self.hold is not None else None
            await pump_websocket(receive, send, upstream, hold)
        finally:
            await upstream.close()


def target_refusal(scope: Scope) -> Refusal | None:
    """A 400 for a request target that is no path: absolute-form (``GET http://host/``, what a
    client sends to a forward proxy) and asterisk-form cannot be forwarded to a dev server."""
    target: bytes = scope.get("raw_path") or scope["path"].encode()
    if target.startswith(b"/"):
        return None
    shown = target.decode("latin-1")
    msg = f"the request target must be a path starting with '/', not {shown!r}"
    return Refusal(400, "invalid_request_target", msg, WS_POLICY_VIOLATION)


async def refuse(scope: Scope, receive: Receive, send: Send, refusal: Refusal) -> None:
    """Answer with a JSON error (HTTP) or an accepted-then-closed socket (WebSocket)."""
    if scope["type"] == "http":
        if is_navigation(scope):  # a page in words in the frame, never raw JSON
            if refusal.status in RETRYABLE_STATUSES:
                await starting_page(scope, receive, send, refusal.message)
            else:
                await error_page(scope, receive, send, refusal)
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


# Messages name the sandbox, never the dev server's internal address.
def transport_refusal(exc: httpx.TransportError, sandbox_id: str) -> Refusal:
    """What to answer when the dev server could not give a response at all."""
    if isinstance(exc, NOT_READY_ERRORS):
        return starting(sandbox_id)
    if isinstance(exc, httpx.TimeoutException):
        msg = f"the dev server of sandbox {sandbox_id!r} did not answer in time"
        return Refusal(504, "preview_timeout", msg, WS_TRY_AGAIN_LATER)
    msg = f"the dev server of sandbox {sandbox_id!r} broke off the connection"  # words, no class
    return Refusal(502, "preview_upstream_error", msg, WS_BAD_GATEWAY)


def websocket_refusal(exc: Exception, sandbox_id: str) -> Refusal:
    """What to answer when the dev server's WebSocket handshake failed."""
    if isinstance(exc, (OSError, TimeoutError)):
        return starting(sandbox_id)
    msg = f"the dev server of sandbox {sandbox_id!r} refused the WebSocket: {exc}"
    return Refusal(502, "preview_upstream_error", msg, WS_BAD_GATEWAY)


def too_slow(sandbox_id: str, seconds: float) -> Refusal:
    """The dev server accepted the request but sent no response headers in ``seconds``."""
    msg = f"the dev server of sandbox {sandbox_id!r} did not answer within {seconds:g} s"
    return Refusal(504, "preview_timeout", msg, WS_TRY_AGAIN_LATER)


def starting(sandbox_id: str) -> Refusal:
    """The dev server does not accept connections (yet): the browser should retry."""
    msg = f"the dev server of sandbox {sandbox_id!r} is not up yet"
    return Refusal(503, "preview_starting", msg, WS_TRY_AGAIN_LATER)


async def starting_page(scope: Scope, receive: Receive, send: Send, message: str) -> None:
    """The self-refreshing 503 page shown while the dev server is not up."""
    html = STARTING_PAGE.format(retry=RETRY_AFTER_SECONDS, message=escape(message))
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS), "Cache-Control": "no-store"}
    await HTMLResponse(html, 503, headers)(scope, receive, send)


async def error_page(scope: Scope, receive: Receive, send: Send, refusal: Refusal) -> None:
    """A refusal in words for a browser navigating (its status and code kept)."""
    html = ERROR_PAGE.format(message=escape(refusal.message), code=escape(refusal.code))
    headers = {"Cache-Control": "no-store"}
    await HTMLResponse(html, refusal.status, headers)(scope, receive, send)


def is_navigation(scope: Scope) -> bool:
    """Whether the client is a browser loading a page (rather than a script fetching):
    ``Sec-Fetch-Mode: navigate``; without Fetch Metadata, an ``Accept`` naming HTML."""
    headers = HTTPConnection(scope).headers
    mode = headers.get("sec-fetch-mode")
    if mode is not None:
        return mode == "navigate"
    return "text/html" in headers.get("accept", "")
