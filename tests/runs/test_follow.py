"""Following a run: replay, then live, no gap and no duplicate, ending after run_finished."""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import pytest
import redis.asyncio

from app.runs.events import events_channel, persist_and_publish
from app.runs.follow import RunFollower
from app.store import Run, Store
from tests.runs.conftest import new_chat

pytestmark = pytest.mark.anyio

FINISHED = {"type": "run_finished", "status": "completed", "stop_reason": "done"}
HANG_GUARD_SECONDS = 60
POLL_SECONDS = 0.01
LINK_DELAY_SECONDS = 0.2


def new_run(store: Store) -> Run:
    user, chat = new_chat(store)
    return store.create_run(chat.id, user.id, None, "replay", "todo-app")


async def follow_all(follower: RunFollower, delay: float = 0.0) -> list[tuple[int, dict[str, Any]]]:
    """Every (seq, event) the follower yields, consuming at ``delay`` per event."""
    seen = []
    with anyio.fail_after(HANG_GUARD_SECONDS):
        async with follower:
            async for item in follower:
                seen.append(item)
                await anyio.sleep(delay)
    return seen


async def subscribers(client: redis.asyncio.Redis, run_id: str) -> int:
    """How many clients Redis counts on the run's events channel."""
    counts = await client.pubsub_numsub(events_channel(run_id))
    return int(counts[0][1])


async def wait_until_subscribed(client: redis.asyncio.Redis, run_id: str) -> None:
    """Poll until a follower of ``run_id`` is subscribed."""
    with anyio.fail_after(HANG_GUARD_SECONDS):
        while await subscribers(client, run_id) == 0:
            await anyio.sleep(POLL_SECONDS)


async def produce(
    store: Store, client: redis.asyncio.Redis, run_id: str, count: int, rng: random.Random
) -> None:
    """``count`` events in batches of random size, then run_finished."""
    written = 0
    while written < count:
        size = min(rng.randint(1, 5), count - written)
        batch = [{"type": "output", "line": f"line {written + i}"} for i in range(size)]
        await persist_and_publish(store, client, run_id, batch)
        written += size
        await anyio.sleep(rng.choice((0, 0, 0.001)))
    await persist_and_publish(store, client, run_id, [FINISHED])


async def test_followers_joining_anywhere_see_every_event_once_in_order(
    store: Store, client: redis.asyncio.Redis
) -> None:
    run, rng = new_run(store), random.Random(5)
    results: dict[int, list[tuple[int, dict[str, Any]]]] = {}

    async def join_later(index: int) -> None:
        await anyio.sleep(rng.uniform(0, 0.3))
        after = rng.randint(0, store.last_seq(run.id))
        follower = RunFollower(store, client, run.id, after, poll_seconds=0.5)
        results[after * 100 + index] = await follow_all(follower)

    async with anyio.create_task_group() as tasks:
        for index in range(10):
            tasks.start_soon(join_later, index)
        tasks.start_soon(produce, store, client, run.id, 400, rng)
    stored = store.events_after(run.id, 0, limit=10_000)
    assert stored[-1][1] == FINISHED
    for key, seen in results.items():
        after = key // 100
        assert seen == stored[after:], f"follower from seq {after}"


async def test_a_slow_follower_drops_its_live_buffer_and_rereads_the_store(
    store: Store, client: redis.asyncio.Redis
) -> None:
    run = new_run(store)
    follower = RunFollower(store, client, run.id, buffer_size=8, poll_seconds=0.5)
    seen: list[tuple[int, dict[str, Any]]] = []

    async def consume() -> None:
        seen.extend(await follow_all(follower, delay=0.002))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(consume)
        await wait_until_subscribed(client, run.id)  # then the producer outruns the consumer
        for start in range(0, 300, 10):
            batch = [{"type": "output", "line": str(start + i)} for i in range(10)]
            await persist_and_publish(store, client, run.id, batch)
        await persist_and_publish(store, client, run.id, [FINISHED])
    assert follower.overflows >= 1
    assert seen == store.events_after(run.id, 0, limit=10_000)


async def test_events_that_were_never_published_are_found_in_the_store(
    store: Store, client: redis.asyncio.Redis
) -> None:
    run = new_run(store)
    store.append_events(run.id, [{"type": "a"}])
    follower = RunFollower(store, client, run.id, poll_seconds=0.05)

    async def write_silently() -> None:
        with anyio.fail_after(HANG_GUARD_SECONDS):
            while follower.store_reads == 0:  # past its replay: only the poll can find these
                await anyio.sleep(POLL_SECONDS)
        store.append_events(run.id, [{"type": "b"}, FINISHED])  # as if Redis lost them

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(write_silently)
        seen = await follow_all(follower)
    assert seen == [(1, {"type": "a"}), (2, {"type": "b"}), (3, FINISHED)]


async def test_a_finished_run_is_replayed_and_the_stream_ends(
    store: Store, client: redis.asyncio.Redis
) -> None:
    run = new_run(store)
    store.append_events(run.id, [{"type": "a"}, FINISHED])
    store.finish_run(run.id, "completed", "done")
    assert await follow_all(RunFollower(store, client, run.id, 1)) == [(2, FINISHED)]
    assert await follow_all(RunFollower(store, client, run.id, 2)) == []


async def test_an_unknown_run_ends_at_once(store: Store, client: redis.asyncio.Redis) -> None:
    assert await follow_all(RunFollower(store, client, "missing")) == []


async def test_entering_returns_once_redis_has_the_subscription(
    store: Store, client: redis.asyncio.Redis, runs_redis_url: str
) -> None:
    # Over a slow link SUBSCRIBE reaches Redis late. Subscribe-then-replay is exact only if
    # entering waits for Redis's confirmation; otherwise this count is still 0.
    run = new_run(store)
    async with slow_link(runs_redis_url, LINK_DELAY_SECONDS) as url:
        slow = redis.asyncio.Redis.from_url(url)
        try:
            with anyio.fail_after(HANG_GUARD_SECONDS):
                async with RunFollower(store, slow, run.id):
                    assert await subscribers(client, run.id) == 1
        finally:
            await slow.aclose()
    with anyio.fail_after(HANG_GUARD_SECONDS):
        while await subscribers(client, run.id) != 0:  # leaving unsubscribes
            await anyio.sleep(POLL_SECONDS)


@contextlib.asynccontextmanager
async def slow_link(url: str, delay: float) -> AsyncIterator[str]:
    """A TCP relay to the Redis at ``url`` that holds every chunk a client sends for ``delay``
    seconds (a slow network, not a wait); yields the URL that goes through it."""
    target = urlsplit(url)
    host, port_there = target.hostname, target.port
    assert host is not None
    assert port_there is not None
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def relay(near: anyio.abc.SocketStream) -> None:
        far = await anyio.connect_tcp(host, port_there)
        async with near, far, anyio.create_task_group() as tasks:
            tasks.start_soon(pump, near, far, delay, tasks.cancel_scope)
            tasks.start_soon(pump, far, near, 0.0, tasks.cancel_scope)

    async with listener, anyio.create_task_group() as tasks:
        tasks.start_soon(listener.serve, relay)
        yield f"redis://127.0.0.1:{port}{target.path}"
        tasks.cancel_scope.cancel()


async def pump(
    source: anyio.abc.SocketStream,
    sink: anyio.abc.SocketStream,
    delay: float,
    done: anyio.CancelScope,
) -> None:
    """Copy ``source`` to ``sink``, each chunk ``delay`` late; either side closing ends both."""
    try:
        async for chunk in source:
            await anyio.sleep(delay)
            await sink.send(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    done.cancel()
