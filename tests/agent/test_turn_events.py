"""Where a turn's events go: the sandbox, the tools within budget, the run's events."""

from __future__ import annotations

import anyio
import pytest

from app.agent.budgets import Budgets, BudgetTracker
from app.agent.cancel_watch import CancelWatch
from app.agent.turn_events import TurnEvents
from parser.events import FileContent, FileEnd, FileStart, SandboxEnd, SandboxStart, WebSearch
from tests.agent.fakes import Collector, FakeTools, FakeWorkspace

pytestmark = pytest.mark.anyio


def _events(collector: Collector, workspace: FakeWorkspace, tools: FakeTools) -> TurnEvents:
    tracker = BudgetTracker(Budgets(max_tool_calls_per_turn=1))
    tracker.start_turn()
    return TurnEvents(collector, workspace, tools, tracker, CancelWatch(anyio.Event()))


async def test_a_files_chunks_reach_the_sandbox_and_are_published() -> None:
    collector, workspace = Collector(), FakeWorkspace()
    events = _events(collector, workspace, FakeTools())
    for event in [FileStart("a.js"), FileContent("a.js", "1;"), FileEnd("a.js")]:
        await events.handle(event, 1)
    assert workspace.target_ is not None
    assert workspace.target_.files == {"a.js": "1;"}
    assert events.assembler.files == {"a.js": "1;"}
    assert [e["type"] for e in collector.events] == ["file_start", "file_content", "file_end"]


@pytest.mark.parametrize(
    ("written", "check_follows"),
    [
        pytest.param(["a.js"], [True], id="code-written-the-check-starts-too"),
        pytest.param([], [False], id="nothing-written-a-warm-up-only"),
    ],
)
async def test_the_end_of_the_answers_files_starts_the_preview_work_ahead(
    written: list[str], check_follows: list[bool]
) -> None:
    """At ``sandbox_end``, while the stream goes on (commands and prose may follow): the
    preview's warm-up, and its render check when post-generation will want one."""
    workspace = FakeWorkspace()
    events = _events(Collector(), workspace, FakeTools())
    await events.handle(SandboxStart("todo", "vite-react"), 1)
    for path in written:
        for event in (FileStart(path), FileContent(path, "1;"), FileEnd(path)):
            await events.handle(event, 1)
    assert workspace.files_ended_with == []
    await events.handle(SandboxEnd(), 1)
    assert workspace.files_ended_with == check_follows


async def test_a_tool_call_past_the_budget_is_refused_in_words() -> None:
    collector, tools = Collector(), FakeTools()
    events = _events(collector, FakeWorkspace(), tools)
    await events.handle(WebSearch("first", 3), 1)
    await events.handle(WebSearch("second", 3), 1)
    assert tools.queries == ["first"]
    results = [(r.tool, r.ok) for r in events.recorder.tool_results]
    assert results == [("web_search", True), ("budget", False)]


@pytest.mark.parametrize(
    ("kind", "published"),
    [
        pytest.param("command", "command_finished", id="renamed"),
        pytest.param("version", "version", id="version"),
        pytest.param("version_unchanged", None, id="told-in-the-result"),
    ],
)
async def test_a_session_record_becomes_a_run_event(kind: str, published: str | None) -> None:
    collector = Collector()
    events = _events(collector, FakeWorkspace(), FakeTools())
    await events.on_record(kind, {"argv": ["npm", "test"], "exit_code": 0})
    assert [e["type"] for e in collector.events] == ([published] if published else [])
    assert events.unchanged is (kind == "version_unchanged")
