"""SandboxWorkspace's early acquire: which runs get their sandbox ahead of need, and that an
early sandbox is used, traded in or released (never left ``in_use``).

The manager is a stand-in recording acquires and releases; the real one is driven through
this path by the live-stack run tests (tests/runs), whose messages all build.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
import pytest

from app.agent.workspace import SandboxWorkspace, likely_to_build
from app.projects.store import VersionInfo
from sandbox import RenderReport, SandboxUnavailable

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("request_text", "has_project", "expected"),
    [
        pytest.param("make me a todo app", False, True, id="build-request"),
        pytest.param("how do I center a div?", False, True, id="question-about-code"),
        pytest.param("hi", False, False, id="greeting"),
        pytest.param("  Thanks!! ", False, False, id="thanks"),
        pytest.param("hello there.", False, False, id="greeting-there"),
        pytest.param("thanks", True, True, id="small-talk-in-a-project"),
        pytest.param("hi, make me a game", False, True, id="greeting-then-request"),
    ],
)
def test_which_runs_get_their_sandbox_early(
    request_text: str, has_project: bool, expected: bool
) -> None:
    assert likely_to_build(request_text, has_project) is expected


@dataclass
class _Handle:
    id: str


@dataclass
class _Manager:
    """Acquires sandboxes named after their template; can fail or hold an acquire open."""

    fail: bool = False
    gate: anyio.Event | None = None
    calls: list[str] = field(default_factory=list)

    async def acquire(self, chat: str, owner: str, template: str) -> _Handle:
        self.calls.append(f"acquire {template}")
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise SandboxUnavailable("docker is away")
        return _Handle(f"sb-{template}")

    async def release(self, sandbox_id: str) -> None:
        self.calls.append(f"release {sandbox_id}")


def _workspace(manager: _Manager) -> SandboxWorkspace:
    return SandboxWorkspace(manager, None, chat="c1", owner="u1")  # type: ignore[arg-type]


async def test_an_answer_that_wrote_nothing_releases_the_early_sandbox() -> None:
    manager = _Manager()
    workspace = _workspace(manager)
    async with anyio.create_task_group() as tasks:
        workspace.acquire_early(tasks)
    assert await workspace.close() is None
    assert manager.calls == ["acquire vite-react", "release sb-vite-react"]


async def test_a_close_while_the_early_acquire_is_under_way_waits_and_releases_it() -> None:
    manager = _Manager(gate=anyio.Event())
    workspace = _workspace(manager)
    async with anyio.create_task_group() as tasks:
        workspace.acquire_early(tasks)  # recorded at once: close() knows of it
        tasks.start_soon(workspace.close)
        await anyio.wait_all_tasks_blocked()
        manager.gate.set()  # type: ignore[union-attr]
    assert manager.calls == ["acquire vite-react", "release sb-vite-react"]


async def test_the_early_sandbox_is_taken_when_the_template_still_matches() -> None:
    manager = _Manager()
    workspace = _workspace(manager)
    async with anyio.create_task_group() as tasks:
        workspace.acquire_early(tasks)
        workspace.acquire_early(tasks)  # once per run
    taken = await workspace._take_early()
    assert taken is not None
    assert taken.sandbox is not None
    assert taken.sandbox.id == "sb-vite-react"
    assert not taken.ready  # no record sink given: target() tells and restores
    assert manager.calls == ["acquire vite-react"]


async def test_a_model_choosing_another_template_trades_the_early_sandbox_in() -> None:
    manager = _Manager()
    workspace = _workspace(manager)
    async with anyio.create_task_group() as tasks:
        workspace.acquire_early(tasks)
    workspace.prefer_template("nextjs")
    assert await workspace._take_early() is None
    assert manager.calls == ["acquire vite-react", "release sb-vite-react"]


async def test_a_failed_early_acquire_is_left_for_the_real_one_to_report() -> None:
    manager = _Manager(fail=True)
    workspace = _workspace(manager)
    async with anyio.create_task_group() as tasks:
        workspace.acquire_early(tasks)
    assert await workspace._take_early() is None
    assert await workspace.close() is None
    assert manager.calls == ["acquire vite-react"]


@dataclass
class _RestoringProject:
    """A chat's project whose restore says so, optionally held open until ``gate`` is set."""

    gate: anyio.Event | None = None
    restored: list[str] = field(default_factory=list)
    cancelled: bool = False

    async def restore_if_stale(self, sandbox_id: str, on_record: object) -> None:
        try:
            if self.gate is not None:
                await self.gate.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        self.restored.append(sandbox_id)
        await on_record("restore", {"phase": "done"})  # type: ignore[operator]


def _restoring_workspace(manager: _Manager, project: _RestoringProject) -> SandboxWorkspace:
    return SandboxWorkspace(
        manager,  # type: ignore[arg-type]
        None,
        chat="c1",
        owner="u1",
        project=project,  # type: ignore[arg-type]
    )


async def test_an_early_sandbox_is_told_and_restored_while_the_provider_thinks() -> None:
    records: list[tuple[str, object]] = []

    async def on_record(kind: str, record: object) -> None:
        records.append((kind, record))

    project = _RestoringProject()
    workspace = _restoring_workspace(_Manager(), project)
    async with anyio.create_task_group() as tasks:
        workspace.acquire_early(tasks, on_record)
    # No event of the answer asked for the sandbox yet: the version is in already.
    assert project.restored == ["sb-vite-react"]
    assert records == [
        ("sandbox_ready", {"sandbox_id": "sb-vite-react"}),
        ("restore", {"phase": "done"}),
    ]
    taken = await workspace._take_early()
    assert taken is not None
    assert taken.ready  # target() neither tells nor restores again


async def test_a_close_before_the_first_event_cancels_the_early_restore() -> None:
    manager, project = _Manager(), _RestoringProject(gate=anyio.Event())
    workspace = _restoring_workspace(manager, project)
    async with anyio.create_task_group() as tasks:
        workspace.acquire_early(tasks, _ignore)
        await anyio.wait_all_tasks_blocked()  # the restore waits (an npm install, say)
        with anyio.fail_after(10):
            assert await workspace.close() is None
    assert project.cancelled
    assert project.restored == []
    assert manager.calls == ["acquire vite-react", "release sb-vite-react"]


@dataclass
class _Log:
    source_state: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    files: list[str] = field(default_factory=lambda: ["src/App.jsx"])
    rolled_back: list[str] = field(default_factory=list)


@dataclass
class _Session:
    """A session whose files are all flushed: only its log counts."""

    log: _Log = field(default_factory=_Log)

    settled: int = 0
    quieted: int = 0

    async def finish(self) -> _Log:
        return self.log

    async def settle(self) -> _Log:
        self.settled += 1
        return self.log

    async def quiet(self) -> _Log:
        self.quieted += 1
        return self.log

    async def written_files(self) -> None:
        return None

    async def abandon(self) -> _Log:
        return self.log


@dataclass
class _Project:
    notes: list[str] = field(default_factory=list)

    async def record(
        self, sandbox_id: str, info: VersionInfo, on_record: object, *, written: object = None
    ) -> None:
        self.notes.append(info.note)


@dataclass
class _Ready:
    dev_url: str = "http://sb-1:5173"


class _ReadyManager(_Manager):
    async def wait_ready(self, sandbox_id: str) -> _Ready:
        return _Ready()


async def _ignore(kind: str, record: object) -> None:
    pass


def _open_workspace(project: _Project) -> tuple[SandboxWorkspace, _Session]:
    workspace = SandboxWorkspace(
        _ReadyManager(),  # type: ignore[arg-type]
        None,
        chat="c1",
        owner="u1",
        project=project,  # type: ignore[arg-type]
    )
    session = _Session()
    workspace._session, workspace.sandbox_id = session, "sb-1"  # type: ignore[assignment]
    workspace._on_record = _ignore
    return workspace, session


@pytest.mark.parametrize(
    ("handled_after_the_turn", "abandon", "notes"),
    [
        pytest.param(0, False, ["", None], id="nothing-since-the-turn"),
        pytest.param(0, True, ["", None], id="cancelled-with-nothing-since-the-turn"),
        pytest.param(2, False, ["", "run ended"], id="written-since-the-turn"),
        pytest.param(1, True, ["", "cancelled"], id="cancelled-after-writing"),
    ],
)
async def test_a_close_records_a_version_only_when_something_was_handled_since_the_last(
    handled_after_the_turn: int, abandon: bool, notes: list[str | None]
) -> None:
    project = _Project()
    workspace, session = _open_workspace(project)
    session.log.source_state = 5  # the turn's files, installs and commands
    await workspace.record_version(1)
    session.log.source_state += handled_after_the_turn
    await workspace.close(abandon=abandon)
    assert project.notes == [note for note in notes if note is not None]


async def test_a_cancel_that_rolled_back_every_file_it_wrote_records_nothing() -> None:
    """Cancelled while writing its first file: nothing of the answer is left, so no version
    (in a new chat it would be the bare template, a version of nothing asked for)."""
    project = _Project()
    workspace, session = _open_workspace(project)
    session.log.source_state = 2  # the install asked for, the file started
    session.log.rolled_back = ["src/App.jsx"]
    await workspace.close(abandon=True)
    assert project.notes == []


async def test_a_close_records_what_a_run_wrote_when_no_version_was_recorded_yet() -> None:
    project = _Project()
    workspace, session = _open_workspace(project)
    session.log.source_state = 3  # a run that failed before its turn ended
    await workspace.close()
    assert project.notes == ["run ended"]


async def test_a_version_is_recorded_only_if_the_files_may_have_changed() -> None:
    project = _Project()
    workspace, session = _open_workspace(project)
    session.log.source_state = 4  # the turn's files
    await workspace.record_version(1)
    await workspace.record_version(1, "post-generation fixes")  # only a build since: no change
    session.log.source_state += 1  # a fix written
    await workspace.record_version(1, "post-generation fixes")
    assert project.notes == ["", "post-generation fixes"]
    assert session.settled == 3  # each waited for the files to settle, never for the build


class _Checks:
    """Render checks that count themselves; each waits for ``gate`` when one is set."""

    def __init__(self) -> None:
        self.started = 0
        self.gate: anyio.Event | None = None

    async def __call__(self, sandbox_id: str, ahead: object = None) -> RenderReport:
        self.started += 1
        number = self.started
        if self.gate is not None:
            await self.gate.wait()
        return RenderReport(ok=True, seconds=number)


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> _Checks:
    async def no_warmup(manager: object, sandbox_id: str) -> None:
        pass

    monkeypatch.setattr("app.agent.workspace.warm_preview_of", no_warmup)
    return _Checks()


@pytest.mark.parametrize(
    ("changed_since", "checks_run"),
    [
        pytest.param(0, 1, id="same-files-the-check-ahead-counts"),
        pytest.param(1, 2, id="a-fix-written-since-checked-again"),
    ],
)
async def test_the_render_check_starts_beside_the_build_and_counts_for_the_same_files(
    checks: _Checks, changed_since: int, checks_run: int
) -> None:
    workspace, session = _open_workspace(_Project())
    workspace._render._check_settled = checks  # type: ignore[method-assign]
    checks.gate = anyio.Event()
    async with anyio.create_task_group() as tasks:
        workspace._render.tasks = tasks
        await workspace.warm_preview(check_follows=True)  # returns with the check running
        await anyio.wait_all_tasks_blocked()
        assert checks.started == 1
        session.log.source_state += changed_since
        checks.gate.set()
        report = await workspace.check_render()
    assert report is not None
    assert (checks.started, report.seconds) == (checks_run, checks_run)


async def test_no_check_ahead_unless_post_generation_follows(checks: _Checks) -> None:
    workspace, _ = _open_workspace(_Project())
    workspace._render._check_settled = checks  # type: ignore[method-assign]
    async with anyio.create_task_group() as tasks:
        workspace._render.tasks = tasks
        await workspace.warm_preview()
        await anyio.wait_all_tasks_blocked()
        assert checks.started == 0


async def test_a_check_ahead_nobody_took_is_stopped_when_the_run_ends(checks: _Checks) -> None:
    workspace, _ = _open_workspace(_Project())
    workspace._render._check_settled = checks  # type: ignore[method-assign]
    checks.gate = anyio.Event()  # never set: the check would wait forever
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            workspace._render.tasks = tasks
            await workspace.warm_preview(check_follows=True)
            await workspace.close()  # the build failed: no check_render came
    assert checks.started == 1


@pytest.mark.parametrize(
    ("changed_after_the_files", "checks_run"),
    [
        pytest.param(0, 1, id="the-check-ahead-of-sandbox-end-counts"),
        pytest.param(1, 2, id="a-file-after-it-checked-again"),
    ],
)
async def test_the_check_starts_at_the_end_of_the_answers_files_while_the_stream_goes_on(
    checks: _Checks, changed_after_the_files: int, checks_run: int
) -> None:
    """``sandbox_end``: the warm-up and check start without ending the stream's files (no
    settle, which would drop a config file being written); the stream's end then waits for
    them instead of checking again, unless a file came since."""
    workspace, session = _open_workspace(_Project())
    workspace._render._check_settled = checks  # type: ignore[method-assign]
    checks.gate = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            workspace._render.tasks = tasks
            workspace.files_ended(check_follows=True)
            await anyio.wait_all_tasks_blocked()
            assert (session.quieted, session.settled, checks.started) == (1, 0, 1)
            session.log.source_state += changed_after_the_files
            await workspace.warm_preview(check_follows=True)  # the stream's end
            await anyio.wait_all_tasks_blocked()
            assert checks.started == checks_run
            checks.gate.set()
            report = await workspace.check_render()
    assert report is not None
    assert report.seconds == checks_run


async def test_a_warm_up_ahead_without_a_check_is_checked_at_the_streams_end(
    checks: _Checks,
) -> None:
    """An edit refused after ``sandbox_end`` may have made the guess wrong either way: a
    warm-up ahead that started no check leaves it to the stream's end."""
    workspace, _ = _open_workspace(_Project())
    workspace._render._check_settled = checks  # type: ignore[method-assign]
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            workspace._render.tasks = tasks
            workspace.files_ended(check_follows=False)
            await anyio.wait_all_tasks_blocked()
            assert checks.started == 0
            await workspace.warm_preview(check_follows=True)
            await anyio.wait_all_tasks_blocked()
            assert checks.started == 1


async def test_a_warm_up_ahead_still_under_way_at_the_close_starts_no_check(
    checks: _Checks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build failed (no check_render) while the warm-up ahead ran: the close does not wait
    for a render check nobody will take."""
    gate = anyio.Event()

    async def slow_warmup(manager: object, sandbox_id: str) -> None:
        await gate.wait()

    monkeypatch.setattr("app.agent.workspace.warm_preview_of", slow_warmup)
    workspace, _ = _open_workspace(_Project())
    workspace._render._check_settled = checks  # type: ignore[method-assign]
    checks.gate = anyio.Event()  # never set: a check would hold the close forever
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            workspace._render.tasks = tasks
            workspace.files_ended(check_follows=True)
            await anyio.wait_all_tasks_blocked()
            async with anyio.create_task_group() as closing:
                closing.start_soon(workspace.close)
                await anyio.wait_all_tasks_blocked()
                gate.set()  # the warm-up ends during the close
    assert checks.started == 0
