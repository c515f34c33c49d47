"""Web tools against a local Tavily-compatible server (real HTTP on loopback)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from app.agent.web_tools import (
    TavilyWebTools,
    ToolResult,
    UnavailableWebTools,
    web_tools_from_env,
)
from tests.servers import UvicornThread, loopback_socket

pytestmark = pytest.mark.anyio


class FakeTavily:
    """Scriptable Tavily-compatible endpoints; records what it was asked."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any], str]] = []
        self.status = 200
        self.body: Any = None

    async def search(self, request: Request) -> Response:
        return await self._answer(
            request,
            {
                "answer": "Use Intl.RelativeTimeFormat.",
                "results": [
                    {"title": "MDN", "url": "https://developer.mozilla.org/x", "content": "rtf"}
                ],
            },
        )

    async def extract(self, request: Request) -> Response:
        return await self._answer(request, {"results": [{"url": "u", "raw_content": "page text"}]})

    async def _answer(self, request: Request, default: Any) -> Response:
        body = await request.json()
        self.requests.append((request.url.path, body, request.headers.get("authorization", "")))
        if self.body == "not-json":
            return PlainTextResponse("oops", status_code=self.status)
        return JSONResponse(default if self.body is None else self.body, status_code=self.status)


@pytest.fixture
def fake() -> FakeTavily:
    return FakeTavily()


@pytest.fixture
def server(fake: FakeTavily) -> Iterator[UvicornThread]:
    app = Starlette(
        routes=[
            Route("/search", fake.search, methods=["POST"]),
            Route("/extract", fake.extract, methods=["POST"]),
        ]
    )
    with UvicornThread(app) as running:
        yield running


async def test_search_formats_results_and_sends_key(
    server: UvicornThread, fake: FakeTavily
) -> None:
    tools = TavilyWebTools("tvly-secret", server.url)
    result = await tools.search("relative time", 3)
    assert result.ok
    assert "Answer: Use Intl.RelativeTimeFormat." in result.text
    assert "1. MDN — https://developer.mozilla.org/x\nrtf" in result.text
    path, body, auth = fake.requests[0]
    assert (path, body["query"], body["max_results"], auth) == (
        "/search",
        "relative time",
        3,
        "Bearer tvly-secret",
    )


async def test_scrape_returns_page_text(server: UvicornThread, fake: FakeTavily) -> None:
    result = await TavilyWebTools("k", server.url).scrape("https://example.com")
    assert result == ToolResult("url_scrape", "https://example.com", True, "page text")
    assert fake.requests[0][1] == {"urls": ["https://example.com"]}


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        pytest.param(401, {}, "refused the API key", id="unauthorized"),
        pytest.param(429, {}, "rate limiting", id="rate-limited"),
        pytest.param(500, {}, "HTTP 500", id="server-error"),
        pytest.param(200, "not-json", "not JSON", id="not-json"),
        pytest.param(200, {"results": []}, "No results", id="no-results"),
    ],
)
async def test_search_failures_become_readable_results(
    server: UvicornThread, fake: FakeTavily, status: int, body: Any, says: str
) -> None:
    fake.status, fake.body = status, body
    result = await TavilyWebTools("k", server.url).search("q", 2)
    assert says in result.text
    assert result.ok is (status == 200 and body != "not-json")


async def test_unreachable_service_is_a_result_not_an_exception() -> None:
    closed = loopback_socket()  # bound, never listening: connections are refused
    try:
        result = await TavilyWebTools("k", f"http://127.0.0.1:{closed.getsockname()[1]}").search(
            "q", 1
        )
    finally:
        closed.close()
    assert not result.ok
    assert "could not be reached" in result.text


async def test_without_configuration_search_is_unavailable() -> None:
    tools = web_tools_from_env({})
    assert isinstance(tools, UnavailableWebTools)
    result = await tools.search("anything", 5)
    assert not result.ok
    assert "unavailable" in result.text


def test_configuration_picks_tavily() -> None:
    tools = web_tools_from_env({"TAVILY_API_KEY": "k", "KILN_SEARCH_URL": "http://127.0.0.1:9/"})
    assert isinstance(tools, TavilyWebTools)
