"""Riding out a short Docker outage: retry an idempotent step that found the engine away.

A Docker engine restarting (or its socket cut for a few seconds) used to cost the run whatever
step met it: an install that could not reach its container was dropped with a recoverable error, the
run went on without the package, and its build failed for good. A step that is safe to repeat
(starting the npm proxy and running ``npm install``) is therefore retried while the engine is away,
backing off (0.5 s doubling to 5 s: never a busy loop) for at most ``limit`` seconds; then the
``DockerUnavailable`` stands and the caller reports it as before.

Only ``DockerUnavailable`` is retried: a refusal (capacity, a full disk, a missing image) does
not go away by waiting.

A run that starts while the engine is away is another matter: it has nothing to save yet, and
its user waits. :class:`EngineWatch` lets every acquire of a process share what the last one
found, so that while Docker is known away new runs fail at once (``docker_unavailable``, in
words) and the first acquire after a short recheck interval finds out whether it is back.
It asks through the backend's ``ping`` (on Docker,
:class:`~sandbox.backends.engine_probe.EngineProbe`: a client of its own with a short timeout).
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


RECHECK_SECONDS = 5.0


class EngineWatch:
    """Whether the Docker engine is known to be away, shared by every acquire of a process.

    The first acquire that finds the engine silent (a short ping, :meth:`check`) marks it down;
    for :data:`RECHECK_SECONDS` after that, every new acquire fails at once instead of waiting
    for its own ping, and the next one after that pings again: recovery is noticed by the first
    acquire (or ``/healthz``) after the engine answers, without a restart."""

    def __init__(
        self, ping: Callable[[], Awaitable[None]], *, recheck: float = RECHECK_SECONDS
    ) -> None:
        """Watch the engine that ``ping`` asks (it raises ``DockerUnavailable`` when away)."""
        self._ping = ping
        self._recheck = recheck
        self._down: DockerUnavailable | None = None
        self._down_at = 0.0

    @property
    def down(self) -> bool:
        """Whether the last word on the engine was that it is away."""
        return self._down is not None

    def mark_down(self, exc: DockerUnavailable) -> None:
        """Record that the engine did not answer (``exc`` says how)."""
        if self._down is None:
            log.warning("Docker engine is away: %s", exc)
        self._down, self._down_at = exc, anyio.current_time()

    def mark_up(self) -> None:
        """Record that the engine answered."""
        if self._down is not None:
            log.info("Docker engine answers again")
        self._down = None

    async def check(self) -> None:
        """Raise ``DockerUnavailable`` at once while the engine is known away (checked within
        the last :data:`RECHECK_SECONDS`), else ping it and record the answer."""
        if self._down is not None and anyio.current_time() - self._down_at < self._recheck:
            raise DockerUnavailable(f"docker: engine known away: {self._down}")
        try:
            await self._ping()
        except DockerUnavailable as exc:
            self.mark_down(exc)
            raise
        self.mark_up()
