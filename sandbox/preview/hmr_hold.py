"""Holding a preview's hot updates while a run writes files: no error overlay mid-answer.

Files land whole (``.kiln/staging``), but a whole file may import one not written yet or a
package whose install is still running, and Vite pushes that error over its HMR WebSocket into
the preview frame. So while a run writes, the preview proxy drops the dev server's messages to
the browser, and once the state is complete it sends one ``{"type":"full-reload"}``.

The state lives in a per-sandbox Redis key (:func:`hold_key`), set by the worker with a TTL (a
crashed worker cannot hold a preview for good; every file refreshes it) and deleted at the first
complete state, on cancel and on failure. The worker and the proxy may be separate processes;
the flag holds the state and the proxy only polls it, so a missed wake-up costs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import anyio
import redis.asyncio

from sandbox.errors import SandboxUnavailable
from sandbox.redis_boundary import wrap_redis_errors

HOLD_TTL_SECONDS = 120
POLL_SECONDS = 0.25
FULL_RELOAD = json.dumps({"type": "full-reload", "path": "*"})


def hold_key(sandbox_id: str) -> str:
    """The Redis key whose presence holds ``sandbox_id``'s hot updates."""
    return f"kiln:preview-hold:{sandbox_id}"


async def hold_preview(
    client: redis.asyncio.Redis, sandbox_id: str, ttl: int = HOLD_TTL_SECONDS
) -> None:
    """Hold the preview's hot updates for ``ttl`` seconds (again from now if already held)."""
    with wrap_redis_errors(f"holding the preview of {sandbox_id!r}"):
        await client.set(hold_key(sandbox_id), "1", ex=ttl)


async def release_preview(client: redis.asyncio.Redis, sandbox_id: str) -> bool:
    """Release the hold; whether there was one (its watchers reload the frame)."""
    with wrap_redis_errors(f"releasing the preview of {sandbox_id!r}"):
        return bool(await client.delete(hold_key(sandbox_id)))


async def preview_held(client: redis.asyncio.Redis, sandbox_id: str) -> bool:
    """Whether the preview's hot updates are held now."""
    with wrap_redis_errors(f"reading the hold of the preview of {sandbox_id!r}"):
        return bool(await client.exists(hold_key(sandbox_id)))


class HmrHold:
    """One browser WebSocket's view of the hold: :attr:`held` gates the dev server's messages,
    :meth:`watch` follows the flag and reloads the page when it clears."""

    def __init__(
        self, read: Callable[[], Awaitable[bool]], poll_seconds: float = POLL_SECONDS
    ) -> None:
        """``read`` says whether the flag is set now (e.g. :func:`preview_held`)."""
        self._read = read
        self._poll = poll_seconds
        self.held = False

    async def refresh(self) -> bool:
        """Read the flag; whether it was just released (held before, not now).

        A flag that cannot be read counts as released: an outage must not freeze a preview.
        """
        was = self.held
        try:
            self.held = await self._read()
        except SandboxUnavailable:  # Redis away: fail open, as if there were no hold
            self.held = False
        return was and not self.held

    async def watch(self, reload: Callable[[str], Awaitable[None]]) -> None:
        """Poll the flag for ever; each release sends one full reload through ``reload``."""
        while True:
            if await self.refresh():
                await reload(FULL_RELOAD)
            await anyio.sleep(self._poll)


def redis_hold(client: redis.asyncio.Redis) -> Callable[[str], HmrHold]:
    """The proxy's factory: one :class:`HmrHold` per WebSocket of a sandbox, read from Redis."""

    def for_sandbox(sandbox_id: str) -> HmrHold:
        return HmrHold(lambda: preview_held(client, sandbox_id))

    return for_sandbox
