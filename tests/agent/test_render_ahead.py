"""The run's render checks started ahead: a browser is never lost to a cancelled taker."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from app.agent import render_ahead
from app.agent.render_ahead import RenderAhead
from sandbox import RenderCheckSettings

pytestmark = pytest.mark.anyio


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
    manager: Any = SimpleNamespace(client=None, settings=SimpleNamespace(instance="i"))
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
