"""One pub/sub connection per process: fan-out to every follower, subscriptions shared."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator

import anyio
import pytest
import redis.asyncio

from app.runs.events import events_channel, persist_and_publish
from app.runs.follow import RunFollower
from app.runs.live import LiveEvents
from app.store import Store
from tests.runs.conftest import new_chat

pytestmark = pytest.mark.anyio


@pytest.fixture
async def live(client: redis.asyncio.Redis) -> AsyncIterator[LiveEvents]:
    hub = LiveEvents(client)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(hub.run)
        yield hub
        tasks.cancel_scope.cancel()


def keep(into: list[str], data: bytes | str) -> None:
    into.append(str(data))


async def pubsub_connections(client: redis.asyncio.Redis) -> int:
    """Clients of the server in pub/sub mode."""
    listed = await client.client_list(_type="pubsub")
    return len(listed)


async def test_many_subscribers_share_one_connection_and_each_hears_every_message(
    live: LiveEvents, client: redis.asyncio.Redis
) -> None:
    before = await pubsub_connections(client)
    heard: dict[int, list[str]] = {i: [] for i in range(50)}
    channels = [f"kiln:test-live:{i % 5}" for i in range(50)]
    for i, channel in enumerate(channels):
        assert await live.subscribe(channel, functools.partial(keep, heard[i]))
    assert await pubsub_connections(client) - before == 1
    for n in range(5):
        await client.publish(f"kiln:test-live:{n}", f"m{n}")
    with anyio.fail_after(10):
        while any(not messages for messages in heard.values()):
            await anyio.sleep(0.02)
    assert all(heard[i] == [f"b'm{i % 5}'"] for i in range(50))


async def test_the_last_subscriber_to_leave_unsubscribes_the_channel(
    live: LiveEvents, client: redis.asyncio.Redis
) -> None:
    channel = "kiln:test-live:leave"

    def first(data: bytes | str) -> None: ...
    def second(data: bytes | str) -> None: ...

    await live.subscribe(channel, first)
    await live.subscribe(channel, second)
    await live.unsubscribe(channel, first)
    assert (await client.pubsub_numsub(channel))[0][1] == 1
    await live.unsubscribe(channel, second)
    with anyio.fail_after(10):
        while (await client.pubsub_numsub(channel))[0][1] != 0:
            await anyio.sleep(0.02)
    assert channel not in live.channels


async def test_followers_of_one_process_share_its_connection(
    live: LiveEvents, client: redis.asyncio.Redis, store: Store
) -> None:
    user, chat = new_chat(store)
    run = store.create_run(chat.id, user.id, None, None, None)
    before = await pubsub_connections(client)
    followers = [RunFollower(store, client, run.id, live=live) for _ in range(20)]
    async with anyio.create_task_group() as tasks:
        seen: list[list[str]] = []

        async def follow(follower: RunFollower) -> None:
            async with follower as events:
                kinds = [event["type"] async for _seq, event in events]
            seen.append(kinds)

        for follower in followers:
            tasks.start_soon(follow, follower)
        with anyio.fail_after(10):
            while (await client.pubsub_numsub(events_channel(run.id)))[0][1] != 1:
                await anyio.sleep(0.02)
        assert await pubsub_connections(client) - before == 1
        await persist_and_publish(store, client, run.id, [{"type": "run_started"}])
        finished = {"type": "run_finished", "status": "completed", "stop_reason": "done"}
        await persist_and_publish(store, client, run.id, [finished])
    assert seen == [["run_started", "run_finished"]] * 20
    assert json.dumps(sorted(live.channels)) == "[]"
