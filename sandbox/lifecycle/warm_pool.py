"""A warm pool per template: started sandboxes whose dev server already listens, ready to hand out.

:meth:`WarmPool.run` keeps each template's pool at a target that follows recent demand
(:mod:`sandbox.lifecycle.pool_sizing`: the acquires of the last ``window`` seconds, clamped to
``[minimum, maximum]``, never past the host's free slots). After every :meth:`take`, and at least
every ``touch_interval`` seconds, a template's target is decided again: the pool refills in the
background, one sandbox at a time per template and at most ``refills`` at once in all (a burst
must not start many containers at once on a small host), and a surplus is given up oldest first.
Failures are retried with a growing delay (a missing image must not spin). A refill waits until
``refill_pause`` seconds have passed since the last take, and longer while ``busy()`` says an
install is running (at most ``longest_pause`` after the take): the sandbox just handed out is
being restored (files, ``npm install``, Vite pre-bundling) and a container starting beside it
on a small host slows that restore, which a person is waiting for, while nobody waits for the
refill (kiln issue 24). The pool also touches
its sandboxes regularly, so the reaper's idle TTL only catches the pool of a process that died.

The pool knows nothing about Docker: it is given functions to provision, check, touch and discard
sandboxes and to count the host's free slots, which keeps it testable without an engine; every
decision is also handed to ``on_target`` (the manager publishes it for ``kiln doctor``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

import anyio

from sandbox.errors import SandboxError
from sandbox.lifecycle.pool_sizing import PoolFacts, PoolTarget, pool_target, recent_count

log = logging.getLogger(__name__)
S = TypeVar("S")
UNLIMITED = 1_000_000  # the free slots of a pool told nothing about the host's capacity
BUSY_POLL_SECONDS = 0.25  # how often a paused refill asks whether the installs are done


async def _unlimited() -> int:
    return UNLIMITED


class WarmPool(Generic[S]):
    """Keeps ready sandboxes for each of ``templates``, as many as recent demand asks for."""

    def __init__(
        self,
        *,
        bounds: tuple[int, int],
        templates: Sequence[str],
        provision: Callable[[str], Awaitable[S]],
        is_alive: Callable[[S], Awaitable[bool]],
        touch: Callable[[S], Awaitable[None]],
        discard: Callable[[S], Awaitable[None]],
        touch_interval: float,
        free_slots: Callable[[], Awaitable[int]] = _unlimited,
        window: float = 600.0,
        refills: int = 1,
        clock: Callable[[], float] = time.monotonic,
        on_target: Callable[[str, int, PoolTarget], Awaitable[None]] | None = None,
        retry_delay: float = 2.0,
        max_retry_delay: float = 60.0,
        refill_pause: float = 0.0,
        longest_pause: float = 0.0,
        busy: Callable[[], bool] = lambda: False,
    ) -> None:
        self.minimum, self.maximum = bounds
        self.templates = tuple(templates)
        self.window = window
        self._provision, self._is_alive = provision, is_alive
        self._touch, self._discard = touch, discard
        self._free_slots = free_slots
        self._refills = refills
        self._clock = clock
        self._on_target = on_target  # told every decision (template, ready, target): a report
        self._touch_interval = touch_interval
        self._retry_delay, self._max_retry_delay = retry_delay, max_retry_delay
        self._refill_pause, self._longest_pause, self._busy = refill_pause, longest_pause, busy
        # The event loop's time at the last take, any template (not ``clock``, which decides
        # demand and which tests hold still).
        self._taken_at: float | None = None
        self._ready: dict[str, deque[S]] = {name: deque() for name in self.templates}
        self._demand: dict[str, list[float]] = {name: [] for name in self.templates}
        self._wakeups: dict[str, anyio.Event] = {name: anyio.Event() for name in self.templates}
        self.targets: dict[str, PoolTarget] = {}  # the last target of each template, and why

    def available(self, template: str) -> int:
        """How many ready sandboxes the pool holds for ``template`` now."""
        return len(self._ready.get(template, ()))

    def status(self) -> dict[str, tuple[int, PoolTarget | None]]:
        """Each template's ready sandboxes and its last target (``None`` before the first)."""
        return {name: (self.available(name), self.targets.get(name)) for name in self.templates}

    async def take(self, template: str, *, demand: bool = True) -> S | None:
        """A ready sandbox of ``template`` (removed from the pool), or ``None`` if none is.

        ``demand``: an acquire wants it (counted for the pool's size); ``False`` for a warm
        sandbox given up to make room on a full host."""
        ready = self._ready.get(template)
        if ready is None:
            return None
        if demand:
            self._demand[template].append(self._clock())
            self._taken_at = anyio.current_time()
        self._wakeups[template].set()
        while ready:
            sandbox = ready.popleft()  # the oldest; popped before any await: no one else gets it
            if await self._is_alive(sandbox):
                return sandbox
            await self._discard_quietly(sandbox)
        return None

    def wake(self) -> None:
        """Decide every template's target again now (not at the next touch interval)."""
        for event in self._wakeups.values():
            event.set()

    async def run(self) -> None:
        """Size and refill every template's pool until cancelled."""
        if self.maximum <= 0:
            return
        limiter = anyio.CapacityLimiter(max(self._refills, 1))
        async with anyio.create_task_group() as group:
            for template in self.templates:
                group.start_soon(self._refill_loop, template, limiter)

    async def drain(self) -> None:
        """Discard every ready sandbox (on shutdown: unassigned sandboxes are not kept)."""
        for ready in self._ready.values():
            while ready:
                await self._discard_quietly(ready.popleft())

    async def target(self, template: str) -> PoolTarget:
        """Decide ``template``'s target now (from its demand and the host's free slots)."""
        try:
            free = await self._free_slots()
        except SandboxError as exc:  # Redis away: grow nothing until it is back
            log.warning("warm pool %r: free slots unknown: %s", template, exc)
            free = 0
        facts = PoolFacts(
            recent=recent_count(self._demand[template], self._clock(), self.window),
            window=self.window,
            minimum=self.minimum,
            maximum=self.maximum,
            ready=self.available(template),
            free=free,
        )
        decided = pool_target(facts)
        if decided != self.targets.get(template):
            log.info("warm pool %r: target %d (%s)", template, decided.size, decided.why)
        self.targets[template] = decided
        await self._report(template, decided)
        return decided

    async def _report(self, template: str, decided: PoolTarget) -> None:
        if self._on_target is None:
            return
        try:
            await self._on_target(template, self.available(template), decided)
        except SandboxError as exc:  # a report is no reason to stop sizing the pool
            log.warning("warm pool %r: reporting the target failed: %s", template, exc)

    async def _refill_loop(self, template: str, limiter: anyio.CapacityLimiter) -> None:
        delay = self._retry_delay
        while True:
            # A fresh event before deciding: a take() from here on wakes the wait below.
            self._wakeups[template] = anyio.Event()
            size = (await self.target(template)).size
            await self._shrink(template, size)
            if self.available(template) < size:
                await self._pause_after_take()
                if await self._grow(template, limiter, delay):
                    delay = self._retry_delay
                else:
                    delay = min(delay * 2, self._max_retry_delay)
                continue  # decide again after every sandbox: demand or capacity may have moved
            await self._touch_all(template)
            with anyio.move_on_after(self._touch_interval):
                await self._wakeups[template].wait()

    async def _pause_after_take(self) -> None:
        """Wait until ``refill_pause`` seconds have passed since the last take, then while an
        install runs until ``longest_pause`` has (see the module docstring); a take meanwhile
        starts the pause again."""
        while self._taken_at is not None:
            since = anyio.current_time() - self._taken_at
            if since < self._refill_pause:
                await anyio.sleep(self._refill_pause - since)
            elif since < self._longest_pause and self._busy():
                await anyio.sleep(BUSY_POLL_SECONDS)
            else:
                return

    async def _grow(self, template: str, limiter: anyio.CapacityLimiter, delay: float) -> bool:
        """Provision one sandbox into the pool; after a failure wait ``delay`` and say so."""
        try:
            async with limiter:
                sandbox = await self._provision(template)
        except SandboxError as exc:
            log.warning("warm pool %r: provisioning failed, retry in %gs: %s", template, delay, exc)
            await anyio.sleep(delay)
            return False
        self._ready[template].append(sandbox)
        return True

    async def _shrink(self, template: str, size: int) -> None:
        """Give up the oldest ready sandboxes past ``size``."""
        ready = self._ready[template]
        while len(ready) > size:
            # Popped before the await: a concurrent take() can no longer be handed this one.
            await self._discard_quietly(ready.popleft())

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
