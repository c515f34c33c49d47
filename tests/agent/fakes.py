"""Stand-ins for the loop's outside world: a sandbox target, a workspace, web tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from app.agent.context import ExistingProject
from app.agent.web_tools import ToolResult
from parser.assemble import FileAssembler
from parser.events import (
    Command,
    EditBlock,
    EditEnd,
    EditStart,
    Event,
    FileContent,
    FileEnd,
    FileStart,
    InstallContent,
)
from sandbox import RenderReport
from sandbox.session_log import AppliedEdit, FailedEdit, RecordSink, SessionLog
from sandbox.writes.edit_blocks import apply_edit_blocks

RECORDINGS = Path(__file__).resolve().parents[3] / "shared" / "recordings"


class FakeTarget:
    """Records what a sandbox session would do; commands "run" with a scripted exit code."""

    def __init__(
        self, on_record: RecordSink, exit_codes: dict[str, int], files: dict[str, str]
    ) -> None:
        self.log = SessionLog()
        self.assembler = FileAssembler()
        self.events: list[Event] = []
        self.existing = dict(files)  # what the sandbox held before the run
        self._blocks: list[tuple[str, str]] = []
        self._on_record = on_record
        self._exit_codes = exit_codes
        self.commands_held: anyio.Event | None = None  # set: commands end only when it is
        # At this file's end (or this command): the sandbox is lost with its node.
        self.lost_after: str | None = None

    @property
    def files(self) -> dict[str, str]:
        """The sandbox's files now: what it held, with what the run wrote."""
        return {**self.existing, **self.assembler.files}

    async def read_file(self, path: str) -> str | None:
        return self.files.get(path)

    async def wait_commands(self) -> None:
        if self.commands_held is not None:
            await self.commands_held.wait()  # else commands run as they are handled

    async def handle(self, event: Event) -> None:
        self.events.append(event)
        self.assembler.apply(event)
        if isinstance(event, FileEnd) and event.path == self.lost_after:
            await self._report_lost()  # as the session tells a flush that found the node gone
        if isinstance(event, EditStart | EditBlock | EditEnd):
            await self._edit(event)
        elif isinstance(event, InstallContent) and event.dependencies:
            record = {"packages": list(event.dependencies), "exit_code": 0}
            self.log.installs.append(record)
            await self._on_record("install", record)
        elif isinstance(event, Command):
            argv = [event.command, *event.args]
            if " ".join(argv) == self.lost_after:  # the node went while the command ran
                await self._report_lost()
                return
            await self._on_record("command_start", {"argv": argv})
            await self._on_record("output", {"line": f"ran {' '.join(argv)}"})
            record = {"argv": argv, "exit_code": self._exit_codes.get(" ".join(argv), 0)}
            self.log.commands.append(record)
            await self._on_record("command", record)

    async def _report_lost(self) -> None:
        lost = "sandbox container 'c0ffee' was lost with its swarm node 'n2'"
        record = {"code": "sandbox_lost", "message": lost, "severity": "recoverable"}
        self.log.errors.append(record)
        await self._on_record("error", record)

    async def finish(self) -> SessionLog:
        return self.log

    async def end_edit(self, event: EditEnd) -> AppliedEdit | FailedEdit | None:
        self.events.append(event)
        self.assembler.apply(event)
        return await self._end_edit(event)

    async def _edit(self, event: EditStart | EditBlock | EditEnd) -> None:
        if isinstance(event, EditStart):
            self._blocks = []
        elif isinstance(event, EditBlock):
            self._blocks.append((event.search, event.replace))
        else:
            await self._end_edit(event)

    async def _end_edit(self, event: EditEnd) -> AppliedEdit | FailedEdit | None:
        """As the session does: blocks applied all or none at the edit's end."""
        current = self.files.get(event.path)
        if not self._blocks:
            return None
        if current is None:
            failed = FailedEdit(event.path, "edit_no_match", "no such file", None)
            self.log.failed_edits.append(failed)
            return failed
        result = apply_edit_blocks(event.path, current, self._blocks)
        if result.content is None:
            failed = FailedEdit(event.path, result.code, result.message, current)
            self.log.failed_edits.append(failed)
            await self._on_record("error", {"code": result.code, "message": result.message})
            return failed
        path, content = event.path, result.content
        self.assembler.apply_all([FileStart(path), FileContent(path, content), FileEnd(path)])
        self.log.applied_edits.append((event.path, result.content))
        await self._on_record("file", {"path": event.path})
        return AppliedEdit(path, content)


class FakeWorkspace:
    """Acquires a :class:`FakeTarget` on first use, like the real one acquires a sandbox."""

    template = "vite-react"

    def __init__(
        self,
        exit_codes: dict[str, int] | None = None,
        project: ExistingProject | None = None,
        *,
        hold_commands: bool = False,
        hold_commands_for_warmup: bool = False,
        version_kinds: tuple[str, ...] = (),
        lost_after: str | None = None,
    ) -> None:
        """``hold_commands``: the target's commands end only once a version was recorded
        (``hold_commands_for_warmup``: once the dev server was warmed up);
        ``version_kinds``: what each recording of a version tells, in order (as ProjectSync
        does: ``version`` or ``version_unchanged``); nothing once they are used up."""
        self._version_kinds = list(version_kinds)
        self._lost_after = lost_after  # the target's sandbox is lost at this file's end
        self.project = project
        self.version_recorded = anyio.Event()
        self._hold_commands = hold_commands
        self._hold_commands_for_warmup = hold_commands_for_warmup
        self.warmed = anyio.Event()
        self.sandbox_id: str | None = None
        self.dev_url: str | None = None
        self.target_: FakeTarget | None = None
        self.closed = False
        self.versions_recorded: list[tuple[int, str]] = []
        self.acquired_early = False
        self._exit_codes = exit_codes or {}
        # What each render check answers, in order (the last one again once used up).
        self.renders: list[RenderReport] = []
        self.render_checks = 0
        # The turn_end events emitted before each warm-up (a test's emit sets turn_ends_seen).
        self.warmups: list[int] = []
        self.checks_follow: list[bool] = []  # each warm-up's check_follows
        self.files_ended_with: list[bool] = []  # each warm-up ahead's check_follows
        self.turn_ends_seen = 0

    def files_ended(self, check_follows: bool) -> None:
        self.files_ended_with.append(check_follows)

    async def warm_preview(self, check_follows: bool = False) -> None:
        self.warmups.append(self.turn_ends_seen)
        self.checks_follow.append(check_follows)
        self.warmed.set()

    async def check_render(self) -> RenderReport | None:
        self.render_checks += 1
        if not self.renders:
            return None
        return self.renders.pop(0) if len(self.renders) > 1 else self.renders[0]

    async def target(self, on_record: RecordSink) -> FakeTarget:
        if self.target_ is None:
            files = self.project.files if self.project else {}
            self.target_ = FakeTarget(on_record, self._exit_codes, files)
            if self._hold_commands:
                self.target_.commands_held = self.version_recorded
            if self._hold_commands_for_warmup:
                self.target_.commands_held = self.warmed
            self.target_.lost_after = self._lost_after
            self.sandbox_id, self.dev_url = "fake1", "http://127.0.0.1:1/"
        return self.target_

    def prefer_template(self, name: str) -> None:
        self.preferred = name

    def acquire_early(self, tasks: TaskGroup, on_record: RecordSink | None = None) -> None:
        self.acquired_early = True

    async def close(self, *, abandon: bool = False) -> SessionLog | None:
        self.closed, self.abandoned = True, abandon
        return self.target_.log if self.target_ else None

    async def record_version(self, turn: int, note: str = "") -> None:
        self.versions_recorded.append((turn, note))
        if self._version_kinds and self.target_ is not None:
            await self.target_._on_record(self._version_kinds.pop(0), {"turn": turn})
        self.version_recorded.set()

    async def existing_project(self) -> ExistingProject | None:
        return self.project


class FakeTools:
    """Web tools with a fixed answer; remembers the queries."""

    def __init__(self, text: str = "Intl.RelativeTimeFormat formats '3 minutes ago'.") -> None:
        self.text = text
        self.queries: list[str] = []

    async def search(self, query: str, max_results: int) -> ToolResult:
        self.queries.append(query)
        return ToolResult("web_search", query, True, self.text)

    async def scrape(self, url: str) -> ToolResult:
        return ToolResult("url_scrape", url, True, "page")


class Collector:
    """An ``emit`` sink that keeps every run event."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def __call__(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]
