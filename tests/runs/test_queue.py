"""The run queue: at-least-once delivery, reclaim of idle entries, heartbeats."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
import redis.asyncio

from app.runs.queue import GONE, OWNED, TAKEN, Delivery, RunQueue

pytestmark = pytest.mark.anyio

WAIT_LIMIT_SECONDS = 30.0
# How long an entry is left idle before a heartbeat, and the reclaim threshold after it: the
# heartbeat must reset the idle time, or the reclaim (asked right after) would take the entry.
# A second is the margin a slow machine has between the heartbeat and the reclaim.
HEARTBEAT_IDLE_SECONDS = 1.0


@pytest.fixture(params=[pytest.param(2, id="resp2"), pytest.param(3, id="resp3")])
async def queue(
    request: pytest.FixtureRequest, client: redis.asyncio.Redis, runs_redis_url: str
) -> AsyncIterator[RunQueue]:
    """A queue on an emptied database, spoken to in either protocol version."""
    speaker = redis.asyncio.Redis.from_url(runs_redis_url, protocol=request.param)
    opened = RunQueue(speaker)
    await opened.ensure_group()
    await opened.ensure_group()  # a second call is harmless
    yield opened
    await speaker.aclose()


async def wait_idle(
    client: redis.asyncio.Redis, queue: RunQueue, entry: str, seconds: float
) -> None:
    """Poll until Redis reports ``entry`` idle (unacknowledged, untouched) for ``seconds``."""
    with anyio.fail_after(WAIT_LIMIT_SECONDS):
        while True:
            pending = await client.xpending_range(queue.stream, queue.group, entry, entry, 1)
            if pending and pending[0]["time_since_delivered"] >= seconds * 1000:
                return
            await anyio.sleep(0.01)


async def test_an_entry_goes_to_one_consumer_until_acknowledged(queue: RunQueue) -> None:
    entry = await queue.enqueue("run1")
    assert await queue.read("a", block_ms=10) == [Delivery(entry, "run1", reclaimed=False)]
    assert await queue.read("b", block_ms=10) == []
    assert await queue.pending_count() == 1
    await queue.ack(entry)
    assert await queue.pending_count() == 0


async def test_an_idle_entry_is_reclaimed_by_another_consumer(
    queue: RunQueue, client: redis.asyncio.Redis
) -> None:
    entry = await queue.enqueue("run1")
    await queue.read("dead", block_ms=10)
    assert await queue.reclaim("alive", min_idle_seconds=60) == []
    await wait_idle(client, queue, entry, 0.01)
    assert await queue.reclaim("alive", min_idle_seconds=0.01) == [
        Delivery(entry, "run1", reclaimed=True)
    ]


async def test_a_heartbeat_keeps_the_entry_from_being_reclaimed(
    queue: RunQueue, client: redis.asyncio.Redis
) -> None:
    entry = await queue.enqueue("run1")
    await queue.read("alive", block_ms=10)
    await wait_idle(
        client, queue, entry, HEARTBEAT_IDLE_SECONDS
    )  # reclaimable now, but for the beat
    assert await queue.heartbeat("alive", entry) == OWNED
    assert await queue.reclaim("other", min_idle_seconds=HEARTBEAT_IDLE_SECONDS) == []


async def test_a_heartbeat_after_a_takeover_reports_it_and_steals_nothing(
    queue: RunQueue, client: redis.asyncio.Redis
) -> None:
    entry = await queue.enqueue("run1")
    await queue.read("slow", block_ms=10)
    await wait_idle(client, queue, entry, 0.01)
    await queue.reclaim("new", min_idle_seconds=0.01)
    assert await queue.heartbeat("slow", entry) == TAKEN
    pending = await client.xpending_range(queue.stream, queue.group, "-", "+", 10)
    assert [item["consumer"] for item in pending] == [b"new"]


async def test_an_entry_without_a_run_id_is_delivered_for_dropping(
    queue: RunQueue, client: redis.asyncio.Redis
) -> None:
    await client.xadd(queue.stream, {"something": "else"})
    await queue.enqueue("run1")
    assert [d.run_id for d in await queue.read("a", count=5, block_ms=10)] == ["", "run1"]


async def test_a_heartbeat_of_an_entry_gone_from_the_stream_says_so(queue: RunQueue) -> None:
    entry = await queue.enqueue("run1")
    await queue.read("a", block_ms=10)
    await queue.ack(entry)  # or lost, with the read, by a Redis that came back without them
    assert await queue.heartbeat("a", entry) == GONE


async def test_an_entry_redis_forgot_was_read_is_not_the_readers(
    queue: RunQueue, client: redis.asyncio.Redis
) -> None:
    entry = await queue.enqueue("run1")
    await queue.read("a", block_ms=10)
    await client.xgroup_setid(queue.stream, queue.group, "0")  # the read lost: to be read again
    await client.xack(queue.stream, queue.group, entry)
    assert await queue.heartbeat("a", entry) == TAKEN  # whoever reads it next runs it


async def test_a_user_holding_slots_goes_behind_a_waiting_user_holding_fewer(
    queue: RunQueue,
) -> None:
    await queue.enqueue("a1", "ann")
    await queue.enqueue("a2", "ann")
    await queue.enqueue("b1", "bob")
    [first] = await queue.read("w", block_ms=10)
    assert (first.run_id, await queue.defer_if_unfair(first)) == ("a1", False)  # holds none
    [second] = await queue.read("w", block_ms=10)
    assert (second.run_id, await queue.defer_if_unfair(second)) == ("a2", True)
    assert await queue.pending_count() == 1  # the deferred entry is no longer read
    [third] = await queue.read("w", block_ms=10)
    assert (third.run_id, await queue.defer_if_unfair(third)) == ("b1", False)
    [moved] = await queue.read("w", block_ms=10)
    assert (moved.run_id, moved.user_id) == ("a2", "ann")
    assert moved.entry_id != second.entry_id
    assert not await queue.defer_if_unfair(moved)  # bob holds as many now: its turn


@pytest.mark.parametrize(
    ("queued", "deferred"),
    [
        pytest.param([("a1", "ann"), ("a2", "ann")], False, id="only-the-same-user-waits"),
        pytest.param([("a1", "ann"), ("a2", "ann"), ("b1", "bob")], True, id="another-waits"),
        # An entry queued before entries named their user counts as the user "".
        pytest.param([("a1", "ann"), ("a2", "ann"), ("b1", "")], True, id="entry-without-user"),
    ],
)
async def test_only_a_waiting_user_holding_fewer_slots_defers_an_entry(
    queue: RunQueue, queued: list[tuple[str, str]], deferred: bool
) -> None:
    for run_id, user_id in queued:
        await queue.enqueue(run_id, user_id)
    await queue.read("w", block_ms=10)
    [second] = await queue.read("w", block_ms=10)
    assert await queue.defer_if_unfair(second) is deferred
    assert await queue.pending_count() == (1 if deferred else 2)


async def test_a_reclaimed_entry_is_never_deferred(
    queue: RunQueue, client: redis.asyncio.Redis
) -> None:
    await queue.enqueue("a1", "ann")
    entry = await queue.enqueue("a2", "ann")
    await queue.enqueue("b1", "bob")
    await queue.read("w", block_ms=10)
    await queue.read("dead", block_ms=10)
    await wait_idle(client, queue, entry, 0.05)
    reclaimed = next(d for d in await queue.reclaim("w", 0.05, count=2) if d.run_id == "a2")
    assert not await queue.defer_if_unfair(reclaimed)
