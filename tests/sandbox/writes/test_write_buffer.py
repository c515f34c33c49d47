"""The Redis write buffer against a real (private) redis-server."""

from __future__ import annotations

import uuid

import anyio
import pytest
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from sandbox.errors import SandboxUnavailable
from sandbox.writes.write_buffer import WriteBuffer, discard_sandbox_writes, utf8

pytestmark = pytest.mark.anyio


async def _exec_calls(client: redis.asyncio.Redis) -> int:
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_exec", {}).get("calls", 0))


async def _sandbox_keys(buffer: WriteBuffer) -> list[bytes]:
    return [key async for key in buffer.client.scan_iter(match=buffer.keys.pattern())]


async def test_chunks_append_to_the_whole_content(buffer: WriteBuffer) -> None:
    await buffer.start_file("src/a.js")
    for chunk in ["const ", "s = 'é", "€𝄞';", "\n"]:
        await buffer.append("src/a.js", chunk)
    assert await buffer.read("src/a.js") == "const s = 'é€𝄞';\n".encode()
    assert [f.path for f in await buffer.dirty_files()] == ["src/a.js"]


async def test_each_write_is_one_transaction(buffer: WriteBuffer) -> None:
    await buffer.start_file("a.txt")
    before = await _exec_calls(buffer.client)
    for chunk in "abcdefghij":
        await buffer.append("a.txt", chunk)
    assert await _exec_calls(buffer.client) - before == 10


async def test_start_file_resets_the_content(buffer: WriteBuffer) -> None:
    await buffer.start_file("a.txt")
    await buffer.append("a.txt", "old")
    await buffer.start_file("a.txt")
    await buffer.append("a.txt", "new")
    assert await buffer.read("a.txt") == b"new"


async def test_held_files_are_neither_dirty_nor_part_of_the_run(buffer: WriteBuffer) -> None:
    await buffer.start_file("package.json", publish=False)
    await buffer.append("package.json", "{}", publish=False)
    assert await buffer.read("package.json") == b"{}"
    assert await buffer.dirty_files() == []
    assert await buffer.all_files() == []
    await buffer.forget("package.json")
    assert await buffer.read("package.json") is None


async def test_a_write_during_a_flush_keeps_its_dirty_mark(buffer: WriteBuffer) -> None:
    await buffer.start_file("a.txt")
    await buffer.start_file("b.txt")
    snapshot = await buffer.dirty_files()
    await buffer.append("b.txt", "late")  # arrives after the flush read its snapshot
    assert await buffer.clear_flushed(snapshot, "container-1") == 1
    dirty = await buffer.dirty_files()
    assert [(f.path, f.content) for f in dirty] == [("b.txt", b"late")]
    assert await buffer.last_container() == "container-1"
    assert sorted(f.path for f in await buffer.all_files()) == ["a.txt", "b.txt"]


async def test_every_key_has_a_ttl_and_discard_removes_them(buffer: WriteBuffer) -> None:
    await buffer.start_file("src/x[1]*.js")
    await buffer.append("src/x[1]*.js", "x")
    await buffer.clear_flushed(await buffer.dirty_files(), "c")
    await buffer.append("src/x[1]*.js", "y")  # dirty again, so the dirty set exists too
    keys = await _sandbox_keys(buffer)
    assert len(keys) == 5  # content, versions, dirty, files, container
    for key in keys:
        assert 0 < await buffer.client.pttl(key) <= 600_000, key
    assert await discard_sandbox_writes(buffer.client, buffer.sandbox_id) == 5
    assert await _sandbox_keys(buffer) == []


async def test_keys_expire_once_the_sandbox_is_gone(client: redis.asyncio.Redis) -> None:
    buffer = WriteBuffer(client, f"wb-{uuid.uuid4().hex[:10]}", ttl_seconds=0.2)
    await buffer.start_file("a.txt")
    await buffer.append("a.txt", "content")
    assert await _sandbox_keys(buffer) != []
    with anyio.fail_after(20):  # a bound against hanging, not a speed assertion
        while await _sandbox_keys(buffer):
            await anyio.sleep(0.1)


async def test_unreachable_redis_is_sandbox_unavailable() -> None:
    no_retry = Retry(NoBackoff(), retries=0)
    client = redis.asyncio.Redis(host="127.0.0.1", port=1, socket_connect_timeout=1, retry=no_retry)
    try:
        with pytest.raises(SandboxUnavailable, match="wb-down"):
            await WriteBuffer(client, "wb-down", ttl_seconds=60).append("a.txt", "x")
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("plain é 名", "plain é 名".encode(), id="valid"),
        pytest.param("a\ud800b", "a\ufffdb".encode(), id="lone-high-surrogate"),
        pytest.param("\udfff", "\ufffd".encode(), id="lone-low-surrogate"),
    ],
)
def test_file_text_is_utf8_with_lone_surrogates_replaced(text: str, expected: bytes) -> None:
    """A JSON escape in a model's stream can hold a lone surrogate; it never fails a write."""
    assert utf8(text) == expected
