"""Stand-ins for the worker's outside world: workspaces (in memory or in a folder) and replay
providers with chosen recordings and pacing."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import anyio

from app.agent.workspace import Workspace
from app.providers.replay import ReplayPacing, ReplayProvider
from app.runs.execution import ProviderFactory, ResolvedProvider, WorkspaceFactory
from app.store import Chat, Run
from parser.events import Event, FileEnd
from sandbox.session_log import RecordSink
from tests.agent.fakes import RECORDINGS, FakeTarget, FakeWorkspace

TODO = RECORDINGS / "todo-vite-react.txt"
SEARCH_THEN_BUILD = RECORDINGS / "search-then-build.jsonl"
TODO_FILES = [
    "README.md",
    "src/App.jsx",
    "src/components/TodoInput.jsx",
    "src/components/TodoItem.jsx",
    "src/index.css",
    "src/store.js",
]


def replay_factory(
    recording: Path = TODO, tokens_per_second: float | None = None
) -> ProviderFactory:
    """Every run replays ``recording``, at once or at ``tokens_per_second``."""

    def build(run: Run, api_keys: Mapping[str, str]) -> ResolvedProvider:
        pacing = ReplayPacing(tokens_per_second=tokens_per_second)
        provider = ReplayProvider(recording_file=recording, pacing=pacing)
        return ResolvedProvider(provider, "replay", "recording", 200_000)

    return build


class ReadyWorkspace(FakeWorkspace):
    """A :class:`FakeWorkspace` that reports its sandbox as soon as it has one, like
    :class:`~app.agent.workspace.SandboxWorkspace`."""

    async def target(self, on_record: RecordSink) -> FakeTarget:
        first = self.target_ is None
        target = await super().target(on_record)
        if first:
            await on_record("sandbox_ready", {"sandbox_id": self.sandbox_id})
        return target


class MemoryWorkspaces:
    """A :class:`ReadyWorkspace` per run, kept for the test to inspect."""

    def __init__(self) -> None:
        self.by_run: dict[str, FakeWorkspace] = {}

    def __call__(self, run: Run, chat: Chat) -> Workspace:
        workspace = ReadyWorkspace()
        self.by_run[run.id] = workspace
        return workspace


class FolderTarget(FakeTarget):
    """A :class:`FakeTarget` that also writes each finished file into a folder."""

    def __init__(self, folder: Path, on_record: RecordSink) -> None:
        super().__init__(on_record, {}, {})
        self._folder = folder

    async def handle(self, event: Event) -> None:
        await super().handle(event)
        if isinstance(event, FileEnd):
            path = self._folder / event.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.assembler.files[event.path])


class FolderWorkspace(FakeWorkspace):
    """A workspace whose files land in ``folder`` (survives the process, like a sandbox)."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self._folder = folder

    async def target(self, on_record: RecordSink) -> FakeTarget:
        if self.target_ is None:
            self.target_ = FolderTarget(self._folder, on_record)
            self.sandbox_id, self.dev_url = "fake1", "http://127.0.0.1:1/"
        return self.target_


def folder_workspaces(root: Path) -> WorkspaceFactory:
    """Each chat's files go to ``root/<chat id>``."""

    def build(run: Run, chat: Chat) -> Workspace:
        return FolderWorkspace(root / chat.id)

    return build


def folder_files(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by relative path."""
    return {
        str(path.relative_to(folder)): path.read_text()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


class GatedWorkspaces(MemoryWorkspaces):
    """Workspaces whose runs start (are recorded in :attr:`started`) and then wait for the
    test to :meth:`release` them before touching their sandbox."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[str] = []
        self._gates: dict[str, anyio.Event] = {}

    def __call__(self, run: Run, chat: Chat) -> Workspace:
        workspace = GatedWorkspace(self._gates.setdefault(run.id, anyio.Event()))
        self.by_run[run.id] = workspace
        self.started.append(run.id)
        return workspace

    def release(self, run_id: str) -> None:
        """Let the run go on (it then completes at once)."""
        self._gates.setdefault(run_id, anyio.Event()).set()


class GatedWorkspace(ReadyWorkspace):
    """A :class:`ReadyWorkspace` that waits for its gate first."""

    def __init__(self, gate: anyio.Event) -> None:
        super().__init__()
        self._gate = gate

    async def target(self, on_record: RecordSink) -> FakeTarget:
        await self._gate.wait()
        return await super().target(on_record)
