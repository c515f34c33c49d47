"""A session on one of the manager's sandboxes, wired once for every caller (a run's workspace,
``kiln sandbox apply``): its write buffer on the manager's Redis, kept a little longer than the
sandbox's idle TTL, its flush timing from the manager's settings, its ports served by the
manager.

    async with manager_session(manager, sandbox.id, template, on_record=sink) as session:
        await session.handle(event)
        log = await session.finish()
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis.asyncio

from sandbox.images.templates import Template
from sandbox.lifecycle.manager import SandboxManager
from sandbox.session import SandboxSession, manager_ports
from sandbox.session_log import RecordSink
from sandbox.writes.write_buffer import WriteBuffer

# Write-buffer keys outlive the sandbox's idle TTL by this much: a flush that retries after the
# sandbox went idle still finds what it was writing.
BUFFER_TTL_GRACE_SECONDS = 600.0


@asynccontextmanager
async def manager_session(
    manager: SandboxManager,
    sandbox_id: str,
    template: Template,
    *,
    on_record: RecordSink,
    build_ahead: bool = False,
) -> AsyncIterator[SandboxSession]:
    """An entered :class:`SandboxSession` on ``sandbox_id`` (see the module docstring); its
    Redis client is closed after the session is."""
    settings = manager.settings
    client = redis.asyncio.Redis.from_url(settings.redis_url)
    try:
        ttl = settings.idle_ttl_seconds + BUFFER_TTL_GRACE_SECONDS
        session = SandboxSession(
            WriteBuffer(client, sandbox_id, ttl),
            template,
            manager_ports(manager, sandbox_id),
            debounce=settings.flush_debounce_seconds,
            max_wait=settings.flush_max_wait_seconds,
            on_record=on_record,
            build_ahead=build_ahead,
        )
        async with session:
            yield session
    finally:
        await client.aclose()
