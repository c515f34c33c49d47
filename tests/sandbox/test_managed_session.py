"""A session on one of the manager's sandboxes, as a run's workspace and ``kiln sandbox apply``
open it: files streamed through it land in the real container, its records reach the sink, and
its buffer keys outlive the sandbox's idle TTL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from parser.events import FileContent, FileEnd, FileStart
from sandbox.images.templates import get_template
from sandbox.lifecycle.manager import Sandbox, SandboxManager
from sandbox.managed_session import BUFFER_TTL_GRACE_SECONDS, manager_session
from sandbox.session_log import Record

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.redis]


@pytest.fixture
async def sandbox(manager: SandboxManager) -> AsyncIterator[Sandbox]:
    acquired = await manager.acquire("chat-manager-session", "owner-1", "vanilla")
    try:
        yield acquired
    finally:
        await manager.destroy(acquired.id)


async def test_a_file_streamed_through_the_session_lands_in_the_sandbox(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    records: list[tuple[str, Record]] = []

    async def keep(kind: str, record: Record) -> None:
        records.append((kind, record))

    template = get_template("vanilla")
    async with manager_session(manager, sandbox.id, template, on_record=keep) as session:
        expected_ttl = manager.settings.idle_ttl_seconds + BUFFER_TTL_GRACE_SECONDS
        assert session.buffer.ttl_ms == int(expected_ttl * 1000)
        for event in (
            FileStart("src/hello.js"),
            FileContent("src/hello.js", "hi"),
            FileEnd("src/hello.js"),
        ):
            await session.handle(event)
        log = await session.finish()
    assert await manager.read_file(sandbox.id, "src/hello.js") == "hi"
    assert log.errors == []
    assert ("file", {"path": "src/hello.js"}) in records
