"""The preview's readiness probe against real servers on loopback sockets."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from sandbox.preview.readiness import PROBE_HEADERS, probe_preview
from tests.servers import UvicornThread, loopback_socket

SEEN: list[dict[str, str]] = []


async def page(request: Request) -> Response:
    SEEN.append(dict(request.headers))
    return PlainTextResponse("app")


async def broken(request: Request) -> Response:
    return PlainTextResponse("SyntaxError in App.jsx", status_code=500)


@pytest.fixture(scope="module")
def dev_server() -> Iterator[UvicornThread]:
    with UvicornThread(Starlette(routes=[Route("/", page)])) as server:
        yield server


@pytest.mark.anyio
async def test_a_dev_server_answering_is_ready(dev_server: UvicornThread) -> None:
    SEEN.clear()
    readiness = await probe_preview(dev_server.url, "abc")
    assert readiness.to_dict() == {
        "state": "ready",
        "code": "preview_ready",
        "message": "the dev server of sandbox 'abc' is up",
    }
    # Asked as the frame would ask: a page navigation.
    assert {k: SEEN[0][k] for k in PROBE_HEADERS} == PROBE_HEADERS


@pytest.mark.anyio
async def test_a_server_error_is_failing_in_words() -> None:
    with UvicornThread(Starlette(routes=[Route("/", broken)])) as server:
        readiness = await probe_preview(f"{server.url}/", "abc")
    assert (readiness.state, readiness.code) == ("failing", "preview_upstream_error")
    assert readiness.message == "the dev server of sandbox 'abc' answers HTTP 500"


@pytest.mark.anyio
async def test_a_dev_server_not_listening_yet_is_starting() -> None:
    with loopback_socket() as refusing:  # bound, not listening: connections are refused
        readiness = await probe_preview(f"http://127.0.0.1:{refusing.getsockname()[1]}", "abc")
    assert (readiness.state, readiness.code) == ("starting", "preview_starting")
    assert "'abc' is not up yet" in readiness.message


@pytest.mark.anyio
async def test_a_dev_server_that_never_answers_is_starting_after_the_timeout() -> None:
    with loopback_socket() as silent:
        silent.listen(4)  # the kernel accepts; nobody ever answers
        started = time.monotonic()
        readiness = await probe_preview(
            f"http://127.0.0.1:{silent.getsockname()[1]}", "abc", timeout=0.3
        )
        waited = time.monotonic() - started
    assert (readiness.state, readiness.code) == ("starting", "preview_timeout")
    assert 0.3 <= waited < 5


@pytest.mark.anyio
async def test_a_sandbox_without_an_address_yet_is_starting_in_words() -> None:
    """After a restart a revived sandbox has no dev server address for a moment: that is
    "starting", never "failed: UnsupportedProtocol"."""
    readiness = await probe_preview("", "abc")
    assert (readiness.state, readiness.code) == ("starting", "preview_starting")
    assert "UnsupportedProtocol" not in readiness.message
