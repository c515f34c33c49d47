"""The warm pool with fake sandboxes: filling, handing out, refilling, retrying, draining."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import anyio
import pytest

from sandbox.errors import SandboxUnavailable
from sandbox.lifecycle.warm_pool import WarmPool

pytestmark = pytest.mark.anyio


class FakeEngine:
    """Provisions numbered fake sandboxes ("vanilla-1", ...) and records what happened."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.discarded: list[str] = []
        self.touched: list[str] = []
        self.dead: set[str] = set()
        self.failures_left = 0

    async def provision(self, template: str) -> str:
        await anyio.sleep(0)
        if self.failures_left:
            self.failures_left -= 1
            raise SandboxUnavailable(f"image {template!r} missing")
        name = f"{template}-{len(self.created) + 1}"
        self.created.append(name)
        return name

    async def is_alive(self, sandbox: str) -> bool:
        return sandbox not in self.dead

    async def touch(self, sandbox: str) -> None:
        self.touched.append(sandbox)

    async def discard(self, sandbox: str) -> None:
        self.discarded.append(sandbox)


def make_pool(engine: FakeEngine, size: int = 1, touch_interval: float = 60.0) -> WarmPool[str]:
    return WarmPool(
        size=size,
        templates=("vanilla", "vite-react"),
        provision=engine.provision,
        is_alive=engine.is_alive,
        touch=engine.touch,
        discard=engine.discard,
        touch_interval=touch_interval,
        retry_delay=0.01,
        max_retry_delay=0.02,
    )


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
async def running(engine: FakeEngine) -> AsyncIterator[WarmPool[str]]:
    """A pool of two per template, refilling in the background."""
    pool = make_pool(engine, size=2)
    async with anyio.create_task_group() as group:
        group.start_soon(pool.run)
        await until(lambda: pool.available("vanilla") == pool.available("vite-react") == 2)
        yield pool
        group.cancel_scope.cancel()


async def until(condition: Callable[[], bool]) -> None:
    """Wait (bounded) until ``condition()`` holds."""
    with anyio.fail_after(5):
        while not condition():
            await anyio.sleep(0.001)


async def test_the_pool_fills_every_template_to_its_size(
    running: WarmPool[str], engine: FakeEngine
) -> None:
    templates = sorted(name.rsplit("-", 1)[0] for name in engine.created)
    assert templates == ["vanilla", "vanilla", "vite-react", "vite-react"]
    assert running.available("nextjs") == 0


async def test_take_hands_out_a_ready_sandbox_and_the_pool_refills(
    running: WarmPool[str], engine: FakeEngine
) -> None:
    first = await running.take("vanilla")
    assert first is not None
    assert first.startswith("vanilla-")
    await until(lambda: running.available("vanilla") == 2)
    assert len(engine.created) == 5


async def test_a_dead_pooled_sandbox_is_discarded_not_handed_out(
    running: WarmPool[str], engine: FakeEngine
) -> None:
    engine.dead = {name for name in engine.created if name.startswith("vanilla")}
    taken = await running.take("vanilla")
    # Both dead ones are thrown away; what comes back (if the refill was quick) is a new one.
    assert engine.dead <= set(engine.discarded)
    assert taken is None or taken not in engine.dead


async def test_take_from_an_empty_or_unknown_template_gives_none(engine: FakeEngine) -> None:
    pool = make_pool(engine)
    assert await pool.take("vanilla") is None
    assert await pool.take("angular") is None


async def test_provisioning_failures_are_retried(engine: FakeEngine) -> None:
    engine.failures_left = 3
    pool = make_pool(engine)
    async with anyio.create_task_group() as group:
        group.start_soon(pool.run)
        await until(lambda: pool.available("vanilla") == pool.available("vite-react") == 1)
        group.cancel_scope.cancel()
    assert engine.failures_left == 0


async def test_pooled_sandboxes_are_touched_so_the_reaper_keeps_them(engine: FakeEngine) -> None:
    pool = make_pool(engine, touch_interval=0.01)
    async with anyio.create_task_group() as group:
        group.start_soon(pool.run)
        await until(
            lambda: engine.touched.count("vanilla-1") + engine.touched.count("vanilla-2") >= 3
        )
        group.cancel_scope.cancel()


async def test_drain_discards_everything_ready(running: WarmPool[str], engine: FakeEngine) -> None:
    running.size = 0  # stop refilling
    await running.drain()
    assert running.available("vanilla") == running.available("vite-react") == 0
    assert sorted(engine.discarded) == sorted(engine.created)


async def test_a_pool_of_size_zero_does_nothing(engine: FakeEngine) -> None:
    pool = make_pool(engine, size=0)
    await pool.run()
    assert engine.created == []
