"""A warm pool per template: started sandboxes whose dev server already listens, ready to hand out.

:meth:`WarmPool.run` keeps ``size`` sandboxes per template, refilling in the background after
every :meth:`take` and retrying failures with a growing delay (a missing image must not spin).
It also touches its sandboxes regularly, so the reaper's idle TTL only catches the pool of a
process that died. The pool knows nothing about Docker: it is given functions to provision,
check, touch and discard sandboxes, which keeps it testable without an engine.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

import anyio

from sandbox.errors import SandboxError

log = logging.getLogger(__name__)
S = TypeVar("S")


class WarmPool(Generic[S]):
    """Keeps ``size`` ready sandboxes for each of ``templates``."""

    def __init__(
        self,
        *,
        size: int,
        templates: Sequence[str],
        provision: Callable[[str], Awaitable[S]],
        is_alive: Callable[[S], Awaitable[bool]],
        touch: Callable[[S], Awaitable[None]],
        discard: Callable[[S], Awaitable[None]],
        touch_interval: float,
        retry_delay: float = 2.0,
        max_retry_delay: float = 60.0,
    ) -> None:
        self.size = size
        self.templates = tuple(templates)
        self._provision = provision
        self._is_alive = is_alive
        self._touch = touch
        self._discard = discard
        self._touch_interval = touch_interval
        self._retry_delay = retry_delay
        self._max_retry_delay = max_retry_delay
        self._ready: dict[str, deque[S]] = {name: deque() for name in self.templates}
        self._wakeups: dict[str, anyio.Event] = {name: anyio.Event() for name in self.templates}

    def available(self, template: str) -> int:
        """How many ready sandboxes the pool holds for ``template`` now."""
        return len(self._ready.get(template, ()))

    async def take(self, template: str) -> S | None:
        """A ready sandbox of ``template`` (removed from the pool), or ``None`` if none is."""
        ready = self._ready.get(template)
        while ready:
            sandbox = ready.popleft()
            self._wakeups[template].set()
            if await self._is_alive(sandbox):
                return sandbox
            await self._discard_quietly(sandbox)
        return None

    async def run(self) -> None:
        """Refill every template's pool until cancelled."""
        if self.size <= 0:
            return
        async with anyio.create_task_group() as group:
            for template in self.templates:
                group.start_soon(self._refill_loop, template)

    async def drain(self) -> None:
        """Discard every ready sandbox (on shutdown: unassigned sandboxes are not kept)."""
        for ready in self._ready.values():
            while ready:
                await self._discard_quietly(ready.popleft())

    async def _refill_loop(self, template: str) -> None:
        delay = self._retry_delay
        while True:
            # A fresh event before the length check: a take() from here on wakes the wait below.
            self._wakeups[template] = anyio.Event()
            while len(self._ready[template]) < self.size:
                try:
                    sandbox = await self._provision(template)
                except SandboxError as exc:
                    log.warning(
                        "warm pool %r: provisioning failed, retry in %gs: %s", template, delay, exc
                    )
                    await anyio.sleep(delay)
                    delay = min(delay * 2, self._max_retry_delay)
                    continue
                delay = self._retry_delay
                self._ready[template].append(sandbox)
            await self._touch_all(template)
            with anyio.move_on_after(self._touch_interval):
                await self._wakeups[template].wait()

    async def _touch_all(self, template: str) -> None:
        for sandbox in list(self._ready[template]):
            try:
                await self._touch(sandbox)
            except SandboxError as exc:
                log.warning("warm pool %r: touch failed: %s", template, exc)

    async def _discard_quietly(self, sandbox: S) -> None:
        try:
            await self._discard(sandbox)
        except SandboxError as exc:
            log.warning("warm pool: discarding a sandbox failed: %s", exc)
