"""A run's cancel interrupts the sandbox or tool work awaited at that moment."""

from __future__ import annotations

import anyio
import pytest

from app.agent.cancel_watch import CancelWatch

pytestmark = pytest.mark.anyio


async def test_a_cancel_interrupts_the_awaited_work_and_the_next_at_once() -> None:
    cancel = anyio.Event()
    watch = CancelWatch(cancel)
    reached: list[str] = []

    async def work(name: str) -> None:
        await anyio.sleep_forever()
        reached.append(name)  # never: the cancel interrupts the wait

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watch.watch)
        tasks.start_soon(watch.cancellable, work("running"))
        await anyio.wait_all_tasks_blocked()
        cancel.set()
    await watch.cancellable(work("after"))  # already cancelled: returns at once
    assert reached == []


async def test_work_without_a_cancel_runs_to_its_end() -> None:
    watch = CancelWatch(anyio.Event())
    done: list[int] = []

    async def work() -> None:
        done.append(1)

    await watch.cancellable(work())
    assert done == [1]
