"""Riding out a short Docker outage: retry an idempotent step that found the engine away.

A Docker engine restarting (or its socket cut for a few seconds) used to cost the run whatever
step met it: an install that could not reach its container was dropped with a recoverable error, the
run went on without the package, and its build failed for good. A step that is safe to repeat
(starting the npm proxy and running ``npm install``) is therefore retried while the engine is away,
backing off (0.5 s doubling to 5 s: never a busy loop) for at most ``limit`` seconds; then the
``DockerUnavailable`` stands and the caller reports it as before.

Only ``DockerUnavailable`` is retried: a refusal (capacity, a full disk, a missing image) does
not go away by waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from sandbox.errors import DockerUnavailable

T = TypeVar("T")
log = logging.getLogger(__name__)
RIDE_OUT_SECONDS = 60.0
FIRST_DELAY_SECONDS = 0.5
MAX_DELAY_SECONDS = 5.0


async def ride_out(
    step: Callable[[], Awaitable[T]], what: str, *, limit: float = RIDE_OUT_SECONDS
) -> T:
    """``await step()``, again while it raises ``DockerUnavailable``, for up to ``limit`` s."""
    deadline = anyio.current_time() + limit
    delay = FIRST_DELAY_SECONDS
    while True:
        try:
            return await step()
        except DockerUnavailable as exc:
            if anyio.current_time() + delay > deadline:
                raise
            log.warning("%s: Docker is away (%s); trying again in %.1f s", what, exc, delay)
            await anyio.sleep(delay)
            delay = min(delay * 2, MAX_DELAY_SECONDS)
