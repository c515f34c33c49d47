"""Edit mode end to end in the loop: recordings of follow-up turns against an existing project.

The project is the counter app of the vite-react worked example on top of the template's files;
the stand-in sandbox applies edits with the same pure function as the real session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from anyio.abc import TaskGroup

from app.agent.checkpoint import Checkpoint
from app.agent.context import ExistingProject
from app.agent.loop import AgentRun, RunResult, RunSettings
from app.postgen.template_workspace import read_template_workspace
from app.providers.replay import ReplayProvider
from parser import StreamParser
from parser.assemble import FileAssembler
from prompts.compose import load_text
from sandbox.session_log import RecordSink
from tests.agent.fakes import Collector, FakeTools, FakeWorkspace

pytestmark = pytest.mark.anyio

RECORDINGS = Path(__file__).resolve().parents[1] / "data" / "edits"
REQUEST = "rename the heading to Clicker and keep everything else"


def counter_project() -> ExistingProject:
    """The template's files with the counter app of the worked example written over them."""
    assembler = FileAssembler()
    parser = StreamParser()
    assembler.apply_all([*parser.feed(load_text("example_vite-react")), *parser.close()])
    files = {**read_template_workspace("vite-react"), **assembler.files}
    return ExistingProject("vite-react", files, ("src/App.jsx",))


async def run(
    name: str,
    workspace: FakeWorkspace,
    events: Collector,
    checkpoint: Checkpoint | None = None,
    checkpoints: list[Checkpoint] | None = None,
) -> RunResult:
    async def save(state: Checkpoint) -> None:
        if checkpoints is not None:
            checkpoints.append(Checkpoint.from_dict(json.loads(json.dumps(state.to_dict()))))

    settings = RunSettings(
        model="recording", template="vite-react", provider_name="replay", context_window=200_000
    )
    provider = ReplayProvider(recording_file=RECORDINGS / name, fast=True)
    agent = AgentRun(settings, provider, workspace, FakeTools(), emit=events, save=save)
    return await agent.run(REQUEST, checkpoint=checkpoint)


def prompts_of(events: Collector) -> list[str]:
    return [event["prompt"] for event in events.of_type("turn_start")]


async def test_a_follow_up_edit_changes_one_line_and_keeps_every_other_file() -> None:
    project = counter_project()
    workspace, events = FakeWorkspace(project=project), Collector()
    result = await run("rename-heading.jsonl", workspace, events)
    assert (result.status, result.stop_reason, result.turns) == ("completed", "code_written", 1)
    assert workspace.target_ is not None
    after = workspace.target_.files
    assert after["src/App.jsx"] == project.files["src/App.jsx"].replace(
        "Counter</h1>", "Clicker</h1>"
    )
    assert {p: c for p, c in after.items() if p != "src/App.jsx"} == {
        p: c for p, c in project.files.items() if p != "src/App.jsx"
    }
    assert result.files == ["src/App.jsx"]
    context = events.of_type("context")[0]
    assert context["mode"] == "edit"
    included = {item["path"]: item["reason"] for item in context["included"]}
    assert included["src/App.jsx"] == "entrypoint"
    assert included["src/components/Counter.jsx"] == "imported by an entrypoint"


async def test_the_system_prompt_of_an_edit_shows_the_project() -> None:
    workspace, events = FakeWorkspace(project=counter_project()), Collector()
    seen: list[str] = []

    class Spy(ReplayProvider):
        def stream(self, request, cancel=None):  # type: ignore[no-untyped-def]
            seen.append(request.system)
            return super().stream(request, cancel)

    settings = RunSettings(
        model="recording", template="vite-react", provider_name="replay", context_window=200_000
    )
    provider = Spy(recording_file=RECORDINGS / "rename-heading.jsonl", fast=True)
    await AgentRun(settings, provider, workspace, FakeTools(), emit=events).run(REQUEST)
    assert load_text("mode_edit") in seen[0]
    assert load_text("example_edit_vite-react") in seen[0]
    assert '<current_file path="src/App.jsx">' in seen[0]
    assert "- src/App.jsx (" in seen[0]


async def test_a_new_chat_is_not_an_edit() -> None:
    events = Collector()
    recording = Path(__file__).resolve().parents[3] / "shared" / "recordings"
    settings = RunSettings(
        model="recording", template="vite-react", provider_name="replay", context_window=200_000
    )
    provider = ReplayProvider(recording_file=recording / "todo-vite-react.txt", fast=True)
    await AgentRun(settings, provider, FakeWorkspace(), FakeTools(), emit=events).run("todos")
    assert events.of_type("context") == []


async def test_an_ambiguous_block_is_refused_and_the_retry_applies() -> None:
    project = counter_project()
    workspace, events = FakeWorkspace(project=project), Collector()
    result = await run("ambiguous-then-retry.jsonl", workspace, events)
    assert (result.status, result.stop_reason, result.turns) == ("completed", "code_written", 2)
    feedback = prompts_of(events)[1]
    assert "matches 3 places" in feedback
    assert project.files["src/components/Counter.jsx"] in feedback  # the file as it is
    assert workspace.target_ is not None
    counter = workspace.target_.files["src/components/Counter.jsx"]
    assert ">Start over</button>" in counter
    assert counter.count("setCount(") == project.files["src/components/Counter.jsx"].count(
        "setCount("
    )


async def test_missing_blocks_twice_lead_to_a_whole_file_answer() -> None:
    workspace, events = FakeWorkspace(project=counter_project()), Collector()
    result = await run("missing-then-whole-file.jsonl", workspace, events)
    assert (result.status, result.stop_reason, result.turns) == ("completed", "code_written", 3)
    first, second = prompts_of(events)[1:3]
    assert "matches nowhere" in first
    assert "Send corrected SEARCH/REPLACE blocks" in first
    assert "write the whole file" in second
    assert workspace.target_ is not None
    assert "<h1>Clicker</h1>" in workspace.target_.files["src/App.jsx"]


async def test_a_read_is_answered_with_the_file_and_counted_as_a_tool_call() -> None:
    project = counter_project()
    workspace, events = FakeWorkspace(project=project), Collector()
    result = await run("read-then-edit.jsonl", workspace, events)
    assert (result.stop_reason, result.turns) == ("code_written", 2)
    assert project.files["src/components/Counter.jsx"] in prompts_of(events)[1]
    assert [r["tool"] for r in events.of_type("tool_result")] == ["read"]
    assert result.usage["tool_calls"] == 1


async def test_a_placeholder_rewrite_is_refused_and_the_old_file_kept() -> None:
    project = counter_project()
    workspace, events = FakeWorkspace(project=project), Collector()
    result = await run("placeholder-rewrite.jsonl", workspace, events)
    assert (result.status, result.stop_reason, result.turns) == ("completed", "code_written", 2)
    assert [e["code"] for e in events.of_type("error")] == ["rewrite_refused"]
    feedback = prompts_of(events)[1]
    assert "placeholder where code was" in feedback
    assert workspace.target_ is not None
    app = workspace.target_.files["src/App.jsx"]
    assert app == project.files["src/App.jsx"].replace("<h1>Counter</h1>", "<h1>Clicker</h1>")


async def test_an_edit_run_resumed_after_a_refused_turn_ends_the_same() -> None:
    checkpoints: list[Checkpoint] = []
    whole_space = FakeWorkspace(project=counter_project())
    whole = await run("ambiguous-then-retry.jsonl", whole_space, Collector(), None, checkpoints)
    assert whole_space.target_ is not None
    state = checkpoints[0]  # after the refused turn
    assert (state.turn, state.stop_reason) == (1, None)
    space, events = FakeWorkspace(project=counter_project()), Collector()
    resumed = await run("ambiguous-then-retry.jsonl", space, events, state)
    assert (resumed.stop_reason, resumed.turns, resumed.files) == (
        whole.stop_reason,
        whole.turns,
        whole.files,
    )
    assert events.of_type("context")[0]["mode"] == "edit"
    assert space.target_ is not None
    assert space.target_.files == whole_space.target_.files


async def test_an_edit_acquires_and_restores_its_sandbox_before_choosing_the_context() -> None:
    events = Collector()
    contexts_then: list[int] = []
    sinks: list[object] = []

    class Watched(FakeWorkspace):
        def acquire_early(self, tasks: TaskGroup, on_record: RecordSink | None = None) -> None:
            contexts_then.append(len(events.of_type("context")))
            sinks.append(on_record)
            super().acquire_early(tasks, on_record)

    await run("rename-heading.jsonl", Watched(project=counter_project()), events)
    # First as soon as the project's template is known, with the run's record sink (the early
    # sandbox is told and restored); the run's own early acquire after it finds it under way.
    assert contexts_then[0] == 0
    assert sinks[0] is not None
