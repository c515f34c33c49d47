"""Where each event of a turn goes, the moment the parser emits it.

:meth:`TurnEvents.handle` publishes the event (``emit``), notes it in the turn's facts
(:class:`app.agent.turn_recorder.TurnRecorder`) and in what the run wrote
(:class:`parser.assemble.FileAssembler`), then sends it on: sandbox events to the workspace's
target (a chunk of a file goes straight to :meth:`sandbox.SandboxSession.handle`), an edit's end
to ``end_edit`` (its outcome goes to :class:`app.agent.project_edits.ProjectEdits`), a file that
ended to the rewrite guard, the end of the answer's files (``sandbox_end``) to the workspace's
preview warm-up ahead (``Workspace.files_ended``), ``read``/``web_search``/``url_scrape`` to the
tools within the tool-call budget. The sandbox session's records come back through
:meth:`TurnEvents.on_record`: published as run events and fed to the turn's facts.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from app.agent.budgets import BudgetTracker
from app.agent.cancel_watch import CancelWatch
from app.agent.edit_feedback import read_result
from app.agent.project_edits import ProjectEdits
from app.agent.rewrite_guard import REWRITE_REFUSED
from app.agent.turn_recorder import TurnRecorder
from app.agent.web_tools import ToolResult, WebTools
from app.agent.workspace import Workspace
from app.event_types import event_name_of_record
from app.postgen.pipeline import EventTarget
from parser.assemble import FileAssembler
from parser.events import (
    Command,
    EditBlock,
    EditEnd,
    EditStart,
    Error,
    Event,
    FileContent,
    FileEnd,
    FileStart,
    InstallContent,
    Read,
    SandboxEnd,
    SandboxStart,
    UrlScrape,
    WebSearch,
)
from sandbox import AppliedEdit, SandboxLost

Emit = Callable[[dict[str, Any]], Awaitable[None]]
_SANDBOX_EVENTS = (
    SandboxStart,
    FileStart,
    FileContent,
    FileEnd,
    SandboxEnd,
    InstallContent,
    Command,
    EditStart,
    EditBlock,
)
_VERSION_RECORDS = ("version", "version_unchanged")
MALFORMED_EDIT = "malformed_edit_block"
SANDBOX_LOST = SandboxLost.code


class TurnEvents:
    """The events of a run's turns and the sandbox's records, handled in order."""

    def __init__(
        self,
        emit: Emit,
        workspace: Workspace,
        tools: WebTools,
        tracker: BudgetTracker,
        cancel: CancelWatch,
    ) -> None:
        """Publish through ``emit``; send sandbox events to ``workspace``, tool calls to
        ``tools`` within ``tracker``'s budget; ``cancel`` interrupts what is awaited."""
        self._emit, self._workspace, self._tools = emit, workspace, tools
        self.tracker = tracker
        self._cancel = cancel
        self.assembler = FileAssembler()  # what the run wrote, over all its turns
        self.edits = ProjectEdits.none()  # the project an edit changes, as the run left it
        self.recorder = TurnRecorder(0)
        self.errors: list[dict[str, Any]] = []
        # The words of the sandbox lost with its cluster node (``sandbox_lost``): the run ends.
        self.lost: str | None = None
        self._output: list[str] = []
        self._versions: Counter[str] = Counter()  # version records this run, by kind

    @property
    def unchanged(self) -> bool:
        """The run recorded only versions that changed nothing."""
        return bool(self._versions["version_unchanged"] and not self._versions["version"])

    @property
    def postgen_follows(self) -> bool:
        """Whether this turn will end the loop into post-generation: it wrote code and no
        edit was refused (``app.agent.turn_outcome``'s rules; a wrong guess costs a check)."""
        return bool(self.recorder.files_written) and not self.recorder.edits_refused

    def start_turn(self, turn: int) -> None:
        """A new turn: its facts start empty."""
        self.recorder = TurnRecorder(turn)

    async def handle(self, event: Event, turn: int) -> None:
        """Publish ``event``, note it, and send it where it goes."""
        await self._emit({**event.to_dict(), "turn": turn})
        self.recorder.observe(event)
        self.assembler.apply(event)
        if isinstance(event, InstallContent) and event.framework:
            self._workspace.prefer_template(event.framework)
        elif isinstance(event, SandboxStart) and event.base:
            self._workspace.prefer_template(event.base)
        if isinstance(event, Command) and not self.tracker.allow_tool_call():
            # A command is a tool call: without this a run could hold its worker slot with
            # commands until its deadline (issue 29).
            await self._refuse_over_budget(" ".join((event.command, *event.args)))
        elif isinstance(event, _SANDBOX_EVENTS):
            await self._to_sandbox(event)
        elif isinstance(event, EditEnd):
            target = await self._workspace.target(self.on_record)
            await self._cancel.cancellable(self._end_edit(target, event))
        elif isinstance(event, Read):
            target = await self._workspace.target(self.on_record)
            read = functools.partial(self._read, target, event.path)
            await self._cancel.cancellable(self._tool_call(event.path, read))
        elif isinstance(event, Error) and event.code == MALFORMED_EDIT:
            self.recorder.edit_refused(ToolResult("edit", "malformed", False, event.message))
        elif isinstance(event, WebSearch):
            search = functools.partial(self._tools.search, event.query, event.max_results)
            await self._cancel.cancellable(self._tool_call(event.query, search))
        elif isinstance(event, UrlScrape):
            scrape = functools.partial(self._tools.scrape, event.url)
            await self._cancel.cancellable(self._tool_call(event.url, scrape))

    async def _to_sandbox(self, event: Event) -> None:
        """A sandbox event (a chunk of a file among them) to the session."""
        target = await self._workspace.target(self.on_record)
        await self._cancel.cancellable(target.handle(event))
        if isinstance(event, FileEnd) and event.path in self.edits.files:
            await self._guard_rewrite(target, event.path)
        elif isinstance(event, SandboxEnd):  # the preview's warm-up and check, beside the build
            self._workspace.files_ended(self.postgen_follows)

    async def on_record(self, kind: str, record: Mapping[str, Any]) -> None:
        """A sandbox session record: shown to the user, and fed to the turn's facts."""
        if kind in _VERSION_RECORDS:
            self._versions[kind] += 1
            if kind == "version_unchanged":
                return  # told once, in the run's result (``unchanged``)
        if kind == "output":
            self._output.append(record["line"])
            self.recorder.command_output(record["line"])
        elif kind == "command":
            self.recorder.command_finished(list(record["argv"]), record["exit_code"])
        elif kind == "error":
            self.errors.append(dict(record))
            if record.get("code") == SANDBOX_LOST and self.lost is None:
                self.lost = str(record.get("message", ""))
            if record.get("code") == "command_refused":
                self.recorder.tool_results.append(
                    ToolResult("command", "refused", False, str(record.get("message", "")))
                )
        await self._emit({**record, "type": event_name_of_record(kind)})

    def take_output(self) -> str:
        """The commands' output since the last call, as one text."""
        text, self._output = "\n".join(self._output), []
        return text

    async def error(self, code: str, message: str, severity: str) -> None:
        """An error of the run (not of the sandbox): kept for the result and published."""
        record = {"code": code, "message": message, "severity": severity}
        self.errors.append(record)
        await self._emit({"type": "error", **record})

    async def _read(self, target: EventTarget, path: str) -> ToolResult:
        """A file's current content for ``<edward_read>``."""
        return read_result(path, await target.read_file(path))

    async def _end_edit(self, target: EventTarget, event: EditEnd) -> None:
        """An edit ended: an applied one is a written file; a refused one goes back to the
        model with the file's content it was tried on."""
        outcome = await target.end_edit(event)
        if isinstance(outcome, AppliedEdit):
            self.assembler.put(outcome.path, outcome.content)
            self.recorder.file_written(outcome.path)
            self.edits.applied(outcome.path, outcome.content)
        elif outcome is not None:
            self.recorder.edit_refused(self.edits.refused(outcome))

    async def _guard_rewrite(self, target: EventTarget, path: str) -> None:
        """A whole-file rewrite of an existing file that lost code is undone: the previous
        content is written back and the model told why (``app.agent.rewrite_guard``)."""
        reason = self.edits.rewrite_refusal(path, self.assembler.files.get(path, ""))
        if reason is None:
            return
        old = self.edits.files[path]
        for event in (FileStart(path), FileContent(path, old), FileEnd(path)):
            await self._cancel.cancellable(target.handle(event))
        self.assembler.put(path, old)
        advice = f"Change {path!r} with <edward_edit> blocks, or write it whole without omissions."
        self.recorder.edit_refused(ToolResult("file", path, False, f"{reason}. {advice}"))
        await self.error(REWRITE_REFUSED, reason, "recoverable")

    async def _tool_call(self, request: str, call: Callable[[], Awaitable[ToolResult]]) -> None:
        if not self.tracker.allow_tool_call():
            await self._refuse_over_budget(request)
            return
        result = await call()
        self.recorder.tool_results.append(result)
        await self._emit({"type": "tool_result", **result.to_dict()})

    async def _refuse_over_budget(self, request: str) -> None:
        """A tool call (a read, search, scrape or command) past the run's or turn's budget."""
        result = ToolResult("budget", request, False, "The tool-call budget is spent.")
        self.recorder.tool_results.append(result)
        await self._emit({"type": "tool_result", **result.to_dict()})
