"""The embedded Redis: starts on a private socket, comes back when killed, stops with kiln."""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

import anyio
import pytest
import redis
import redis.asyncio

from app.errors import ConfigError
from app.service.embedded_redis import EmbeddedRedis, recorded_url

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


def answers(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.exceptions.ConnectionError:
        return False
    finally:
        client.close()


async def test_it_serves_on_a_private_socket_and_stops_on_exit(tmp_path: Path) -> None:
    async with EmbeddedRedis(tmp_path) as embedded:
        assert answers(embedded.url)
        assert recorded_url(tmp_path) == embedded.url
        mode = stat.S_IMODE(embedded.socket_path.stat().st_mode)
        client = redis.asyncio.Redis.from_url(embedded.url)
        await client.set("kept", "yes")
        await client.aclose()
    assert mode == 0o700
    assert not answers(embedded.url)
    files = [tmp_path / "redis", *(tmp_path / "redis").rglob("*")]
    shared = [str(path) for path in files if path.stat().st_mode & 0o077]
    assert shared == []  # its folder, append-only files, log and URL file: kiln's user's only
    async with EmbeddedRedis(tmp_path) as again:  # the data survives a restart (append-only)
        client = redis.asyncio.Redis.from_url(again.url)
        assert await client.get("kept") == b"yes"
        await client.aclose()


async def test_a_killed_server_is_restarted(tmp_path: Path) -> None:
    async with EmbeddedRedis(tmp_path) as embedded, anyio.create_task_group() as tasks:
        tasks.start_soon(embedded.supervise)
        process = embedded._process
        assert process is not None
        os.kill(process.pid, signal.SIGKILL)
        with anyio.fail_after(20):
            while embedded.restarts == 0 or not answers(embedded.url):
                await anyio.sleep(0.1)
        tasks.cancel_scope.cancel()
    assert embedded.restarts == 1


async def test_a_leftover_server_is_shut_down_first(tmp_path: Path) -> None:
    first = EmbeddedRedis(tmp_path)
    await first.__aenter__()
    leftover = first._process
    assert leftover is not None
    async with EmbeddedRedis(tmp_path) as second:
        with anyio.fail_after(10):
            await leftover.wait()  # asked to shut down by the second one
        assert answers(second.url)
    await first.__aexit__(None, None, None)


def test_a_deep_data_dir_gets_its_socket_elsewhere(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    embedded = EmbeddedRedis(deep)
    assert len(str(embedded.socket_path)) < 100
    assert not embedded.socket_path.is_relative_to(deep)


def test_a_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", str(tmp_path))
        with pytest.raises(ConfigError, match="redis-server is not installed"):
            EmbeddedRedis(tmp_path)
