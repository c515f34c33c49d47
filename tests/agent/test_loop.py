"""The agent loop with the replay provider and stand-in sandbox and tools."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.agent.budgets import Budgets
from app.agent.checkpoint import Checkpoint
from app.agent.loop import AgentRun, RunResult, RunSettings
from app.chat_images import ChatImage
from app.errors import Overloaded
from app.providers.base import Message, ProviderRequest, ProviderStream, StreamOutcome
from app.providers.replay import ReplayPacing, ReplayProvider
from prompts.compose import nudge_prompt
from sandbox import RenderReport
from sandbox.preview.error_reports import PreviewError, SourceLocation
from tests.agent.fakes import RECORDINGS, Collector, FakeTools, FakeWorkspace
from tests.image_samples import gif, png

pytestmark = pytest.mark.anyio

TODO_FILES = [
    "README.md",
    "src/App.jsx",
    "src/components/TodoInput.jsx",
    "src/components/TodoItem.jsx",
    "src/index.css",
    "src/store.js",
]


def settings(**changes: object) -> RunSettings:
    base = RunSettings(
        model="recording", template="vite-react", provider_name="replay", context_window=200_000
    )
    return RunSettings(**{**base.__dict__, **changes})  # type: ignore[arg-type]


async def run(
    recording: Path,
    *,
    workspace: FakeWorkspace | None = None,
    tools: FakeTools | None = None,
    emit: Collector | None = None,
    checkpoints: list[Checkpoint] | None = None,
    checkpoint: Checkpoint | None = None,
    run_settings: RunSettings | None = None,
    request: str = "make me an app",
) -> RunResult:
    async def save(state: Checkpoint) -> None:
        if checkpoints is not None:
            checkpoints.append(copy.deepcopy(state))

    agent = AgentRun(
        run_settings or settings(),
        ReplayProvider(recording_file=recording, fast=True),
        workspace or FakeWorkspace(),
        tools or FakeTools(),
        emit=emit or Collector(),
        save=save,
    )
    return await agent.run(request, checkpoint=checkpoint)


def write(tmp_path: Path, name: str, turns: list[str]) -> Path:
    path = tmp_path / name
    path.write_text(
        "".join(json.dumps({"turn": i, "text": t}) + "\n" for i, t in enumerate(turns, 1))
    )
    return path


async def test_todo_recording_completes_in_one_turn_and_builds() -> None:
    workspace, events = FakeWorkspace(), Collector()
    result = await run(RECORDINGS / "todo-vite-react.txt", workspace=workspace, emit=events)
    assert (result.status, result.stop_reason, result.turns) == ("completed", "code_written", 1)
    assert result.files == TODO_FILES
    assert result.packages == ["zustand"]
    assert result.build == {"ok": True, "exit_code": 0, "output": "ran npm run build"}
    assert result.postgen is not None
    assert result.postgen["findings"] == []
    assert [c["argv"] for c in result.commands] == [["npm", "run", "build"]] * 2
    assert workspace.target_ is not None
    assert sorted(workspace.target_.assembler.files) == TODO_FILES
    assert workspace.closed
    ends = events.of_type("turn_end")
    assert ends == [
        {
            "type": "turn_end",
            "turn": 1,
            "rule": "code_written",
            "decision": "stop",
            "reason": "code_written",
        }
    ]
    assert events.events[-1]["type"] == "session_complete"


async def test_a_turns_version_is_recorded_while_its_commands_still_run() -> None:
    """The build is what takes longest after the stream; the turn's version does not wait."""
    workspace = FakeWorkspace(hold_commands=True)  # commands end only once a version exists
    with anyio.fail_after(10):
        result = await run(RECORDINGS / "todo-vite-react.txt", workspace=workspace)
    assert result.status == "completed"
    assert workspace.versions_recorded == [(1, ""), (1, "post-generation fixes")]


@pytest.mark.parametrize(
    ("kinds", "unchanged"),
    [
        pytest.param(("version_unchanged", "version_unchanged"), True, id="same-files-again"),
        pytest.param(("version", "version_unchanged"), False, id="changed-then-fixes-nothing"),
        pytest.param(("version_unchanged", "version"), False, id="fixes-changed"),
        pytest.param((), False, id="no-project"),
    ],
)
async def test_a_run_that_recorded_no_new_version_says_it_changed_nothing(
    kinds: tuple[str, ...], unchanged: bool
) -> None:
    workspace, events = FakeWorkspace(version_kinds=kinds), Collector()
    result = await run(RECORDINGS / "todo-vite-react.txt", workspace=workspace, emit=events)
    assert result.status == "completed"
    assert result.unchanged is unchanged
    assert events.of_type("session_complete")[0]["unchanged"] is unchanged
    assert not events.of_type("version_unchanged")  # said once, in the result


async def test_files_reach_the_sandbox_while_the_answer_streams() -> None:
    """Each file event is handed to the sandbox before the next one is parsed: when the loop
    says a file starts or ends, the sandbox already holds every file event said before it."""
    workspace = FakeWorkspace()
    kinds = ("file_start", "file_end")
    handed_when_said: list[int] = []

    class Watching(Collector):
        async def __call__(self, event: dict[str, Any]) -> None:
            await super().__call__(event)
            if event["type"] in kinds:
                held = workspace.target_.events if workspace.target_ else []
                handed_when_said.append(sum(e.type in kinds for e in held))

    events = Watching()
    await run(RECORDINGS / "todo-vite-react.txt", workspace=workspace, emit=events)
    assert workspace.target_ is not None
    streamed = [e for e in events.events if e["type"] in kinds]
    handled = [e.to_dict() for e in workspace.target_.events if e.type in kinds]
    assert [{k: v for k, v in e.items() if k != "turn"} for e in streamed] == handled
    assert len(streamed) == 2 * len(TODO_FILES)
    assert handed_when_said == list(range(len(streamed)))


async def test_search_then_build_continues_with_the_search_result() -> None:
    tools, checkpoints = FakeTools(), []
    result = await run(RECORDINGS / "search-then-build.jsonl", tools=tools, checkpoints=checkpoints)
    assert (result.status, result.stop_reason, result.turns) == ("completed", "code_written", 2)
    assert tools.queries == ["Intl.RelativeTimeFormat examples"]
    assert result.files == ["src/App.jsx", "src/index.css"]
    turn_two_prompt = checkpoints[0].messages[-1]
    assert turn_two_prompt.role == "user"
    assert tools.text in turn_two_prompt.content


async def test_conversational_answer_stops_without_a_sandbox() -> None:
    workspace = FakeWorkspace()
    result = await run(RECORDINGS / "hello-conversational.txt", workspace=workspace)
    assert (result.status, result.stop_reason, result.turns) == ("completed", "done", 1)
    assert workspace.target_ is None
    assert (result.sandbox_id, result.files, result.build) == (None, [], None)


@pytest.mark.parametrize(
    ("request_text", "early"),
    [
        pytest.param("make me an app", True, id="a-build-request"),
        pytest.param("hello!", False, id="small-talk"),
    ],
)
async def test_a_run_that_will_build_acquires_its_sandbox_before_the_first_file(
    request_text: str, early: bool
) -> None:
    workspace = FakeWorkspace()
    await run(RECORDINGS / "hello-conversational.txt", workspace=workspace, request=request_text)
    assert workspace.acquired_early is early


async def test_a_turn_without_output_is_nudged_exactly_once(tmp_path: Path) -> None:
    recording = write(
        tmp_path, "quiet.jsonl", ["<Thinking>hmm</Thinking>", "<Thinking>still</Thinking>"]
    )
    checkpoints: list[Checkpoint] = []
    result = await run(recording, checkpoints=checkpoints)
    assert (result.status, result.stop_reason, result.turns) == ("failed", "no_output", 2)
    nudges = [m for m in checkpoints[-1].messages if m.content == nudge_prompt()]
    assert len(nudges) == 1


async def test_nudged_run_that_then_builds_completes(tmp_path: Path) -> None:
    todo = (RECORDINGS / "todo-vite-react.txt").read_text()
    recording = write(tmp_path, "late.jsonl", ["<Thinking>hmm</Thinking>", todo])
    result = await run(recording)
    assert (result.status, result.stop_reason, result.turns) == ("completed", "code_written", 2)


async def test_resuming_from_every_turn_boundary_gives_the_same_files() -> None:
    recording = RECORDINGS / "search-then-build.jsonl"
    whole_space, checkpoints = FakeWorkspace(), []
    whole = await run(recording, workspace=whole_space, checkpoints=checkpoints)
    assert whole_space.target_ is not None
    expected_files = whole_space.target_.assembler.files
    assert len(checkpoints) == whole.turns
    for boundary in [Checkpoint.start("make me an app"), *checkpoints]:
        state = Checkpoint.from_dict(json.loads(json.dumps(boundary.to_dict())))
        if state.stop_reason is not None:
            state.stop_reason = None if state.turn < whole.turns else state.stop_reason
        space = FakeWorkspace()
        resumed = await run(recording, workspace=space, checkpoint=state)
        assert resumed.files == whole.files
        assert space.target_ is not None
        assert space.target_.assembler.files == expected_files
        assert resumed.turns == whole.turns


async def test_failed_build_gets_fixup_turns_carrying_the_errors(tmp_path: Path) -> None:
    broken = (
        '<edward_sandbox project="x" base="vite-react">\n<file path="src/App.jsx">\n'
        'import Missing from "./Missing.jsx";\nexport default function App() {\n'
        "  return <h1><Missing /></h1>;\n}\n</file>\n</edward_sandbox>\n<edward_done />\n"
    )
    fixed = (
        '<edward_sandbox project="x" base="vite-react">\n<file path="src/Missing.jsx">\n'
        "export default function Missing() {\n  return <span>ok</span>;\n}\n</file>\n"
        "</edward_sandbox>\n<edward_done />\n"
    )
    recording = write(tmp_path, "fix.jsonl", [broken, fixed])
    checkpoints: list[Checkpoint] = []
    result = await run(recording, checkpoints=checkpoints)
    assert (result.status, result.turns) == ("completed", 2)
    fixup = checkpoints[-1].messages[2]
    assert fixup.role == "user"
    assert "unresolved_import" in fixup.content
    assert "src/Missing.jsx" in result.files


async def test_fixup_turns_are_bounded(tmp_path: Path) -> None:
    broken = (
        '<edward_sandbox project="x"><file path="src/App.jsx">\nimport M from "./M.jsx";\n'
        "export default function App() { return <M />; }\n</file></edward_sandbox>"
    )
    recording = write(tmp_path, "stuck.jsonl", [broken, broken, broken, broken])
    result = await run(recording, run_settings=settings(budgets=Budgets(max_fixup_turns=2)))
    assert (result.status, result.turns) == ("failed", 3)
    assert result.postgen is not None
    assert result.postgen["findings"][0]["code"] == "unresolved_import"


async def test_context_too_small_stops_before_calling_the_model() -> None:
    tiny = settings(context_window=9000, budgets=Budgets(reserved_output_tokens=8192))
    result = await run(RECORDINGS / "todo-vite-react.txt", run_settings=tiny)
    assert (result.status, result.stop_reason, result.turns) == (
        "failed",
        "context_limit_exceeded",
        0,
    )
    assert result.errors[0]["code"] == "context_limit_exceeded"


class FailingProvider:
    name = "failing"

    def stream(self, request: ProviderRequest, cancel: object = None) -> ProviderStream:
        async def attempt(outcome: StreamOutcome):  # type: ignore[no-untyped-def]
            raise Overloaded("the provider is overloaded")
            yield ""

        return ProviderStream(attempt, provider="failing", sleep=lambda s: anyio.sleep(0))

    async def aclose(self) -> None:
        pass


async def test_provider_failure_fails_the_run_with_its_code() -> None:
    agent = AgentRun(settings(), FailingProvider(), FakeWorkspace(), FakeTools())  # type: ignore[arg-type]
    result = await agent.run("hi")
    assert (result.status, result.stop_reason) == ("failed", "error")
    assert result.errors[0]["code"] == "provider_overloaded"


async def test_a_sandbox_lost_with_its_node_ends_the_run_in_words(tmp_path: Path) -> None:
    lines = "".join(f"  {n},\n" for n in range(400))
    answer = (
        '<edward_sandbox project="p" base="vite-react">\n'
        '<file path="src/a.js">\nexport const A = 1;\n</file>\n'
        f'<file path="src/b.js">\nexport const B = [\n{lines}];\n</file>\n'
        '<file path="src/c.js">\nexport const C = 3;\n</file>\n'
        "</edward_sandbox>\n<edward_done />\n"
    )
    workspace, events = FakeWorkspace(lost_after="src/a.js"), Collector()
    result = await run(write(tmp_path, "lost.jsonl", [answer]), workspace=workspace, emit=events)
    assert (result.status, result.stop_reason) == ("failed", "error")
    fatal = [e for e in events.of_type("error") if e["severity"] == "fatal"]
    assert [e["code"] for e in fatal] == ["sandbox_lost"]
    assert fatal[0]["message"].startswith("sandbox container 'c0ffee' was lost")
    assert "the chat's next message goes on elsewhere" in fatal[0]["message"]
    assert workspace.target_ is not None
    assert "src/c.js" not in workspace.target_.files  # the answer was cut at the loss
    assert not events.of_type("postgen")  # no build, no render check on a lost sandbox
    assert workspace.render_checks == 0
    assert workspace.closed


async def test_a_sandbox_lost_during_the_build_ends_the_run_with_no_fixup(tmp_path: Path) -> None:
    answer = (
        '<edward_sandbox project="p" base="vite-react">\n'
        '<file path="src/a.js">\nexport const A = 1;\n</file>\n'
        "</edward_sandbox>\n<edward_done />\n"
    )
    workspace, events = FakeWorkspace(lost_after="npm run build"), Collector()
    result = await run(write(tmp_path, "lost.jsonl", [answer]), workspace=workspace, emit=events)
    assert (result.status, result.stop_reason) == ("failed", "error")
    fatal = [e for e in events.of_type("error") if e["severity"] == "fatal"]
    assert [e["code"] for e in fatal] == ["sandbox_lost"]
    assert [e["fixup"] for e in events.of_type("turn_start")] == [False]  # no fix-up turn


async def test_cancel_stops_a_slow_stream_promptly() -> None:
    cancel, events = anyio.Event(), Collector()

    async def emit(event: dict[str, object]) -> None:
        await events(event)
        if event["type"] == "file_start":
            cancel.set()

    slow = ReplayProvider(
        recording_file=RECORDINGS / "todo-vite-react.txt",
        # The first file starts after about 1.5 s (at 20 tokens/s it took 7.5 s), the whole
        # answer takes 13 s: a run that is not cancelled ends "completed" and fails the test.
        pacing=ReplayPacing(tokens_per_second=100.0),
    )
    workspace = FakeWorkspace()
    agent = AgentRun(settings(), slow, workspace, FakeTools(), emit=emit, cancel=cancel)
    with anyio.fail_after(60):  # a safety net for a hang, not a measurement (the box is loaded)
        result = await agent.run("todo")
    assert (result.status, result.stop_reason) == ("cancelled", "cancelled")
    assert len(events.of_type("file_start")) == 1
    assert workspace.closed


async def test_commands_count_against_the_runs_tool_budget(tmp_path: Path) -> None:
    """A command is a tool call: past the budget it is refused, never run (issue 29)."""
    command = '<edward_command command="npm" args=\'["run","lint"]\'>\n'
    answer = f"<edward_sandbox>\n{command * 3}</edward_sandbox>\n<edward_done />"
    recording = write(tmp_path, "commands.jsonl", [answer])
    workspace, events = FakeWorkspace(), Collector()
    budgets = Budgets(max_tool_calls_per_run=2)
    result = await run(
        recording, workspace=workspace, emit=events, run_settings=settings(budgets=budgets)
    )
    ran = [c["argv"] for c in result.commands if c["argv"] == ["npm", "run", "lint"]]
    assert ran == [["npm", "run", "lint"]] * 2
    refused = events.of_type("tool_result")
    assert [(r["tool"], r["request"]) for r in refused] == [("budget", "npm run lint")]
    assert result.usage["tool_calls"] == 2


THROWING = (
    '<edward_sandbox project="x" base="vite-react">\n<file path="src/App.jsx">\n'
    "export default function App() {\n  const user = undefined;\n"
    "  return <h1>{user.name}</h1>;\n}\n</file>\n</edward_sandbox>\n<edward_done />\n"
)
RENDERING = THROWING.replace("const user = undefined;", 'const user = { name: "Ada" };')
THROWN = "TypeError: Cannot read properties of undefined (reading 'name')"


def _render(*errors: PreviewError) -> RenderReport:
    return RenderReport(ok=not errors, errors=list(errors), seconds=1.0)


async def test_an_app_that_throws_when_it_renders_gets_a_fixup_in_the_browsers_words(
    tmp_path: Path,
) -> None:
    thrown = PreviewError(
        "uncaught",
        THROWN,
        "    at App (http://localhost:5173/src/App.jsx:4:20)",
        SourceLocation("src/App.jsx", 3, 18),
        "http://localhost:5173/",
    )
    space, events = FakeWorkspace(), Collector()
    checkpoints: list[Checkpoint] = []
    space.renders = [_render(thrown), _render()]
    recording = write(tmp_path, "throws.jsonl", [THROWING, RENDERING])
    result = await run(recording, workspace=space, emit=events, checkpoints=checkpoints)
    assert (result.status, result.turns) == ("completed", 2)
    fixup = checkpoints[-1].messages[2].content
    assert f"- src/App.jsx:3 [uncaught] {THROWN}" in fixup
    assert "const user = undefined;" in fixup  # the file as it is now
    [preview_error] = events.of_type("preview_error")
    assert preview_error["message"] == THROWN
    renders = [e["render"] for e in events.of_type("postgen")]
    assert [r["ok"] for r in renders] == [False, True]


async def test_a_check_that_could_not_run_never_fails_the_run() -> None:
    space = FakeWorkspace()
    space.renders = [RenderReport.skip("render_check_timeout", "took too long")]
    result = await run(RECORDINGS / "todo-vite-react.txt", workspace=space)
    assert result.status == "completed"
    assert result.postgen is not None
    assert result.postgen["render"]["skipped"] == "render_check_timeout"
    assert space.render_checks == 1


async def test_the_dev_server_is_warmed_before_each_turn_end_releases_the_preview() -> None:
    space = FakeWorkspace()
    events = Collector()

    async def emit(event: dict[str, Any]) -> None:
        await events(event)
        space.turn_ends_seen += event["type"] == "turn_end"

    result = await run(RECORDINGS / "todo-vite-react.txt", workspace=space, emit=emit)
    assert result.status == "completed"
    # The one turn's warm-up came before its turn_end (which releases the preview's hold).
    assert space.warmups == [0]
    assert len(events.of_type("turn_end")) == 1


async def test_the_warm_up_and_the_render_check_start_while_the_build_still_runs() -> None:
    """After a short answer the build is what the run waits for: the dev server's warm-up and
    the render check (which loads the dev server's app, not the build's output) go beside it."""
    space = FakeWorkspace(hold_commands_for_warmup=True)  # the build ends once warmed up
    with anyio.fail_after(10):
        result = await run(RECORDINGS / "todo-vite-react.txt", workspace=space)
    assert result.status == "completed"
    assert space.checks_follow == [True]  # the turn wrote code: post-generation checks it


class RequestsSeen(ReplayProvider):
    """The replay provider, keeping every request it was asked."""

    def __init__(self, recording: Path) -> None:
        super().__init__(recording_file=recording, fast=True)
        self.requests: list[ProviderRequest] = []

    def stream(self, request: ProviderRequest, cancel: Any = None) -> ProviderStream:
        self.requests.append(request)
        return super().stream(request, cancel)


async def test_the_requests_images_go_with_it_on_every_turn_and_replay_says_it_ignores_them() -> (
    None
):
    images = (ChatImage("image/png", png()), ChatImage("image/gif", gif()))
    provider, emit = RequestsSeen(RECORDINGS / "search-then-build.jsonl"), Collector()
    history = (Message("user", "earlier"), Message("assistant", "done"))
    agent = AgentRun(
        settings(),
        provider,
        FakeWorkspace(),
        FakeTools(),
        emit=emit,
        history=history,
        images=images,
    )
    result = await agent.run("make it look like this")
    assert result.turns == 2
    for request in provider.requests:
        asked = [m for m in request.messages if m.images]
        assert [m.content for m in asked] == ["make it look like this"]
        assert asked[0].images == images
    [warning] = emit.of_type("warning")
    assert warning["code"] == "images_ignored"
    assert "2 image(s) ignored" in warning["message"]


async def test_a_real_model_gets_no_notice_and_a_request_without_images_sends_none() -> None:
    provider, emit = RequestsSeen(RECORDINGS / "hello-conversational.txt"), Collector()
    agent = AgentRun(
        settings(provider_name="anthropic"),
        provider,
        FakeWorkspace(),
        FakeTools(),
        emit=emit,
        images=(ChatImage("image/png", png()),),
    )
    await agent.run("hello!")
    assert emit.of_type("warning") == []
    assert len(provider.requests[0].messages[0].images) == 1
    plain = RequestsSeen(RECORDINGS / "hello-conversational.txt")
    await AgentRun(settings(), plain, FakeWorkspace(), FakeTools()).run("hello!")
    assert all(not m.images for m in plain.requests[0].messages)
