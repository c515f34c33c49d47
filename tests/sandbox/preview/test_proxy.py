"""The preview proxy against real upstreams on loopback sockets, served by real uvicorn.

The last test runs a real vite-react sandbox (Docker) and checks HTML and HMR through the proxy.
"""

from __future__ import annotations

import hashlib
import io
import json
import queue
import socket
import tarfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from html import escape
from typing import Any, NamedTuple

import anyio
import httpx
import pytest
import websockets
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from websockets.asyncio.client import ClientConnection, connect
from websockets.sync.server import ServerConnection
from websockets.typing import Subprotocol

from sandbox.docker_boundary import connect as docker_connect
from sandbox.errors import SandboxUnavailable
from sandbox.images.templates import SANDBOX_UID, WORKSPACE, get_template
from sandbox.preview.proxy import PreviewProxy, allow_all, preview_label, preview_url
from sandbox.settings import LABEL
from tests.servers import UvicornThread, WebSocketThread, loopback_socket
from tests.waiting import wait_until

HOST = "abc.preview.localhost"
CHUNK = 256 * 1024
CHUNKS = 8
GATE_LIMIT_SECONDS = 10.0
VITE_HMR = Subprotocol("vite-hmr")
# Gates and close records are keyed by a token unique to each test, so servers can be shared.
GATES: defaultdict[str, threading.Event] = defaultdict(threading.Event)
CLOSES: defaultdict[str, queue.Queue[tuple[int | None, str | None]]] = defaultdict(queue.Queue)

ServeProxy = Callable[..., UvicornThread]


# --- the upstreams ------------------------------------------------------------------------


async def page(request: Request) -> Response:
    return HTMLResponse('<!doctype html><div id="root"></div>')


async def echo_headers(request: Request) -> Response:
    pairs = [[k.decode(), v.decode()] for k, v in request.headers.raw]
    return JSONResponse({"headers": pairs, "url": str(request.url)})


async def gated_stream(request: Request) -> Response:
    """First chunk at once; the rest only once the test has seen the first (or too late)."""
    gate = GATES[request.path_params["token"]]

    async def chunks() -> AsyncIterator[bytes]:
        yield b"f" * CHUNK
        released = await anyio.to_thread.run_sync(gate.wait, GATE_LIMIT_SECONDS)
        for _ in range(CHUNKS - 1):
            yield (b"r" if released else b"L") * CHUNK

    return StreamingResponse(chunks(), media_type="application/octet-stream")


async def upload(request: Request) -> Response:
    """Hash the body as it arrives; open the gate on the first chunk."""
    digest, size = hashlib.sha256(), 0
    async for chunk in request.stream():
        if chunk:
            GATES[request.path_params["token"]].set()
        digest.update(chunk)
        size += len(chunk)
    return JSONResponse({"size": size, "sha256": digest.hexdigest()})


async def endless(request: Request) -> Response:
    """Chunks until the reader goes away; then opens the gate named by the token."""

    async def chunks() -> AsyncIterator[bytes]:
        try:
            while True:
                yield b"e" * 1024
                await anyio.sleep(0.01)
        finally:
            GATES[request.path_params["token"]].set()

    return StreamingResponse(chunks())


async def truncated(request: Request) -> Response:
    """One chunk, then the upstream dies mid-body."""

    async def chunks() -> AsyncIterator[bytes]:
        yield b"t" * CHUNK
        raise RuntimeError("the dev server died mid-response (on purpose)")

    return StreamingResponse(chunks())


async def redirect(request: Request) -> Response:
    headers = {
        "Location": f"{request.base_url}landed?x=1",
        "Set-Cookie": "app=1; Path=/",
        "Proxy-Authenticate": "Basic",
        "X-Upstream": "yes",
    }
    return Response(status_code=302, headers=headers)


UPSTREAM = Starlette(
    routes=[
        Route("/", page),
        Route("/headers", echo_headers),
        Route("/stream/{token}", gated_stream),
        Route("/upload/{token}", upload, methods=["POST"]),
        Route("/redirect", redirect),
        Route("/truncated", truncated),
        Route("/endless/{token}", endless),
    ]
)


def ws_handler(ws: ServerConnection) -> None:
    """``/close``: close 4000 after one message; ``/record/<token>``: echo, then record the
    close code received; anything else: echo."""
    path = ws.request.path if ws.request else "/"
    if path == "/close":
        ws.recv()
        ws.close(4000, "bye")
        return
    try:
        for message in ws:
            ws.send(message)
    except websockets.ConnectionClosed:
        pass
    if path.startswith("/record/"):
        CLOSES[path.removeprefix("/record/")].put((ws.close_code, ws.close_reason))


@pytest.fixture(scope="module")
def upstream() -> Iterator[UvicornThread]:
    with UvicornThread(UPSTREAM) as server:
        yield server


@pytest.fixture(scope="module")
def ws_upstream() -> Iterator[WebSocketThread]:
    server = WebSocketThread(ws_handler, subprotocols=[VITE_HMR])
    yield server
    server.close()


class ErrorRecorder:
    """Wraps the proxy to record what escapes it (uvicorn would only log it)."""

    def __init__(self, app: ASGIApp, errors: list[BaseException]) -> None:
        self.app, self.errors = app, errors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except BaseException as exc:
            self.errors.append(exc)
            raise


@pytest.fixture
def proxy_errors() -> list[BaseException]:
    """Exceptions that escaped the proxy; a test expecting one takes it out of the list."""
    return []


@pytest.fixture
def serve_proxy(proxy_errors: list[BaseException]) -> Iterator[ServeProxy]:
    """Start proxies (real uvicorn) resolving ids through ``routes``; after the test, stop them
    and check that nothing escaped them."""
    with ExitStack() as stack:

        def start(
            routes: dict[str, str],
            authorize: Any = allow_all,
            app: ASGIApp | None = None,
            **options: Any,
        ) -> UvicornThread:
            async def resolve(sandbox_id: str) -> str | None:
                return routes.get(sandbox_id)

            options.setdefault("public_host", "localhost")
            proxy = PreviewProxy(resolve, authorize=authorize, app=app, **options)
            return stack.enter_context(UvicornThread(ErrorRecorder(proxy, proxy_errors)))

        yield start
    assert proxy_errors == []


# What a browser sends when a script fetches (the proxy answers it in JSON) and when it loads a
# page (the proxy answers it with a page in words).
FETCH = {"accept": "*/*", "sec-fetch-mode": "cors"}
NAVIGATE = {"accept": "text/html,*/*;q=0.8", "sec-fetch-mode": "navigate"}


def browser(proxy: UvicornThread, host: str = HOST) -> httpx.AsyncClient:
    """An HTTP client that reaches the proxy on loopback while naming ``host``."""
    headers = {"host": f"{host}:{proxy.port}", "accept": "text/html"}
    # 60 s, not httpx's 5: Vite's first transform of a module on a loaded machine is slower
    # (a run beside 7 other helpers met a ReadTimeout on /src/main.jsx); a deadlock guard.
    return httpx.AsyncClient(base_url=proxy.url, headers=headers, trust_env=False, timeout=60)


def ws_connect(proxy: UvicornThread, path: str, **kwargs: Any) -> connect:
    """A WebSocket client naming the preview host but connecting to the proxy's loopback port."""
    uri = f"ws://{HOST}:{proxy.port}{path}"
    kwargs.setdefault("subprotocols", [VITE_HMR])  # the upstreams insist on it, as Vite does
    return connect(uri, host="127.0.0.1", port=proxy.port, proxy=None, **kwargs)


async def close_code(ws: ClientConnection) -> tuple[int, str]:
    """The close code and reason the server ends ``ws`` with."""
    with pytest.raises(websockets.ConnectionClosed) as info:
        await ws.recv()
    assert info.value.rcvd is not None
    return info.value.rcvd.code, info.value.rcvd.reason


def token() -> str:
    return uuid.uuid4().hex


# --- pure functions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            ("abc", "localhost", 8000, "http"), "http://abc.preview.localhost:8000/", id="port"
        ),
        pytest.param(
            ("a-1", "kiln.dev", 443, "https"), "https://a-1.preview.kiln.dev/", id="https-443"
        ),
        pytest.param(
            ("abc", "kiln.dev", None, "https"), "https://abc.preview.kiln.dev/", id="no-port"
        ),
        pytest.param(("abc", "kiln.dev", 80, "http"), "http://abc.preview.kiln.dev/", id="http-80"),
    ],
)
def test_preview_url(args: tuple[str, str, int | None, str], expected: str) -> None:
    assert preview_url(*args) == expected


@pytest.mark.parametrize(
    ("sandbox_id", "scheme"),
    [
        pytest.param("ABC", "http", id="uppercase"),
        pytest.param("a_b", "http", id="underscore"),
        pytest.param("-ab", "http", id="leading-hyphen"),
        pytest.param("a.b", "http", id="dot"),
        pytest.param("", "http", id="empty"),
        pytest.param("abc", "ftp", id="scheme"),
    ],
)
def test_preview_url_refuses(sandbox_id: str, scheme: str) -> None:
    with pytest.raises(ValueError, match=r"sandbox id|scheme"):
        preview_url(sandbox_id, "localhost", 8000, scheme)


@pytest.mark.parametrize(
    ("host", "public_host", "label"),
    [
        pytest.param("abc.preview.localhost:8000", "localhost", "abc", id="with-port"),
        pytest.param("ABC.Preview.Example.COM", "example.com", "abc", id="case-insensitive"),
        pytest.param("a_b.preview.localhost", "localhost", "a_b", id="invalid-label-routed"),
        pytest.param("preview.localhost", "localhost", None, id="no-label"),
        pytest.param("abc.preview.", "localhost", None, id="nothing-after"),
        pytest.param("a.b.preview.localhost", "localhost", None, id="two-labels"),
        pytest.param("127.0.0.1:8000", "localhost", None, id="ip"),
        pytest.param("[::1]:8000", "localhost", None, id="ipv6"),
        pytest.param("abc.preview.evil.example", "localhost", None, id="another-domain"),
        pytest.param("abc.preview.localhost.evil", "localhost", None, id="suffix-added"),
        pytest.param("abc.preview.kiln.localhost", "localhost", None, id="deeper-domain"),
        pytest.param("abc.preview.kiln.localhost:80", "kiln.localhost", "abc", id="configured"),
    ],
)
def test_preview_label(host: str, public_host: str, label: str | None) -> None:
    assert preview_label(host, public_host) == label


# --- HTTP -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_html_through_proxy(upstream: UvicornThread, serve_proxy: ServeProxy) -> None:
    proxy = serve_proxy({"abc": upstream.url})
    async with browser(proxy) as client:
        response = await client.get("/")
    assert response.status_code == 200
    assert '<div id="root">' in response.text


@pytest.mark.anyio
async def test_other_hosts_fall_through_to_inner_app(
    upstream: UvicornThread, serve_proxy: ServeProxy
) -> None:
    inner = Starlette(routes=[Route("/", lambda request: PlainTextResponse("inner app"))])
    proxy = serve_proxy({"abc": upstream.url}, app=inner)
    async with browser(proxy, host="localhost") as client:
        response = await client.get("/")
    assert (response.status_code, response.text) == (200, "inner app")


@pytest.mark.anyio
async def test_other_hosts_404_without_inner_app(
    upstream: UvicornThread, serve_proxy: ServeProxy
) -> None:
    proxy = serve_proxy({"abc": upstream.url})
    async with browser(proxy, host="localhost") as client:
        response = await client.get("/", headers=FETCH)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("host", "status", "code"),
    [
        pytest.param("nope.preview.localhost", 404, "unknown_sandbox", id="unknown"),
        pytest.param("a_b.preview.localhost", 400, "invalid_sandbox_id", id="invalid"),
    ],
)
async def test_refused_hosts(
    upstream: UvicornThread, serve_proxy: ServeProxy, host: str, status: int, code: str
) -> None:
    proxy = serve_proxy({"abc": upstream.url})
    async with browser(proxy, host=host) as client:
        response = await client.get("/", headers=FETCH)
        page = await client.get("/", headers=NAVIGATE)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code
    assert repr(host.split(".")[0]) in error["message"]
    # A navigation (the preview's frame) gets the same refusal as a page in words.
    assert page.status_code == status
    assert page.headers["content-type"].startswith("text/html")
    assert escape(error["message"]) in page.text
    assert f"<code>{code}</code>" in page.text
    assert "refresh" not in page.text  # nothing to retry: it would fail the same way


def raw_exchange(port: int, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` as written (no client normalizes it) and read the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(b"http://abc.preview.localhost/x", id="absolute-form-own-host"),
        pytest.param(b"http://evil.example:1/x", id="absolute-form-other-host"),
        pytest.param(b"*", id="asterisk-form"),
        pytest.param(b"x", id="no-leading-slash"),
    ],
)
def test_a_request_target_that_is_no_path_is_a_400_in_words(
    upstream: UvicornThread, serve_proxy: ServeProxy, target: bytes
) -> None:
    proxy = serve_proxy({"abc": upstream.url})
    head = b"GET " + target + b" HTTP/1.1\r\nHost: " + HOST.encode()
    status, body = raw_exchange(proxy.port, head + b"\r\nConnection: close\r\n\r\n")
    assert status == 400
    error = json.loads(body)["error"]
    assert error["code"] == "invalid_request_target"
    assert repr(target.decode()) in error["message"]


@pytest.mark.anyio
async def test_authorize_denied_is_403(upstream: UvicornThread, serve_proxy: ServeProxy) -> None:
    asked: list[str] = []

    async def deny(connection: HTTPConnection, sandbox_id: str) -> bool:
        asked.append(sandbox_id)
        return False

    proxy = serve_proxy({"abc": upstream.url}, authorize=deny)
    async with browser(proxy) as client:
        response = await client.get("/", headers=FETCH)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert asked == ["abc"]


@pytest.mark.anyio
async def test_starting_page_until_dev_server_is_up(serve_proxy: ServeProxy) -> None:
    sock = loopback_socket()  # bound, not listening: connections are refused
    routes = {"abc": f"http://127.0.0.1:{sock.getsockname()[1]}"}
    proxy = serve_proxy(routes, starting_wait=0.3)  # the page after the navigation's wait
    async with browser(proxy) as client:
        starting = await client.get("/")
        as_json = await client.get("/src/main.jsx", headers={"accept": "*/*"})
        with UvicornThread(UPSTREAM, sock):
            ready = await client.get("/")
    assert starting.status_code == 503
    assert starting.headers["retry-after"] == "2"
    assert '<meta http-equiv="refresh"' in starting.text
    assert "abc" in starting.text
    assert as_json.status_code == 503
    assert as_json.json()["error"]["code"] == "preview_starting"
    assert ready.status_code == 200
    assert '<div id="root">' in ready.text


class SlowStart:
    """A dev server starting over: it closes the first ``refused`` connections unanswered
    (what httpx calls a protocol error), then answers every request with the app's page."""

    def __init__(self, refused: int) -> None:
        self.refused, self.connections = refused, 0
        self.sock = loopback_socket()
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        page = b'<!doctype html><div id="root"></div>'
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed: the test is over
                return
            with conn:
                self.connections += 1
                conn.recv(65536)  # read first: closing on unread bytes would reset (not refuse)
                if self.connections > self.refused:
                    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(page)}\r\n"
                    conn.sendall(head.encode() + b"Connection: close\r\n\r\n" + page)


@pytest.mark.anyio
async def test_a_page_load_waits_for_the_dev_server_s_first_good_response(
    serve_proxy: ServeProxy,
) -> None:
    upstream = SlowStart(refused=3)
    try:
        proxy = serve_proxy({"abc": upstream.url})
        async with browser(proxy) as client:
            page = await client.get("/", headers=NAVIGATE)
            upstream.refused = upstream.connections + 1  # starting over again
            script = await client.get("/src/main.jsx", headers=FETCH)
    finally:
        upstream.sock.close()
    assert page.status_code == 200  # not the starting page and its 2 s refresh
    assert '<div id="root">' in page.text
    assert upstream.connections >= 4
    assert script.status_code == 503  # a script is told at once: only page loads wait


HEADERS_TIMEOUT = 0.5


@pytest.mark.anyio
async def test_a_dev_server_that_never_answers_holds_the_browser_only_briefly(
    serve_proxy: ServeProxy,
) -> None:
    """Connections are accepted (the kernel's backlog) but no response ever comes: a page load
    gets the retrying page, a script a 504, both after ``headers_timeout``, not the read timeout."""
    with loopback_socket() as silent:
        silent.listen(16)
        routes = {"abc": f"http://127.0.0.1:{silent.getsockname()[1]}"}
        proxy = serve_proxy(routes, headers_timeout=HEADERS_TIMEOUT)
        async with browser(proxy) as client:
            started = time.monotonic()
            page = await client.get("/", headers=NAVIGATE)
            script = await client.get("/@vite/client", headers=FETCH)
            waited = time.monotonic() - started
    assert page.status_code == 503
    assert page.headers["retry-after"] == "2"
    assert '<meta http-equiv="refresh"' in page.text
    assert "did not answer within 0.5 s" in page.text
    assert script.status_code == 504
    assert script.json()["error"]["code"] == "preview_timeout"
    assert 2 * HEADERS_TIMEOUT <= waited < 2 * HEADERS_TIMEOUT + 5


@pytest.mark.parametrize("seconds", [pytest.param(0, id="zero"), pytest.param(-1.0, id="negative")])
def test_the_headers_timeout_must_be_positive(seconds: float) -> None:
    async def resolve(sandbox_id: str) -> str | None:
        return None

    with pytest.raises(ValueError, match=repr(seconds)):
        PreviewProxy(resolve, public_host="localhost", headers_timeout=seconds)


@pytest.mark.anyio
async def test_response_is_streamed(upstream: UvicornThread, serve_proxy: ServeProxy) -> None:
    """The upstream sends the rest only after the client got the first chunk through the proxy;
    a buffering proxy would get ``L`` (late) chunks after the gate times out."""
    proxy, key = serve_proxy({"abc": upstream.url}), token()
    async with browser(proxy) as client, client.stream("GET", f"/stream/{key}") as response:
        chunks = response.aiter_raw()
        first = await anext(chunks)
        GATES[key].set()
        rest = b"".join([chunk async for chunk in chunks])
    body = first + rest
    assert len(body) == CHUNK * CHUNKS
    assert body == b"f" * CHUNK + b"r" * CHUNK * (CHUNKS - 1)


@pytest.mark.anyio
async def test_browser_leaving_ends_the_upstream_stream(
    upstream: UvicornThread, serve_proxy: ServeProxy
) -> None:
    proxy, key = serve_proxy({"abc": upstream.url}), token()
    async with browser(proxy) as client, client.stream("GET", f"/endless/{key}") as response:
        await anext(response.aiter_raw())
    assert await anyio.to_thread.run_sync(GATES[key].wait, GATE_LIMIT_SECONDS)


@pytest.mark.anyio
async def test_browser_leaving_mid_upload(upstream: UvicornThread, serve_proxy: ServeProxy) -> None:
    """The upload is forwarded as it comes, and the browser leaving is no error of the proxy's
    (``serve_proxy`` checks that nothing escaped it)."""
    proxy, key = serve_proxy({"abc": upstream.url}), token()
    head = f"POST /upload/{key} HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: {CHUNK * 4}\r\n\r\n"
    async with await anyio.connect_tcp("127.0.0.1", proxy.port) as stream:
        await stream.send(head.encode() + b"u" * CHUNK)
        assert await anyio.to_thread.run_sync(GATES[key].wait, GATE_LIMIT_SECONDS)


@pytest.mark.anyio
async def test_upstream_dying_mid_body_truncates(
    upstream: UvicornThread, serve_proxy: ServeProxy, proxy_errors: list[BaseException]
) -> None:
    """A body cut by the dev server must not reach the browser looking complete."""
    proxy = serve_proxy({"abc": upstream.url})
    async with browser(proxy) as client, client.stream("GET", "/truncated") as response:
        assert response.status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            await response.aread()
    await anyio.to_thread.run_sync(wait_until, lambda: bool(proxy_errors), "the proxy's error")
    error = proxy_errors.pop()
    assert isinstance(error, SandboxUnavailable)
    assert "failed mid-response" in str(error)


@pytest.mark.anyio
async def test_request_body_is_streamed(upstream: UvicornThread, serve_proxy: ServeProxy) -> None:
    """The client sends the rest only after the upstream got the first chunk through the proxy."""
    proxy, key = serve_proxy({"abc": upstream.url}), token()
    released: list[bool] = []

    async def body() -> AsyncIterator[bytes]:
        yield b"x" * CHUNK
        released.append(await anyio.to_thread.run_sync(GATES[key].wait, GATE_LIMIT_SECONDS))
        for index in range(CHUNKS - 1):
            yield bytes([index]) * CHUNK

    expected = b"x" * CHUNK + b"".join(bytes([i]) * CHUNK for i in range(CHUNKS - 1))
    async with browser(proxy) as client:
        response = await client.post(f"/upload/{key}", content=body())
    assert released == [True]
    assert response.json() == {
        "size": len(expected),
        "sha256": hashlib.sha256(expected).hexdigest(),
    }


@pytest.mark.anyio
async def test_request_headers(upstream: UvicornThread, serve_proxy: ServeProxy) -> None:
    proxy = serve_proxy({"abc": upstream.url})
    sent = {
        "connection": "keep-alive, x-hop",
        "x-hop": "only for the proxy",
        "cookie": "theme=dark; kiln_session=secret; lang=en",
        "x-forwarded-for": "10.0.0.1",
        "x-forwarded-host": "spoofed.example",
        "x-app": "kept",
    }
    async with browser(proxy) as client:
        response = await client.get("/headers?q=a%20b", headers=sent)
    received = response.json()
    headers = dict(received["headers"])
    assert received["url"] == f"{upstream.url}/headers?q=a%20b"
    assert headers["host"] == upstream.url.removeprefix("http://")
    assert headers["x-forwarded-host"] == f"{HOST}:{proxy.port}"
    assert headers["x-forwarded-proto"] == "http"
    assert headers["x-forwarded-for"] == "10.0.0.1, 127.0.0.1"
    assert headers["cookie"] == "theme=dark; lang=en"
    assert headers["x-app"] == "kept"
    assert "x-hop" not in headers
    assert [name for name, _ in received["headers"]].count("host") == 1


@pytest.mark.anyio
async def test_response_headers_and_redirect(
    upstream: UvicornThread, serve_proxy: ServeProxy
) -> None:
    proxy = serve_proxy({"abc": upstream.url})
    async with browser(proxy) as client:
        response = await client.get("/redirect")
    assert response.status_code == 302  # not followed by the proxy
    assert response.headers["location"] == f"http://{HOST}:{proxy.port}/landed?x=1"
    assert response.headers["set-cookie"] == "app=1; Path=/"
    assert response.headers["x-upstream"] == "yes"
    assert "proxy-authenticate" not in response.headers


# --- WebSocket --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_websocket_echo_with_subprotocol(
    ws_upstream: WebSocketThread, serve_proxy: ServeProxy
) -> None:
    proxy = serve_proxy({"abc": ws_upstream.url})
    async with ws_connect(proxy, "/?token=t") as ws:
        await ws.send('{"type":"ping"}')
        text = await ws.recv()
        await ws.send(b"\x00\xffbinary")
        binary = await ws.recv()
        assert ws.subprotocol == VITE_HMR
    assert text == '{"type":"ping"}'
    assert binary == b"\x00\xffbinary"


@pytest.mark.anyio
async def test_websocket_upstream_close_propagates(
    ws_upstream: WebSocketThread, serve_proxy: ServeProxy
) -> None:
    proxy = serve_proxy({"abc": ws_upstream.url})
    async with ws_connect(proxy, "/close") as ws:
        await ws.send("bye please")
        assert await close_code(ws) == (4000, "bye")


@pytest.mark.anyio
async def test_websocket_client_close_propagates(
    ws_upstream: WebSocketThread, serve_proxy: ServeProxy
) -> None:
    proxy, key = serve_proxy({"abc": ws_upstream.url}), token()
    async with ws_connect(proxy, f"/record/{key}") as ws:
        await ws.send("hello")
        assert await ws.recv() == "hello"
        await ws.close(4001, "tab closed")
    received = await anyio.to_thread.run_sync(CLOSES[key].get, True, GATE_LIMIT_SECONDS)
    assert received == (4001, "tab closed")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("routes", "authorize", "expected"),
    [
        pytest.param({}, allow_all, 4404, id="unknown-sandbox"),
        pytest.param({"abc": "refused"}, allow_all, 1013, id="dev-server-down"),
        pytest.param({"abc": "upstream"}, "deny", 1008, id="authorize-denied"),
    ],
)
async def test_websocket_refusals(
    ws_upstream: WebSocketThread,
    serve_proxy: ServeProxy,
    routes: dict[str, str],
    authorize: Any,
    expected: int,
) -> None:
    async def deny(connection: HTTPConnection, sandbox_id: str) -> bool:
        return False

    down = loopback_socket()
    urls = {"refused": f"http://127.0.0.1:{down.getsockname()[1]}", "upstream": ws_upstream.url}
    proxy = serve_proxy(
        {key: urls[value] for key, value in routes.items()},
        authorize=deny if authorize == "deny" else authorize,
    )
    async with ws_connect(proxy, "/") as ws:
        code, _ = await close_code(ws)
    down.close()
    assert code == expected


# --- a real vite-react sandbox ----------------------------------------------------------------

VITE = get_template("vite-react")
NEW_APP = "export default function App() {\n  return <h1>changed through kiln</h1>\n}\n"


class ViteSandbox(NamedTuple):
    container: Any  # docker.models.containers.Container (the SDK is untyped)
    base_url: str


@pytest.fixture
def vite_sandbox() -> Iterator[ViteSandbox]:
    """A vite-react container on its own internal network, removed (with the network) after."""
    client = docker_connect()
    labels = {LABEL: "preview-test"}
    name = f"kiln-preview-test-{uuid.uuid4().hex[:8]}"
    network = client.networks.create(name, driver="bridge", internal=True, labels=labels)
    container = None
    try:
        container = client.containers.run(
            VITE.image,
            name=name,
            detach=True,
            user=f"{SANDBOX_UID}:{SANDBOX_UID}",
            network=network.name,
            labels=labels,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit="1g",
        )
        container.reload()
        address = container.attrs["NetworkSettings"]["Networks"][name]["IPAddress"]
        yield ViteSandbox(container, f"http://{address}:{VITE.dev_port}")
    finally:
        if container is not None:
            container.remove(force=True)
        network.remove()
        client.close()


def write_into(container: Any, path: str, text: str) -> None:
    """Write one workspace file into ``container`` as the sandbox user, in one tar."""
    data = text.encode()
    info = tarfile.TarInfo(path.rsplit("/", 1)[-1])
    info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
    info.uid = info.gid = SANDBOX_UID
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        tar.addfile(info, io.BytesIO(data))
    directory = f"{WORKSPACE}/{path.rsplit('/', 1)[0]}"
    assert container.put_archive(directory, archive.getvalue())


async def wait_for_dev_server(client: httpx.AsyncClient) -> httpx.Response:
    """GET / through the proxy until the starting page gives way to the app."""
    with anyio.fail_after(180):  # a deadlock guard, not a speed assertion
        while (response := await client.get("/")).status_code == 503:
            await anyio.sleep(0.5)
    return response


async def next_hmr_message(ws: ClientConnection, kinds: set[str]) -> dict[str, Any]:
    """Vite's next HMR message whose type is one of ``kinds`` (skipping pings and the like)."""
    with anyio.fail_after(60):  # a deadlock guard, not a speed assertion
        while (message := json.loads(await ws.recv()))["type"] not in kinds:
            pass
    return message  # type: ignore[no-any-return]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.anyio
async def test_vite_react_preview_and_hmr(
    vite_sandbox: ViteSandbox, serve_proxy: ServeProxy
) -> None:
    proxy = serve_proxy({"abc": vite_sandbox.base_url})
    async with browser(proxy) as client:
        index = await wait_for_dev_server(client)
        # Vite only sends updates for modules in its graph, i.e. ones a browser has loaded.
        for module in ("/src/main.jsx", "/src/App.jsx"):
            assert (await client.get(module, headers={"accept": "*/*"})).status_code == 200
    assert index.status_code == 200
    assert '<div id="root">' in index.text
    async with ws_connect(proxy, "/") as ws:
        assert ws.subprotocol == VITE_HMR
        await next_hmr_message(ws, {"connected"})
        await anyio.to_thread.run_sync(write_into, vite_sandbox.container, "src/App.jsx", NEW_APP)
        update = await next_hmr_message(ws, {"update", "full-reload"})
    if update["type"] == "update":
        assert any(u["path"] == "/src/App.jsx" for u in update["updates"])
