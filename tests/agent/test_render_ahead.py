"""The run's render checks: a browser started ahead is never lost to a cancelled taker; the
browser runs on the engine of the sandbox's own node (a swarm node's), and an engine that cannot
have it is a skipped check in words."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from app.agent import render_ahead
from app.agent.render_ahead import RenderAhead
from sandbox import (
    RENDER_IMAGE,
    RENDER_SKIP_FAILED,
    RENDER_SKIP_IMAGE,
    ImageMissing,
    RenderCheckSettings,
    RenderReport,
    SandboxError,
)
from sandbox.errors import SandboxLost

pytestmark = pytest.mark.anyio


class _Manager:
    """The manager's part a check uses: the sandbox, the engine beside it (or its failure)."""

    def __init__(self, engine: object = None, failure: SandboxError | None = None) -> None:
        self.engine, self.failure = engine, failure
        self.settings = SimpleNamespace(instance="i")
        self.asked: list[tuple[str, str]] = []

    async def engine_beside(self, container_id: str, image: str) -> object:
        self.asked.append((container_id, image))
        if self.failure is not None:
            raise self.failure
        return self.engine

    async def wait_ready(self, sandbox_id: str) -> Any:
        return SimpleNamespace(container_id="box", dev_port=5173)


class _SlowStarts:
    """Render browsers whose start waits for :attr:`go`; their discards are recorded."""

    def __init__(self) -> None:
        self.go = anyio.Event()
        self.discarded: list[object] = []

    async def start(self, *args: Any, **kwargs: Any) -> Any:
        await self.go.wait()
        return SimpleNamespace(sandbox_container="box", discard=self._discarder())

    def _discarder(self) -> Any:
        async def discard() -> None:
            self.discarded.append(discard)

        return discard


async def test_a_taker_cancelled_while_the_browser_starts_leaves_it_to_the_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    starts = _SlowStarts()
    monkeypatch.setattr(render_ahead, "RenderBrowser", starts)
    manager: Any = _Manager(engine="the box's engine")
    ahead = RenderAhead(manager, RenderCheckSettings())
    sandbox: Any = SimpleNamespace(container_id="box", dev_port=5173)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            ahead.tasks = tasks
            ahead.start_browser(sandbox)
            with anyio.move_on_after(0.05):  # a check cancelled while it waits for the browser
                await ahead._take_browser()
            starts.go.set()  # the (shielded) start ends after its taker left
            await ahead.discard_browser()  # the workspace's close
    assert len(starts.discarded) == 1


class _CheckingStarts:
    """Render browsers that start at once and whose check runs until cancelled."""

    def __init__(self) -> None:
        self.started = 0
        self.checking = 0

    async def start(self, *args: Any, **kwargs: Any) -> Any:
        self.started += 1
        return SimpleNamespace(sandbox_container="box", check=self._check, discard=self._discard)

    async def _check(self) -> RenderReport:
        self.checking += 1
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def _discard(self) -> None:
        pass


@pytest.mark.parametrize(
    ("changed", "browsers"),
    [
        pytest.param(True, 2, id="voided-while-checking-a-new-browser-starts"),
        pytest.param(False, 1, id="files-changed-before-the-start-no-check"),
    ],
)
async def test_a_check_voided_by_a_newer_one_leaves_it_a_browser(
    monkeypatch: pytest.MonkeyPatch, changed: bool, browsers: int
) -> None:
    """Each browser checks once: a check ahead voided while it ran had taken the browser
    started ahead, so the newer check gets one started meanwhile, not at its own start."""
    starts = _CheckingStarts()
    monkeypatch.setattr(render_ahead, "RenderBrowser", starts)
    ahead = RenderAhead(_Manager(engine="engine"), RenderCheckSettings())  # type: ignore[arg-type]
    session: Any = SimpleNamespace(log=SimpleNamespace(source_state=1))
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            ahead.tasks = tasks
            ahead.start_browser(SimpleNamespace(container_id="box", dev_port=5173))  # type: ignore[arg-type]
            ahead.start_check(session, "sb", 1 if changed else 0)
            await anyio.wait_all_tasks_blocked()
            assert starts.checking == (1 if changed else 0)
            session.log.source_state = 2
            ahead.start_check(session, "sb", 2)
            await anyio.wait_all_tasks_blocked()
            assert starts.started == browsers
            tasks.cancel_scope.cancel()


async def test_the_check_runs_on_the_engine_of_the_sandboxs_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    used: list[object] = []

    async def check(engine: object, *args: Any, **kwargs: Any) -> RenderReport:
        used.append((engine, kwargs["sandbox_container"]))
        return RenderReport(ok=True)

    monkeypatch.setattr(render_ahead, "run_render_check", check)
    manager: Any = _Manager(engine="node-2's engine")
    report = await RenderAhead(manager, RenderCheckSettings())._check_settled("sb")
    assert (report.ok, report.skipped) == (True, None)
    assert manager.asked == [("box", RENDER_IMAGE)]
    assert used == [("node-2's engine", "box")]


@pytest.mark.parametrize(
    ("failure", "code", "words"),
    [
        pytest.param(
            ImageMissing("kiln's engine has no image 'kiln/render-browser'"),
            RENDER_SKIP_IMAGE,
            "the render browser is missing: kiln's engine has no image",
            id="image-missing",
        ),
        pytest.param(
            SandboxLost("sandbox container 'box' runs on no swarm node"),
            RENDER_SKIP_FAILED,
            "the render check could not run: sandbox container 'box' runs on no swarm node",
            id="node-lost",
        ),
    ],
)
async def test_an_engine_that_cannot_hold_the_browser_is_a_skip_in_words(
    failure: SandboxError, code: str, words: str
) -> None:
    manager: Any = _Manager(failure=failure)
    report = await RenderAhead(manager, RenderCheckSettings())._check_settled("sb")
    assert (report.ok, report.skipped) == (True, code)
    assert report.skipped_message.startswith(words)
