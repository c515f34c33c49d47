"""The per-sandbox preview error streams in a real Redis: capped, expiring, followed."""

from __future__ import annotations

import uuid

import anyio
import pytest
import redis.asyncio

from sandbox.env_settings import EnvReader
from sandbox.errors import RedisUnavailable, SandboxConfigError
from sandbox.preview.error_reports import PreviewError, SourceLocation
from sandbox.preview.error_stream import (
    ErrorStreamSettings,
    PreviewErrorStream,
    errors_key,
    valid_stream_id,
)

pytestmark = pytest.mark.anyio
DEADLINE_SECONDS = 10.0


def error(n: int) -> PreviewError:
    return PreviewError("uncaught", f"boom {n}", "", SourceLocation("src/App.jsx", n + 1, 1), "u")


def sandbox() -> str:
    return f"s{uuid.uuid4().hex[:10]}"


async def test_append_then_read_after(client: redis.asyncio.Redis) -> None:
    stream, sid = PreviewErrorStream(client), sandbox()
    ids = await stream.append(sid, [error(0), error(1), error(2)])
    assert len(ids) == 3
    everything = await stream.read(sid)
    assert [e for _, e in everything] == [error(n).to_dict() for n in range(3)]
    assert [i for i, _ in await stream.read(sid, ids[0])] == ids[1:]
    assert await stream.read(sandbox()) == []  # another sandbox's stream is its own


async def test_capped_and_expiring(client: redis.asyncio.Redis) -> None:
    stream = PreviewErrorStream(client, ErrorStreamSettings(max_len=10, ttl_seconds=60))
    sid = sandbox()
    for start in range(0, 1000, 100):
        await stream.append(sid, [error(n) for n in range(start, start + 100)])
    # MAXLEN ~ trims whole nodes (Redis's stream-node-max-entries, 100): bounded, not exact.
    assert 10 <= await client.xlen(errors_key(sid)) <= 10 + 100
    assert 0 < await client.ttl(errors_key(sid)) <= 60
    newest = (await stream.read(sid, count=1000))[-1][1]
    assert newest["message"] == "boom 999"


async def test_follow_replays_then_waits_for_new_ones(client: redis.asyncio.Redis) -> None:
    stream, sid = PreviewErrorStream(client, poll_seconds=0.02), sandbox()
    first = await stream.append(sid, [error(0)])
    seen: list[str] = []

    async def follow() -> None:
        async for _stream_id, found in stream.follow(sid):
            seen.append(found["message"])
            if len(seen) == 2:
                return

    with anyio.fail_after(DEADLINE_SECONDS):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(follow)
            await stream.append(sid, [error(1)])
    assert seen == ["boom 0", "boom 1"]
    assert first[0] < (await stream.read(sid))[-1][0]


async def test_an_unreachable_redis_is_redis_unavailable() -> None:
    client = redis.asyncio.Redis.from_url("redis://127.0.0.1:1", socket_connect_timeout=1)
    try:
        with pytest.raises(RedisUnavailable, match="storing preview errors"):
            await PreviewErrorStream(client).append("abc", [error(0)])
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param("1-", id="half"),
        pytest.param("$", id="dollar"),
        pytest.param("1-0 ", id="blank"),
    ],
)
def test_stream_ids_are_checked(value: str) -> None:
    with pytest.raises(ValueError, match="not a preview error id"):
        valid_stream_id(value)


def test_settings_from_the_environment() -> None:
    env = {"KILN_PREVIEW_ERRORS_KEPT": "50", "KILN_PREVIEW_ERRORS_PER_SECOND": "2.5"}
    settings = ErrorStreamSettings.from_env(EnvReader(env))
    assert (settings.max_len, settings.per_second) == (50, 2.5)
    with pytest.raises(SandboxConfigError, match="KILN_PREVIEW_ERRORS_KEPT"):
        ErrorStreamSettings.from_env(EnvReader({"KILN_PREVIEW_ERRORS_KEPT": "5"}))
