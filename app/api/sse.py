"""Server-sent events: an ASGI response that streams a run's events, with heartbeats.

Each event goes out as::

    id: <seq>
    event: <type>
    data: <the event as one line of JSON>

A comment ``: ping`` is written every ``ping_interval`` seconds so that proxies and browsers
keep an idle stream open. The stream ends when the event source ends (the run service's
``follow`` stops after ``run_finished``) or when the client goes away; either way the source is
closed (``aclose``), which releases its Redis subscription. It also ends when ``until`` is set
(the server is stopping): cleanly, so the client's ``EventSource`` reconnects (with
``Last-Event-ID``) to whatever serves next, instead of holding the stop for the HTTP server's
graceful seconds.

The three activities (pump events, ping, watch for the client's disconnect) run as tasks of one
task group; writes go through a lock so a ping never lands inside an event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable
from typing import Any

import anyio
from starlette.types import Receive, Scope, Send

from app.api.errors import ApiError

PING_INTERVAL_SECONDS = 15.0
RETRY_MILLISECONDS = 2000
HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"x-accel-buffering", b"no"),  # nginx and friends: do not buffer the stream
]


def format_event(seq: int | str, event: dict[str, Any]) -> bytes:
    """One SSE frame for event number ``seq`` (or a Redis stream id: preview errors)."""
    kind = str(event.get("type", "message"))
    kind = "".join(ch for ch in kind if ch not in "\r\n") or "message"
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return f"id: {seq}\nevent: {kind}\ndata: {data}\n\n".encode()


MAX_SEQ_DIGITS = 18  # event numbers are SQLite integers (64-bit)


def resume_point(last_event_id: str | None, after: str | None) -> int:
    """Where to resume: the ``Last-Event-ID`` header wins over ``?after=``; 0 from the start."""
    for name, raw in (("Last-Event-ID", last_event_id), ("after", after)):
        if raw is None or raw.strip() == "":
            continue
        value = raw.strip()
        # ASCII digits only ('²'.isdigit() is true, int('²') fails), and few enough for int().
        if not (value.isascii() and value.isdigit() and len(value) <= MAX_SEQ_DIGITS):
            message = f"{name} must be a non-negative event number, not {value!r}"
            raise ApiError(400, "invalid_request", message)
        return int(value)
    return 0


class EventStreamResponse:
    """ASGI response streaming ``events`` (``(seq, event)`` pairs) as SSE."""

    def __init__(
        self,
        events: AsyncIterable[tuple[int | str, dict[str, Any]]],
        ping_interval: float = PING_INTERVAL_SECONDS,
        until: anyio.Event | None = None,
    ) -> None:
        """``events`` is consumed once (closed at the end if it has ``aclose``); the stream
        ends early once ``until`` is set."""
        self.events = events
        self.ping_interval = ping_interval
        self.until = until
        self._lock = anyio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stream until the source ends or the client leaves."""
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await self._write(send, f"retry: {RETRY_MILLISECONDS}\n\n".encode())
        client_left = anyio.Event()
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._watch_disconnect, receive, client_left, tasks.cancel_scope)
                tasks.start_soon(self._ping, send)
                if self.until is not None:
                    tasks.start_soon(_cancel_when_set, self.until, tasks.cancel_scope)
                await self._pump(send)
                tasks.cancel_scope.cancel()
        except* OSError:
            client_left.set()  # the connection broke under a write: nobody is listening
        if not client_left.is_set():
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _pump(self, send: Send) -> None:
        try:
            async for seq, event in self.events:
                await self._write(send, format_event(seq, event))
        finally:
            closer = getattr(self.events, "aclose", None)
            if closer is not None:
                with anyio.CancelScope(shield=True):
                    await closer()

    async def _ping(self, send: Send) -> None:
        while True:
            await anyio.sleep(self.ping_interval)
            await self._write(send, b": ping\n\n")

    async def _write(self, send: Send, body: bytes) -> None:
        async with self._lock:
            await send({"type": "http.response.body", "body": body, "more_body": True})

    @staticmethod
    async def _watch_disconnect(
        receive: Receive, client_left: anyio.Event, scope: anyio.CancelScope
    ) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                client_left.set()
                scope.cancel()
                return


async def _cancel_when_set(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
