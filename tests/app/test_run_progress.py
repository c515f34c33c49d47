"""``kiln run``'s progress lines, and the heartbeat that keeps a slow install from looking hung."""

from __future__ import annotations

import io

import anyio
import pytest

from app.cli.run_progress import ProgressPrinter

pytestmark = pytest.mark.anyio


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _printer() -> tuple[ProgressPrinter, io.StringIO, Clock]:
    out, clock = io.StringIO(), Clock()
    return ProgressPrinter(out, clock=clock), out, clock


async def test_a_quiet_install_is_said_to_run_every_ten_seconds() -> None:
    printer, out, clock = _printer()
    await printer.show({"type": "install_started", "packages": ["zustand"]})
    for _ in range(25):
        clock.now += 1
        printer.tick()
    assert [line for line in out.getvalue().splitlines() if "…" in line] == [
        "  installing zustand… 10 s",
        "  installing zustand… 20 s",
    ]


async def test_output_counts_as_a_line_and_a_finished_install_is_silent() -> None:
    printer, out, clock = _printer()
    await printer.show({"type": "install_started", "packages": ["a", "b"]})
    clock.now += 9
    await printer.show({"type": "output", "line": "added 1 package"})
    clock.now += 9
    printer.tick()
    assert "…" not in out.getvalue()  # 9 s since the output line
    clock.now += 1
    printer.tick()
    assert out.getvalue().endswith("  installing a b… 19 s\n")
    await printer.show({"type": "install_finished", "packages": ["a", "b"], "exit_code": 0})
    clock.now += 60
    printer.tick()
    assert out.getvalue().endswith("  installed a b (exit 0)\n")


async def test_nothing_runs_nothing_is_said() -> None:
    printer, out, clock = _printer()
    clock.now += 60
    printer.tick()
    assert out.getvalue() == ""


async def test_keep_alive_ticks_until_cancelled() -> None:
    out = io.StringIO()
    printer = ProgressPrinter(out, heartbeat=0.05)
    await printer.show({"type": "install_started", "packages": ["zustand"]})
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(printer.keep_alive, 0.01)
        with anyio.fail_after(10):
            while "installing zustand…" not in out.getvalue():
                await anyio.sleep(0.01)
        tasks.cancel_scope.cancel()
