"""A sample of the parser's hostile corpus driven through a real sandbox: no crash, no write
outside the workspace, every written path a normalized workspace path."""

from __future__ import annotations

import posixpath
from collections.abc import AsyncIterator

import pytest
import redis.asyncio

from parser.events import Command, Event, InstallContent, UrlScrape, WebSearch
from parser.stream import StreamParser
from sandbox.docker_boundary import call
from sandbox.images.templates import get_template
from sandbox.lifecycle.manager import Sandbox, SandboxManager
from sandbox.session import SandboxSession, manager_ports
from sandbox.session_log import Record
from sandbox.writes.write_buffer import WriteBuffer
from tests.parser.corpus import hostile_streams

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.redis]
SEED, SAMPLE = 20261124, 25
# Installs, commands and web tools have their own tests; here only what writes files.
SKIPPED = (InstallContent, Command, WebSearch, UrlScrape)


@pytest.fixture
async def sandbox(manager: SandboxManager) -> AsyncIterator[Sandbox]:
    acquired = await manager.acquire("chat-hostile", "owner-1", "vanilla")
    try:
        yield acquired
    finally:
        await manager.destroy(acquired.id)


def events_of(text: str) -> list[Event]:
    """Every event of one hostile stream, in two halves (a split mid-stream, as streams come)."""
    parser = StreamParser()
    middle = len(text) // 2
    return [*parser.feed(text[:middle]), *parser.feed(text[middle:]), *parser.close()]


async def drive(manager: SandboxManager, client: redis.asyncio.Redis, sandbox: Sandbox) -> None:
    records: list[tuple[str, Record]] = []

    async def keep(kind: str, record: Record) -> None:
        records.append((kind, record))

    for index, (text, _markers) in enumerate(hostile_streams(SEED, SAMPLE)):
        buffer = WriteBuffer(client, f"{sandbox.id}-h{index}", ttl_seconds=600)
        ports = manager_ports(manager, sandbox.id)
        template = get_template("vanilla")
        async with SandboxSession(
            buffer, template, ports, debounce=0.01, max_wait=0.05, on_record=keep
        ) as session:
            for event in events_of(text):
                if not isinstance(event, SKIPPED):
                    await session.handle(event)
            await session.finish()
        await buffer.discard()


def _npm_or_tmp(path: str) -> bool:
    """npm's own cache and logs (the sandbox's, by design) and temporary files."""
    return path in ("/home", "/home/node") or path.startswith(("/tmp", "/home/node/.npm"))


async def test_hostile_streams_write_only_normalized_workspace_paths(
    manager: SandboxManager, sandbox: Sandbox, client: redis.asyncio.Redis
) -> None:
    container = await call(manager.client.containers.get, sandbox.container_id)
    before = {change["Path"] for change in await call(container.diff) or []}
    await drive(manager, client, sandbox)
    after = {change["Path"] for change in await call(container.diff) or []}
    outside = sorted(path for path in after - before if not _npm_or_tmp(path))
    assert outside == [], f"writes outside the workspace: {outside}"
    files = await manager.list_files(sandbox.id)
    assert files, "the sample wrote no file at all: it tests nothing"
    for item in files:
        path = item.path
        assert path == posixpath.normpath(path), path
        assert not path.startswith(("/", "..")), path
        assert "\x00" not in path, path
