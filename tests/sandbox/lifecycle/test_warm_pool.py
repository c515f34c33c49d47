"""The warm pool with fake sandboxes: filling, handing out, refilling, retrying, draining,
and sizing to recent demand (a fake clock: no sleeping through a window)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import pytest

from sandbox.errors import SandboxUnavailable
from sandbox.lifecycle.pool_sizing import PoolTarget
from sandbox.lifecycle.warm_pool import WarmPool
from tests.waiting import until

pytestmark = pytest.mark.anyio


class FakeEngine:
    """Provisions numbered fake sandboxes ("vanilla-1", ...) and records what happened."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.discarded: list[str] = []
        self.touched: list[str] = []
        self.dead: set[str] = set()
        self.failures_left = 0
        self.gate: anyio.Event | None = None  # set: provisioning waits for it
        self.starting = 0
        self.most_starting = 0  # the most provisions in flight at once

    async def provision(self, template: str) -> str:
        self.starting += 1
        self.most_starting = max(self.most_starting, self.starting)
        try:
            await (self.gate.wait() if self.gate else anyio.sleep(0))
        finally:
            self.starting -= 1
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


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_pool(
    engine: FakeEngine,
    size: int = 1,
    touch_interval: float = 60.0,
    *,
    maximum: int | None = None,
    clock: Clock | None = None,
    refills: int = 1,
    free_slots: Callable[[], Awaitable[int]] | None = None,
    on_target: Callable[[str, int, PoolTarget], Awaitable[None]] | None = None,
    refill_pause: float = 0.0,
    longest_pause: float = 0.0,
    busy: Callable[[], bool] = lambda: False,
) -> WarmPool[str]:
    return WarmPool(
        bounds=(size, size if maximum is None else maximum),
        templates=("vanilla", "vite-react"),
        provision=engine.provision,
        is_alive=engine.is_alive,
        touch=engine.touch,
        discard=engine.discard,
        touch_interval=touch_interval,
        window=600.0,
        refills=refills,
        clock=clock or Clock(),
        retry_delay=0.01,
        max_retry_delay=0.02,
        free_slots=free_slots or ample,
        on_target=on_target,
        refill_pause=refill_pause,
        longest_pause=longest_pause,
        busy=busy,
    )


async def ample() -> int:
    """A host with room to spare."""
    return 100


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


async def test_drain_discards_everything_ready(engine: FakeEngine) -> None:
    running = make_pool(engine, size=2)
    async with anyio.create_task_group() as group:
        group.start_soon(running.run)
        await until(lambda: running.available("vanilla") == running.available("vite-react") == 2)
        group.cancel_scope.cancel()
    await running.drain()
    assert running.available("vanilla") == running.available("vite-react") == 0
    assert sorted(engine.discarded) == sorted(engine.created)


async def test_a_pool_of_size_zero_does_nothing(engine: FakeEngine) -> None:
    pool = make_pool(engine, size=0)
    await pool.run()
    assert engine.created == []


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def elastic(engine: FakeEngine, clock: Clock) -> AsyncIterator[WarmPool[str]]:
    """A pool of one to three per template, sized by the last 600s of demand, running."""
    pool = make_pool(engine, size=1, maximum=3, clock=clock)
    async with anyio.create_task_group() as group:
        group.start_soon(pool.run)
        await until(lambda: pool.available("vanilla") == pool.available("vite-react") == 1)
        yield pool
        group.cancel_scope.cancel()


async def test_a_burst_of_acquires_grows_the_pool_to_its_maximum(
    elastic: WarmPool[str], clock: Clock
) -> None:
    for _ in range(5):
        clock.now += 1
        await elastic.take("vanilla")
    await until(lambda: elastic.available("vanilla") == 3)
    assert elastic.targets["vanilla"].rule == "burst"
    assert elastic.available("vite-react") == 1  # no demand there: it stays at the minimum


async def test_idle_time_shrinks_the_pool_oldest_first(
    elastic: WarmPool[str], engine: FakeEngine, clock: Clock
) -> None:
    await elastic.take("vanilla")
    await elastic.take("vanilla")
    await until(lambda: elastic.available("vanilla") == 2)
    held = [name for name in engine.created if name.startswith("vanilla")][-2:]
    clock.now += 601  # the acquires leave the window
    elastic.wake()
    await until(lambda: elastic.available("vanilla") == 1)
    assert engine.discarded == held[:1]  # the older of the two went
    assert elastic.targets["vanilla"].rule == "idle"


async def test_giving_up_a_warm_sandbox_for_room_is_no_demand(
    elastic: WarmPool[str], clock: Clock
) -> None:
    await elastic.take("vanilla", demand=False)
    await elastic.take("vanilla", demand=False)
    await until(lambda: elastic.available("vanilla") == 1)
    assert elastic.targets["vanilla"].size == 1


async def test_the_pool_grows_only_into_the_host_s_free_slots(
    engine: FakeEngine, clock: Clock
) -> None:
    limit = 3  # the host's: taken sandboxes (users') count, like warm ones

    async def free_slots() -> int:
        return limit - (len(engine.created) - len(engine.discarded))

    pool = make_pool(engine, size=1, maximum=3, clock=clock, free_slots=free_slots)
    async with anyio.create_task_group() as group:
        group.start_soon(pool.run)
        await until(lambda: pool.available("vanilla") == pool.available("vite-react") == 1)
        for _ in range(3):  # demand for three; one is handed out, room is left for one more
            await pool.take("vanilla")
        await until(lambda: pool.available("vanilla") == 1 and len(engine.created) == limit)
        for _ in range(20):
            await anyio.sleep(0)  # the loop had its chance to overreach
        group.cancel_scope.cancel()
    assert len(engine.created) == limit
    assert pool.targets["vanilla"].rule == "host_full"


async def test_refills_start_at_most_refills_sandboxes_at_once(
    engine: FakeEngine, clock: Clock
) -> None:
    engine.gate = anyio.Event()
    pool = make_pool(engine, size=3, maximum=3, clock=clock, refills=1)
    async with anyio.create_task_group() as group:
        group.start_soon(pool.run)
        await until(lambda: engine.starting == 1)
        for _ in range(20):
            await anyio.sleep(0)  # every loop had its chance to start one more
        assert engine.most_starting == 1
        engine.gate.set()
        await until(lambda: pool.available("vanilla") == pool.available("vite-react") == 3)
        group.cancel_scope.cancel()
    assert engine.most_starting == 1


async def test_a_refill_waits_for_the_pause_after_a_take(engine: FakeEngine, clock: Clock) -> None:
    pool = make_pool(engine, size=1, clock=clock, refill_pause=0.5)
    async with anyio.create_task_group() as group:
        group.start_soon(pool.run)
        await until(lambda: pool.available("vanilla") == pool.available("vite-react") == 1)
        assert await pool.take("vanilla") is not None
        await anyio.wait_all_tasks_blocked()
        assert len(engine.created) == 2  # the taken sandbox's restore has the host to itself
        await until(lambda: pool.available("vanilla") == 1)
        group.cancel_scope.cancel()
    assert len(engine.created) == 3


async def test_a_refill_waits_while_an_install_runs_after_a_take(
    engine: FakeEngine, clock: Clock
) -> None:
    installing = [True]
    pool = make_pool(engine, clock=clock, longest_pause=60.0, busy=lambda: installing[0])
    async with anyio.create_task_group() as group:
        group.start_soon(pool.run)
        await until(lambda: pool.available("vanilla") == pool.available("vite-react") == 1)
        assert await pool.take("vanilla") is not None
        await anyio.wait_all_tasks_blocked()
        assert len(engine.created) == 2  # the taken sandbox's install runs
        installing[0] = False
        await until(lambda: pool.available("vanilla") == 1)
        group.cancel_scope.cancel()
    assert len(engine.created) == 3


async def test_take_never_waits_for_a_refill(engine: FakeEngine, clock: Clock) -> None:
    engine.gate = anyio.Event()  # provisioning hangs
    pool = make_pool(engine, size=1, clock=clock)
    async with anyio.create_task_group() as group:
        group.start_soon(pool.run)
        await until(lambda: engine.starting == 1)
        with anyio.fail_after(1):
            assert await pool.take("vanilla") is None
        group.cancel_scope.cancel()


async def test_status_says_each_template_s_target_and_why(elastic: WarmPool[str]) -> None:
    ready, target = elastic.status()["vanilla"]
    assert ready == 1
    assert target is not None
    assert (target.size, target.rule) == (1, "idle")
    assert "no acquires in the last 600s" in target.why


async def test_every_decision_is_reported(engine: FakeEngine, clock: Clock) -> None:
    reported: list[tuple[str, int, str]] = []

    async def on_target(template: str, ready: int, target: PoolTarget) -> None:
        reported.append((template, ready, target.rule))
        if len(reported) == 1:
            raise SandboxUnavailable("redis away")  # a failed report does not stop the pool

    pool = make_pool(engine, size=1, clock=clock, on_target=on_target)
    async with anyio.create_task_group() as group:
        group.start_soon(pool.run)
        await until(lambda: ("vanilla", 1, "idle") in reported)
        group.cancel_scope.cancel()
    assert ("vanilla", 0, "idle") in reported  # before its first sandbox
