"""A run's event stream, written once: persist (numbered) in the store, then publish on Redis.

Every event a client sees goes through :func:`persist_and_publish`: the store assigns the next
``seq`` in one transaction, then each event is published on ``kiln:run-events:{run_id}`` as
``{"seq": n, "event": {...}}``. A publish that fails is logged and skipped: followers
(:mod:`app.runs.follow`) notice the gap and read the store, which is the truth.

:class:`RunEventWriter` is what a running agent loop emits into. Content events (``text``,
``thinking_content``, ``file_content``, ``output``) arrive once per token or line, so they are
held back and written in batches: at the latest ``batch_seconds`` (100 ms) after the first one,
as soon as ``batch_bytes`` (16 KB) are pending, and always before any other event (which keeps
the order exact). Adjacent pieces of the same text, thinking block or file are merged into one
event. The store is therefore written a few times per second per run, whatever the token rate.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any

import anyio
import redis.asyncio
import redis.exceptions

from app.store import Store

log = logging.getLogger(__name__)

CONTENT_TYPES = frozenset({"text", "thinking_content", "file_content", "output"})
# Content whose pieces concatenate (an ``output`` event is one line: kept apart).
MERGED_TYPES = frozenset({"text", "thinking_content", "file_content"})
CONTENT_FIELDS = ("content", "line")
TERMINAL_EVENT = "run_finished"


def events_channel(run_id: str) -> str:
    """The Redis channel a run's events are published on."""
    return f"kiln:run-events:{run_id}"


async def persist_and_publish(
    store: Store, client: redis.asyncio.Redis, run_id: str, events: Sequence[dict[str, Any]]
) -> list[int]:
    """Store ``events`` in one transaction, then publish them; their seqs."""
    seqs = await anyio.to_thread.run_sync(store.append_events, run_id, list(events))
    await _publish(client, run_id, zip(seqs, events, strict=True))
    return seqs


async def _publish(
    client: redis.asyncio.Redis, run_id: str, numbered: Iterable[tuple[int, dict[str, Any]]]
) -> None:
    channel = events_channel(run_id)
    try:
        async with client.pipeline(transaction=False) as pipe:
            for seq, event in numbered:
                pipe.publish(channel, json.dumps({"seq": seq, "event": event}))
            await pipe.execute()
    except redis.exceptions.RedisError as exc:
        # Stored already: followers fall back to the store. Never fail the run for this.
        log.warning("events of run %r stored but not published: %s", run_id, exc)


def content_size(event: dict[str, Any]) -> int:
    """The characters of content an event carries (0 for non-content events)."""
    return sum(len(event.get(name) or "") for name in CONTENT_FIELDS)


class RunEventWriter:
    """Batches a run's content events and persists-then-publishes everything in order.

    Use it as an async context manager (a background task flushes batches on time); leaving the
    context flushes what is pending.
    """

    def __init__(
        self,
        store: Store,
        client: redis.asyncio.Redis,
        run_id: str,
        *,
        batch_seconds: float = 0.1,
        batch_bytes: int = 16384,
    ) -> None:
        """Events of ``run_id``; batches close after ``batch_seconds`` or ``batch_bytes``."""
        self._store, self._redis, self.run_id = store, client, run_id
        self._batch_seconds, self._batch_bytes = batch_seconds, batch_bytes
        self._pending: list[dict[str, Any]] = []
        self._pending_bytes = 0
        self._lock = anyio.Lock()
        self._armed = anyio.Event()
        self._tasks: anyio.abc.TaskGroup | None = None
        self.batches = 0  # store transactions made (for tests and benchmarks)
        self.last_seq = 0
        self.muted = False

    async def __aenter__(self) -> RunEventWriter:
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._tasks.start_soon(self._flush_on_time)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        assert self._tasks is not None
        self._tasks.cancel_scope.cancel()
        result = await self._tasks.__aexit__(exc_type, exc, traceback)
        with anyio.CancelScope(shield=True):
            await self.flush()
        return result

    def mute(self) -> None:
        """Drop this and every later event: the run was ended (or taken over) elsewhere."""
        self.muted = True
        self._pending, self._pending_bytes = [], 0

    async def emit(self, event: dict[str, Any]) -> None:
        """Take one event (the agent loop's ``emit``); content waits for its batch."""
        if self.muted:
            return
        if event.get("type") not in CONTENT_TYPES:
            self._pending.append(event)
            await self.flush()
            return
        self._add_content(event)
        if self._pending_bytes >= self._batch_bytes:
            await self.flush()
        else:
            self._armed.set()

    def _add_content(self, event: dict[str, Any]) -> None:
        last = self._pending[-1] if self._pending else None
        if last is not None and _continues(last, event):
            self._pending[-1] = {**last, "content": last["content"] + event["content"]}
        else:
            self._pending.append(dict(event))
        self._pending_bytes += content_size(event)

    async def flush(self) -> None:
        """Persist and publish every pending event now (one store transaction)."""
        async with self._lock:
            batch, self._pending, self._pending_bytes = self._pending, [], 0
            if not batch or self.muted:
                return
            seqs = await persist_and_publish(self._store, self._redis, self.run_id, batch)
            self.batches += 1
            self.last_seq = seqs[-1]

    async def _flush_on_time(self) -> None:
        """Flush content at most ``batch_seconds`` after it started waiting."""
        while True:
            await self._armed.wait()
            await anyio.sleep(self._batch_seconds)
            self._armed = anyio.Event()
            await self.flush()


def _continues(last: dict[str, Any], event: dict[str, Any]) -> bool:
    """Whether ``event`` is the next piece of the same text, thinking block or file."""
    if event["type"] not in MERGED_TYPES or last.get("type") != event["type"]:
        return False
    same_keys = last.keys() == event.keys()
    return same_keys and all(last[k] == event[k] for k in last if k != "content")
