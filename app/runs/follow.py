"""Following a run's events: replay from the store, then live from Redis, without gaps or
duplicates, ending after ``run_finished``.

The order that makes it exact: **subscribe first** (and wait for Redis to confirm it: SUBSCRIBE
only sends the command, and a publish that lands before the server has processed it is lost to
this follower), then replay the store after ``after_seq``, then take live messages, dropping
those already replayed (by ``seq``). Live messages come through the process's one pub/sub
connection (:class:`app.runs.live.LiveEvents`); a follower given none runs a private one.
Anything published while the replay ran is in the subscription's buffer, and anything stored
before the subscription is in the replay. A live
message further ahead than the next expected ``seq`` (a publish that failed, or live buffering
dropped) sends the follower back to the store.

The live buffer is bounded (``buffer_size`` messages): when a slow consumer lets it fill, the
follower drops it and re-reads from the store, so memory never grows with the lag. With no live
message for ``poll_seconds``, the store is read anyway (a publish can be lost when Redis
restarts). The SSE endpoint uses it as::

    async with RunFollower(store, client, run_id, after_seq) as events:
        async for seq, event in events:
            ...
"""

from __future__ import annotations

import collections
import json
import logging
import time
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import redis.asyncio
import redis.asyncio.client
import redis.exceptions

from app.runs.events import TERMINAL_EVENT, events_channel
from app.runs.live import LiveEvents
from app.store import Store

log = logging.getLogger(__name__)

PAGE_SIZE = 500
# A run ended without a ``run_finished`` event (only a crash at the worst moment can do it):
# after this long, followers stop waiting for one.
MISSING_END_GRACE_SECONDS = 5.0
Numbered = tuple[int, dict[str, Any]]


class RunFollower:
    """The events of one run after ``after_seq``, as ``(seq, event)`` pairs."""

    def __init__(
        self,
        store: Store,
        client: redis.asyncio.Redis,
        run_id: str,
        after_seq: int = 0,
        *,
        buffer_size: int = 1000,
        poll_seconds: float = 2.0,
        live: LiveEvents | None = None,
    ) -> None:
        """Follow ``run_id`` from the event after ``after_seq``; ``live`` is the process's
        pub/sub fan-out (a private one is run for this follower when none is given)."""
        self._store, self._redis, self.run_id = store, client, run_id
        self._hub, self._private_hub = live or LiveEvents(client), live is None
        self._last = after_seq
        self._buffer: collections.deque[Numbered] = collections.deque()
        self._buffer_size, self._poll_seconds = buffer_size, poll_seconds
        self._arrived = anyio.Event()
        self._tasks: anyio.abc.TaskGroup | None = None
        self.overflows = 0  # times the live buffer was dropped for a slow consumer
        self.store_reads = 0

    async def __aenter__(self) -> RunFollower:
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        if self._private_hub:
            self._tasks.start_soon(self._hub.run)
        if not await self._hub.subscribe(events_channel(self.run_id), self._keep):
            log.warning("run %r: Redis did not confirm the subscription in time", self.run_id)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        assert self._tasks is not None
        with anyio.CancelScope(shield=True):
            await self._hub.unsubscribe(events_channel(self.run_id), self._keep)
        self._tasks.cancel_scope.cancel()
        return await self._tasks.__aexit__(exc_type, exc, traceback)

    def __aiter__(self) -> AsyncIterator[Numbered]:
        return self._events()

    async def _events(self) -> AsyncIterator[Numbered]:
        while True:
            async for seq, event in self._replay():
                yield seq, event
                if event.get("type") == TERMINAL_EVENT:
                    return
            if await self._ended_without_end():
                return
            async for seq, event in self._live():
                yield seq, event
                if event.get("type") == TERMINAL_EVENT:
                    return

    async def _replay(self) -> AsyncIterator[Numbered]:
        """Every stored event after the last one yielded."""
        while True:
            page = await anyio.to_thread.run_sync(
                self._store.events_after, self.run_id, self._last, PAGE_SIZE
            )
            self.store_reads += 1
            for seq, event in page:
                self._last = seq
                yield seq, event
            if len(page) < PAGE_SIZE:
                return

    async def _live(self) -> AsyncIterator[Numbered]:
        """Live events in order; returns when the store must be read (gap, overflow, quiet)."""
        while True:
            if not self._buffer:
                self._arrived = anyio.Event()
                with anyio.move_on_after(self._poll_seconds):
                    await self._arrived.wait()
                if not self._buffer:
                    return  # quiet (or the buffer was dropped): look at the store
            seq, event = self._buffer.popleft()
            if seq <= self._last:
                continue  # replayed already
            if seq > self._last + 1:
                return  # a gap: the store has the missing events
            self._last = seq
            yield seq, event

    async def _ended_without_end(self) -> bool:
        """Whether nothing more will come: the run is gone, or it ended and either the
        follower is past its ``run_finished`` or none was written (long ago)."""
        run = await anyio.to_thread.run_sync(self._store.get_run, self.run_id)
        if run is None:
            return True
        if not run.terminal:
            return False
        if (run.finished or 0.0) < time.time() - MISSING_END_GRACE_SECONDS:
            return True
        tail = await anyio.to_thread.run_sync(
            self._store.events_after, self.run_id, self._last - 1, 1
        )
        return bool(tail) and tail[0][1].get("type") == TERMINAL_EVENT

    def _keep(self, data: bytes | str) -> None:
        """Move a published event into the bounded buffer; drop it when it overflows."""
        payload = json.loads(data)
        if len(self._buffer) >= self._buffer_size:
            self._buffer.clear()
            self.overflows += 1
        self._buffer.append((int(payload["seq"]), payload["event"]))
        self._arrived.set()
