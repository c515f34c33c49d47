"""The reporter's script tag in preview pages: added by the proxy to page HTML only."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import httpx
import pytest
import redis.asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from sandbox.preview.error_ingest import PreviewErrorIngest
from sandbox.preview.error_stream import PreviewErrorStream
from sandbox.preview.proxy import PreviewProxy
from sandbox.preview.reporter_injection import (
    MAX_HTML_BYTES,
    SCRIPT_TAG,
    inject_script,
    script_bytes,
)
from tests.api.harness import serving

pytestmark = pytest.mark.anyio

HOST = "abc.preview.localhost:8000"
NAVIGATE = {"host": HOST, "accept": "text/html", "sec-fetch-mode": "navigate"}
FETCH = {"host": HOST, "accept": "*/*", "sec-fetch-mode": "cors"}
PAGE = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8">'
    '<script src="/src/main.jsx"></script></head><body></body></html>'
)
BIG = "<!doctype html><head></head>" + "x" * (MAX_HTML_BYTES + 10)


async def page(request: Request) -> Response:
    """The page, naming the Accept-Encoding it was asked with."""
    encoding = request.headers.get("accept-encoding", "-")
    return HTMLResponse(PAGE.replace("<body>", f"<body>{encoding}"))


async def gzipped(request: Request) -> Response:
    """A dev server compressing whatever it is asked."""
    body = gzip.compress(PAGE.encode())
    return Response(body, headers={"content-type": "text/html", "content-encoding": "gzip"})


async def big(request: Request) -> Response:
    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(BIG), 65536):
            yield BIG[start : start + 65536].encode()

    return StreamingResponse(chunks(), media_type="text/html")


async def script(request: Request) -> Response:
    return PlainTextResponse("export default 1", media_type="text/javascript")


UPSTREAM = Starlette(
    routes=[
        Route("/", page),
        Route("/gzip", gzipped),
        Route("/big", big),
        Route("/src/main.jsx", script),
    ]
)


@pytest.fixture
async def proxy_url(redis_url: str) -> AsyncIterator[str]:
    """A proxy with the reporter on, forwarding ``abc`` to :data:`UPSTREAM`."""
    client = redis.asyncio.Redis.from_url(redis_url)
    async with serving(UPSTREAM) as upstream:

        async def resolve(sandbox_id: str) -> str | None:
            return upstream if sandbox_id == "abc" else None

        reports = PreviewErrorIngest(PreviewErrorStream(client))
        proxy = PreviewProxy(resolve, public_host="localhost", reports=reports)
        try:
            async with serving(proxy) as url:
                yield url
        finally:
            await proxy.aclose()
            await client.aclose()


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        pytest.param(b"<html><HEAD class=x><title>", b"<html><HEAD class=x>TAG<title>", id="head"),
        pytest.param(
            b"<!doctype html><html lang=en><body>",
            b"<!doctype html><html lang=en>TAG<body>",
            id="html",
        ),
        pytest.param(b"<!DOCTYPE html><div>", b"<!DOCTYPE html>TAG<div>", id="doctype"),
        pytest.param(b"<div>", b"TAG<div>", id="fragment"),
        pytest.param(b"<header></header><head>", b"<header></header><head>TAG", id="not-header"),
    ],
)
def test_inject_script(html: bytes, expected: bytes) -> None:
    assert inject_script(html) == expected.replace(b"TAG", SCRIPT_TAG)


async def test_a_navigation_gets_the_tag_early_in_head(proxy_url: str) -> None:
    async with httpx.AsyncClient(base_url=proxy_url, trust_env=False) as client:
        response = await client.get("/", headers={**NAVIGATE, "accept-encoding": "gzip, br"})
    assert response.status_code == 200
    assert response.text.startswith(f'<!doctype html><html lang="en"><head>{SCRIPT_TAG.decode()}')
    assert response.text.index("reporter.js") < response.text.index("/src/main.jsx")
    assert int(response.headers["content-length"]) == len(response.content)
    assert "<body>identity</body>" in response.text  # asked uncompressed, to edit it


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        pytest.param("/", FETCH, id="a-script-fetching-html"),
        pytest.param("/src/main.jsx", NAVIGATE, id="not-html"),
    ],
)
async def test_other_responses_are_untouched(
    proxy_url: str, path: str, headers: dict[str, str]
) -> None:
    async with httpx.AsyncClient(base_url=proxy_url, trust_env=False) as client:
        response = await client.get(path, headers={**headers, "accept-encoding": "gzip"})
    assert b"reporter.js" not in response.content
    assert "identity" not in response.text


async def test_a_compressed_page_goes_through_untouched(proxy_url: str) -> None:
    async with httpx.AsyncClient(base_url=proxy_url, trust_env=False) as client:
        response = await client.get("/gzip", headers=NAVIGATE)
    assert response.headers["content-encoding"] == "gzip"
    assert response.text == PAGE  # decoded by the client, whole and unedited


async def test_a_page_past_the_cap_streams_through_untouched(proxy_url: str) -> None:
    async with httpx.AsyncClient(base_url=proxy_url, trust_env=False) as client:
        response = await client.get("/big", headers=NAVIGATE)
    assert response.status_code == 200
    assert response.text == BIG


@pytest.mark.parametrize(
    ("path", "marker"),
    [
        pytest.param("/__kiln/reporter.js", b"__kilnReport", id="reporter"),
        pytest.param("/__kiln/select.js", b"kiln-select", id="select"),
    ],
)
async def test_the_scripts_are_served_by_the_proxy(
    proxy_url: str, path: str, marker: bytes
) -> None:
    async with httpx.AsyncClient(base_url=proxy_url, trust_env=False) as client:
        response = await client.get(path, headers=FETCH)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/javascript; charset=utf-8"
    assert response.content == script_bytes(path)
    assert marker in response.content


async def test_without_reports_the_proxy_adds_nothing() -> None:
    async with serving(UPSTREAM) as upstream:

        async def resolve(sandbox_id: str) -> str | None:
            return upstream

        proxy = PreviewProxy(resolve, public_host="localhost")
        async with (
            serving(proxy) as url,
            httpx.AsyncClient(base_url=url, trust_env=False) as client,
        ):
            page_response = await client.get("/", headers=NAVIGATE)
            script_response = await client.get("/__kiln/reporter.js", headers=FETCH)
        await proxy.aclose()
    assert b"reporter.js" not in page_response.content
    assert script_response.status_code == 404  # the dev server's answer: no such file
