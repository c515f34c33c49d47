"""The SSE response on its own: frames, resume points, heartbeats, the end of the stream."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.api.errors import ApiError
from app.api.sse import EventStreamResponse, format_event, resume_point
from tests.api.harness import serving, sse_frames


def test_an_event_is_one_frame_with_its_seq_type_and_json() -> None:
    frame = format_event(7, {"type": "text", "content": "a\nb ünï"})
    assert frame == ('id: 7\nevent: text\ndata: {"type":"text","content":"a\\nb ünï"}\n\n').encode()


def test_a_type_cannot_break_the_frame() -> None:
    frame = format_event(1, {"type": "x\nevent: forged"}).decode()
    assert frame.splitlines()[1] == "event: xevent: forged"
    assert json.loads(frame.splitlines()[2].removeprefix("data: "))["type"] == "x\nevent: forged"


@pytest.mark.parametrize(
    ("header", "query", "expected"),
    [
        pytest.param(None, None, 0, id="from-start"),
        pytest.param("12", None, 12, id="header"),
        pytest.param(None, "5", 5, id="query"),
        pytest.param("12", "5", 12, id="header-wins"),
        pytest.param(" ", "5", 5, id="blank-header"),
    ],
)
def test_resume_point(header: str | None, query: str | None, expected: int) -> None:
    assert resume_point(header, query) == expected


@pytest.mark.parametrize(
    ("header", "query"),
    [
        pytest.param("abc", None, id="letters"),
        pytest.param(None, "-3", id="negative"),
        pytest.param(None, "1.5", id="fraction"),
        pytest.param("\u00b2", None, id="superscript-two"),
        pytest.param("\u0663", None, id="arabic-indic-three"),
        pytest.param(None, "9" * 5000, id="5000-digits"),
    ],
)
def test_bad_resume_points(header: str | None, query: str | None) -> None:
    with pytest.raises(ApiError) as caught:
        resume_point(header, query)
    assert caught.value.status == 400


class Source:
    """Events fed by the test through a memory stream; records being closed."""

    def __init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[tuple[int, dict[str, Any]]](10)
        self.closed = anyio.Event()

    def __aiter__(self) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        return self._events()

    async def _events(self) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        async for item in self.receive:
            yield item

    async def aclose(self) -> None:
        self.receive.close()
        self.closed.set()


class Streaming:
    """An ASGI endpoint streaming a source."""

    def __init__(
        self, source: Source, ping_interval: float, until: anyio.Event | None = None
    ) -> None:
        self.response = EventStreamResponse(source, ping_interval, until=until)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.response(scope, receive, send)


def streaming(source: Source, ping_interval: float, until: anyio.Event | None = None) -> Starlette:
    """An app streaming ``source`` at ``/`` (until ``until`` is set, if given)."""
    return Starlette(routes=[Route("/", Streaming(source, ping_interval, until))])


@pytest.mark.anyio
async def test_pings_while_idle_then_events_then_the_end() -> None:
    source = Source()

    async with (
        serving(streaming(source, ping_interval=0.05)) as url,
        httpx.AsyncClient(base_url=url) as client,
        client.stream("GET", "/") as response,
    ):
        assert response.headers["cache-control"] == "no-store"
        frames = sse_frames(response)
        seen = [await anext(frames), await anext(frames)]
        await source.send.send((1, {"type": "run_started"}))
        await source.send.aclose()
        seen += [frame async for frame in frames]
    assert seen[0].comment == "ping"
    assert [(f.id, f.event) for f in seen if f.comment is None] == [(1, "run_started")]
    assert source.closed.is_set()


@pytest.mark.anyio
async def test_a_client_leaving_closes_the_source() -> None:
    source = Source()

    async with (
        serving(streaming(source, ping_interval=60)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        async with client.stream("GET", "/") as response:
            await source.send.send((1, {"type": "text", "content": "x"}))
            first = await anext(sse_frames(response))
        with anyio.fail_after(10):
            await source.closed.wait()
    source.send.close()
    assert first.id == 1


@pytest.mark.anyio
async def test_a_stopping_server_ends_the_stream_cleanly() -> None:
    """A stop must not wait for streams that never end by themselves (kiln issue 24): the
    stream ends as a complete response, the source closed."""
    source, stopping = Source(), anyio.Event()

    async with (
        serving(streaming(source, ping_interval=60, until=stopping)) as url,
        httpx.AsyncClient(base_url=url) as client,
        client.stream("GET", "/") as response,
    ):
        await source.send.send((1, {"type": "run_started"}))
        frames = sse_frames(response)
        first = await anext(frames)
        stopping.set()
        with anyio.fail_after(10):
            rest = [frame async for frame in frames]
    source.send.close()
    assert (first.id, rest) == (1, [])
    assert source.closed.is_set()
