"""Riding out a short Docker outage: a step is tried again while Docker is away, within a bound,
and only for that failure; while Docker is known away, checks fail at once until a recheck."""

from __future__ import annotations

import anyio
import pytest

from sandbox.errors import DockerUnavailable, SandboxCapacity, SandboxError
from sandbox.lifecycle.outage import EngineWatch, ride_out

pytestmark = pytest.mark.anyio


class Flaky:
    """A step that raises ``error`` ``failures`` times, then answers ``"done"``."""

    def __init__(self, failures: int, error: SandboxError) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "done"


async def test_docker_away_for_a_moment_is_waited_out() -> None:
    step = Flaky(1, DockerUnavailable("docker: engine unreachable"))
    assert await ride_out(step, "a step") == "done"
    assert step.calls == 2


async def test_past_the_bound_the_outage_stands() -> None:
    step = Flaky(5, DockerUnavailable("docker: engine unreachable"))
    with anyio.fail_after(5), pytest.raises(DockerUnavailable):
        await ride_out(step, "a step", limit=0.1)
    assert step.calls == 1  # the next try would have come after the bound


async def test_a_refusal_is_not_retried() -> None:
    step = Flaky(1, SandboxCapacity("no room"))
    with pytest.raises(SandboxCapacity):
        await ride_out(step, "a step")
    assert step.calls == 1


class Engine:
    """A ping that fails while ``away``; counts its calls."""

    def __init__(self) -> None:
        self.away, self.pings = True, 0

    async def __call__(self) -> None:
        self.pings += 1
        if self.away:
            raise DockerUnavailable("docker: engine did not answer ping")


async def test_while_docker_is_known_away_a_check_fails_without_pinging() -> None:
    engine = Engine()
    watch = EngineWatch(engine, recheck=3600)
    for _ in range(3):
        with pytest.raises(DockerUnavailable):
            await watch.check()
    assert engine.pings == 1
    assert watch.down


async def test_after_the_recheck_interval_recovery_is_noticed() -> None:
    engine = Engine()
    watch = EngineWatch(engine, recheck=0)
    with pytest.raises(DockerUnavailable):
        await watch.check()
    engine.away = False
    await watch.check()
    assert not watch.down
    assert engine.pings == 2


async def test_a_call_past_its_deadline_marks_the_engine_away() -> None:
    engine = Engine()
    engine.away = False
    watch = EngineWatch(engine, recheck=3600)
    watch.mark_down(DockerUnavailable("docker: engine did not answer get within 10 s"))
    with pytest.raises(DockerUnavailable):
        await watch.check()
    assert engine.pings == 0
    watch.mark_up()
    await watch.check()
    assert engine.pings == 1
