"""The preview proxy's header and URL rules (the forwarding itself runs in test_preview.py)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sandbox.preview.upstream import (
    WS_HANDSHAKE,
    connection_tokens,
    response_headers,
    sendable_close_code,
    sets_private_cookie,
    strip_cookies,
    upstream_headers,
    upstream_url,
    ws_scheme,
)

BASE = "http://172.18.0.5:5173"


def scope(headers: list[tuple[str, str]], **extra: Any) -> dict[str, Any]:
    """A minimal ASGI scope from a browser at 10.1.2.3."""
    raw = [(k.encode(), v.encode()) for k, v in headers]
    return {"type": "http", "headers": raw, "client": ("10.1.2.3", 50000), **extra}


@pytest.mark.parametrize(
    ("cookie", "expected"),
    [
        pytest.param("kiln_session=s; theme=dark", "theme=dark", id="first"),
        pytest.param("a=1;kiln_session=s;b=2", "a=1; b=2", id="middle-no-spaces"),
        pytest.param("kiln_session=s", "", id="only"),
        pytest.param("kiln_session_other=1", "kiln_session_other=1", id="prefix-is-not-name"),
    ],
)
def test_strip_cookies(cookie: str, expected: str) -> None:
    assert strip_cookies(cookie, frozenset({"kiln_session"})) == expected


@pytest.mark.parametrize(
    ("set_cookie", "private"),
    [
        pytest.param(b"kiln_session=forged; Path=/", True, id="session"),
        pytest.param(b" kiln_preview = forged", True, id="spaced"),
        pytest.param(b"KILN_SESSION=forged", True, id="other-case"),
        pytest.param(b"kiln_session_x=1; Path=/", False, id="prefix-is-not-name"),
        pytest.param(b"theme=dark; Path=/", False, id="the-apps-own"),
    ],
)
def test_sets_private_cookie(set_cookie: bytes, private: bool) -> None:
    assert sets_private_cookie(set_cookie, frozenset({"kiln_session", "kiln_preview"})) is private


def test_connection_tokens() -> None:
    headers = [("connection", "Keep-Alive, X-Hop ,"), ("x-hop", "1"), ("connection", "x-two")]
    assert connection_tokens(headers) == {"keep-alive", "x-hop", "x-two"}


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param(None, 1000, id="none"),
        pytest.param(1005, 1000, id="no-status"),
        pytest.param(1006, 1014, id="abnormal"),
        pytest.param(1015, 1014, id="tls"),
        pytest.param(1001, 1001, id="going-away"),
        pytest.param(4000, 4000, id="application"),
    ],
)
def test_sendable_close_code(code: int | None, expected: int) -> None:
    assert sendable_close_code(code, fallback=1014) == expected


@pytest.mark.parametrize(
    ("raw_path", "query", "expected"),
    [
        pytest.param(b"/", b"", f"{BASE}/", id="root"),
        pytest.param(b"/a%2Fb/c", b"", f"{BASE}/a%2Fb/c", id="encoded-slash-kept"),
        pytest.param(b"/", b"token=x&t=%20", f"{BASE}/?token=x&t=%20", id="query"),
    ],
)
def test_upstream_url(raw_path: bytes, query: bytes, expected: str) -> None:
    url = upstream_url(BASE, {"path": "/unused", "raw_path": raw_path, "query_string": query})
    assert str(url) == expected


@pytest.mark.parametrize(
    ("base", "expected"),
    [pytest.param("http://h:1", "ws", id="http"), pytest.param("https://h", "wss", id="https")],
)
def test_ws_scheme(base: str, expected: str) -> None:
    assert ws_scheme(base) == expected


def test_websocket_handshake_headers_are_left_to_the_client() -> None:
    incoming = [
        ("host", "abc.preview.localhost:8000"),
        ("origin", "http://abc.preview.localhost:8000"),
        ("upgrade", "websocket"),
        ("connection", "Upgrade"),
        ("sec-websocket-key", "k"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-protocol", "vite-hmr"),
        ("sec-websocket-extensions", "permessage-deflate"),
    ]
    headers = upstream_headers(scope(incoming, scheme="wss"), frozenset(), WS_HANDSHAKE)
    assert headers == [
        ("origin", "http://abc.preview.localhost:8000"),
        ("x-forwarded-for", "10.1.2.3"),
        ("x-forwarded-host", "abc.preview.localhost:8000"),
        ("x-forwarded-proto", "https"),
    ]


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        pytest.param(f"{BASE}/next?a=1", "http://abc.preview.localhost:8000/next?a=1", id="own"),
        pytest.param("/relative", "/relative", id="relative"),
        pytest.param("https://example.com/x", "https://example.com/x", id="elsewhere"),
    ],
)
def test_response_location(location: str, expected: str) -> None:
    raw = [("Location", location), ("Keep-Alive", "timeout=5"), ("Set-Cookie", "a=1")]
    response = httpx.Response(302, headers=raw)
    headers = response_headers(response, BASE, "http://abc.preview.localhost:8000")
    assert headers == [(b"location", expected.encode()), (b"set-cookie", b"a=1")]
