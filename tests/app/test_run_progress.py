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


THROWS = {
    "kind": "uncaught",
    "message": "Cannot read properties of undefined (reading 'name')\n    at App (App.jsx:12:5)",
    "stack": "",
    "source": {"file": "src/App.jsx", "line": 12, "column": 5},
    "url": "http://x.preview.localhost/",
    "count": 2,
}
FAILED_FETCH = {**THROWS, "kind": "network", "message": "GET /api/items 500", "source": None}
BUILD = {"ok": True, "exit_code": 0, "output": ""}


def _postgen(render: dict[str, object]) -> dict[str, object]:
    checks = {"fixes": [], "findings": [], "build": BUILD, "render": render}
    return {"type": "postgen", **checks}


@pytest.mark.parametrize(
    ("render", "expected"),
    [
        pytest.param(
            {"ok": False, "skipped": None, "errors": [THROWS], "blank": False, "seconds": 2.25},
            [
                "  render check: app throws 1 error (2.2 s)",
                "    [uncaught] Cannot read properties of undefined (reading 'name')"
                " (src/App.jsx:12:5) (2 times)",
            ],
            id="throws",
        ),
        pytest.param(
            {"ok": False, "skipped": None, "errors": [], "blank": True, "seconds": 1.0},
            ["  render check: page blank (1.0 s)"],
            id="blank",
        ),
        pytest.param(
            {
                "ok": True,
                "skipped": "render_check_disabled",
                "message": "KILN_RENDER_CHECK is off",
                "errors": [],
                "blank": False,
            },
            ["  render check skipped: KILN_RENDER_CHECK is off"],
            id="skipped",
        ),
        pytest.param(
            {
                "ok": True,
                "skipped": None,
                "errors": [],
                "blank": False,
                "seconds": 0.5,
                "screenshot": "/api/runs/r1/screenshot",
            },
            ["  render check: app renders (0.5 s)", "    screenshot: /api/runs/r1/screenshot"],
            id="renders",
        ),
    ],
)
async def test_the_render_check_is_printed(render: dict[str, object], expected: list[str]) -> None:
    printer, out, _ = _printer()
    await printer.show(_postgen(render))
    assert out.getvalue().splitlines()[1:] == expected  # after "build passed"


async def test_preview_errors_are_printed_once_each() -> None:
    """A ``preview_error`` event is printed as it comes; the check's list does not repeat it."""
    printer, out, _ = _printer()
    await printer.show({"type": "preview_error", **THROWS})
    await printer.show({"type": "preview_error", **FAILED_FETCH})
    await printer.show(
        _postgen({"ok": False, "skipped": None, "errors": [THROWS, FAILED_FETCH], "blank": False})
    )
    assert out.getvalue().splitlines() == [
        "  ! preview error [uncaught] Cannot read properties of undefined (reading 'name')"
        " (src/App.jsx:12:5) (2 times)",
        "  ! preview error [network] GET /api/items 500 (2 times)",
        "  build passed",
        "  render check: app throws 2 errors",
    ]


async def test_a_page_cannot_drive_the_terminal() -> None:
    printer, out, _ = _printer()
    hostile = {**FAILED_FETCH, "message": "\x1b]0;owned\x07\x1b[2Jgone", "count": 1}
    await printer.show({"type": "preview_error", **hostile})
    assert out.getvalue() == "  ! preview error [network] ?]0;owned??[2Jgone\n"
    assert "\x1b" not in out.getvalue()
