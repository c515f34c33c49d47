"""The event writer: persist, then publish; content batched, never stored per token."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from app.runs.events import RunEventWriter, events_channel, persist_and_publish
from app.store import Run, Store
from tests.runs.conftest import new_chat

pytestmark = pytest.mark.anyio


class CountingStore(Store):
    """A store that counts its event writes."""

    writes = 0

    def append_events(self, run_id: str, events: Sequence[dict[str, Any]]) -> list[int]:
        self.writes += 1
        return super().append_events(run_id, events)


@pytest.fixture
def counting(store: Store) -> CountingStore:
    return CountingStore(store.path, "another-secret-of-length")


def new_run(store: Store) -> Run:
    user, chat = new_chat(store)
    return store.create_run(chat.id, user.id, None, "replay", "todo-app")


def tokens(count: int, kind: str = "text") -> list[dict[str, Any]]:
    return [{"type": kind, "content": f"t{index % 10} ", "turn": 1} for index in range(count)]


@pytest.mark.parametrize("count", [pytest.param(50, id="50"), pytest.param(3000, id="3000")])
async def test_store_writes_do_not_grow_with_the_number_of_tokens(
    counting: CountingStore, client: redis.asyncio.Redis, count: int
) -> None:
    run = new_run(counting)
    async with RunEventWriter(counting, client, run.id, batch_seconds=60.0) as writer:
        for event in tokens(count):
            await writer.emit(event)
        await writer.emit({"type": "file_start", "path": "a.js", "turn": 1})
    assert counting.writes == 1  # the pending text and the next event, in one transaction
    stored = counting.events_after(run.id)
    assert [event["type"] for _seq, event in stored] == ["text", "file_start"]
    assert stored[0][1]["content"] == "".join(e["content"] for e in tokens(count))


async def test_a_full_batch_is_written_at_once(
    counting: CountingStore, client: redis.asyncio.Redis
) -> None:
    run = new_run(counting)
    writer = RunEventWriter(counting, client, run.id, batch_seconds=60.0, batch_bytes=999)
    async with writer:
        for event in tokens(1000):  # 3 characters each: a batch every 333 tokens
            await writer.emit(event)
        written_while_open = counting.writes
    assert written_while_open == 3
    assert counting.writes == 4  # the last token, when the writer closes


async def test_pending_content_is_written_after_the_batch_time(
    counting: CountingStore, client: redis.asyncio.Redis
) -> None:
    run = new_run(counting)
    async with RunEventWriter(counting, client, run.id, batch_seconds=0.05) as writer:
        for event in tokens(5):
            await writer.emit(event)
        with anyio.fail_after(10):
            while counting.last_seq(run.id) == 0:
                await anyio.sleep(0.01)
        written_while_open = counting.writes
    assert written_while_open == 1


async def test_only_pieces_of_the_same_stream_are_merged(
    store: Store, client: redis.asyncio.Redis
) -> None:
    run = new_run(store)
    events: list[dict[str, Any]] = [
        {"type": "file_content", "path": "a.js", "content": "one ", "turn": 1},
        {"type": "file_content", "path": "a.js", "content": "two", "turn": 1},
        {"type": "file_content", "path": "b.js", "content": "three", "turn": 1},
        {"type": "output", "line": "npm notice 1"},
        {"type": "output", "line": "npm notice 2"},
        {"type": "thinking_content", "content": "hm", "turn": 1},
        {"type": "text", "content": "Hi", "turn": 1},
    ]
    async with RunEventWriter(store, client, run.id, batch_seconds=60.0) as writer:
        for event in events:
            await writer.emit(event)
    assert [event for _seq, event in store.events_after(run.id)] == [
        {"type": "file_content", "path": "a.js", "content": "one two", "turn": 1},
        events[2],
        events[3],
        events[4],
        events[5],
        events[6],
    ]
    assert events[0]["content"] == "one "  # the caller's dicts are left alone


async def test_events_are_stored_before_they_are_published(
    store: Store, client: redis.asyncio.Redis
) -> None:
    run = new_run(store)
    received: list[tuple[int, bool]] = []
    pubsub = client.pubsub()
    await pubsub.subscribe(events_channel(run.id))
    await persist_and_publish(store, client, run.id, [{"type": "a"}, {"type": "b"}])
    with anyio.fail_after(10):
        while len(received) < 2:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if message is not None:
                payload = json.loads(message["data"])
                stored = [seq for seq, _ in store.events_after(run.id)]
                received.append((payload["seq"], payload["seq"] in stored))
    await pubsub.aclose()  # type: ignore[no-untyped-call]
    assert received == [(1, True), (2, True)]


async def test_a_muted_writer_drops_everything(store: Store, client: redis.asyncio.Redis) -> None:
    run = new_run(store)
    async with RunEventWriter(store, client, run.id) as writer:
        await writer.emit({"type": "text", "content": "pending", "turn": 1})
        writer.mute()
        await writer.emit({"type": "run_finished", "status": "completed", "stop_reason": "done"})
    assert store.events_after(run.id) == []


async def test_a_failed_publish_keeps_the_stored_events(
    store: Store, client: redis.asyncio.Redis
) -> None:
    run = new_run(store)
    broken = redis.asyncio.Redis(host="127.0.0.1", port=1, retry=Retry(NoBackoff(), 0))
    seqs = await persist_and_publish(store, broken, run.id, [{"type": "a"}])
    await broken.aclose()
    assert seqs == [1]
    assert store.events_after(run.id) == [(1, {"type": "a"})]
