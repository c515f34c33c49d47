"""The agent loop: turns until the resolver says stop, then post-generation.

Each turn streams the provider into a fresh :class:`parser.StreamParser` and handles every event
the moment it is parsed: sandbox events go to the workspace (files stream into the sandbox while
the answer is still arriving), ``web_search``/``url_scrape`` to the web tools, and everything is
published through ``emit`` as a JSON-ready dict. After the turn, ``app.agent.turn_outcome`` decides;
the state is checkpointed (``save``) at every turn boundary, so a run can resume from any of
them. A stop with files written is followed by post-generation (fixes written to the sandbox,
validation, ``npm run build``) and at most ``Budgets.max_fixup_turns`` fix-up turns.

Cancellation (``cancel`` set) stops the provider stream and any sandbox wait promptly; what was
written is still flushed before the run ends, with status ``cancelled``.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from app.agent.budgets import Budgets, BudgetTracker, trim_history
from app.agent.checkpoint import Checkpoint
from app.agent.context import ContextSelection, select_context
from app.agent.edit_feedback import read_result, refused_edit_result
from app.agent.rewrite_guard import REWRITE_REFUSED, refused_rewrite
from app.agent.turn_outcome import PromptKind, Stop, StopReason, matching_rule, resolve_turn_outcome
from app.agent.turn_recorder import TurnRecorder
from app.agent.web_tools import ToolResult, WebTools
from app.agent.workspace import EventTarget, Workspace, likely_to_build
from app.errors import BudgetExceeded, ProviderError, error_code
from app.postgen.pipeline import PostGenReport, post_generate, write_files
from app.providers.base import Message, Provider, ProviderRequest
from app.tokens import TokenCounter
from parser import StreamParser
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
from prompts.compose import Mode, continuation_prompt, fixup_prompt, nudge_prompt, system_prompt
from sandbox import RenderReport, get_template

Emit = Callable[[dict[str, Any]], Awaitable[None]]
Save = Callable[[Checkpoint], Awaitable[None]]
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
    EditEnd,
)
_RECORD_TYPES = {
    "file": "file_written",
    "edit": "edit_applied",
    "install_start": "install_started",
    "install": "install_finished",
    "command_start": "command_started",
    "command": "command_finished",
    "output": "output",
    "warning": "warning",
    "error": "error",
}
NO_CHANGES = "No changes: the answer wrote the same files again"
_VERSION_RECORDS = ("version", "version_unchanged")
_BUILDS_AFTER = {StopReason.CODE_WRITTEN, StopReason.DONE, StopReason.MAX_TURNS}
_FAILED = {StopReason.ERROR, StopReason.CONTEXT_LIMIT_EXCEEDED, StopReason.NO_OUTPUT}
EMPTY_ANSWER = "(no answer)"  # providers refuse empty assistant messages
CONTEXT_BUDGET_TOKENS = 20_000  # an edit turn's file map and file contents, at most...
CONTEXT_WINDOW_SHARE = 4  # ...and at most this fraction of the model's context window
MALFORMED_EDIT = "malformed_edit_block"


@dataclass(frozen=True)
class RunSettings:
    """What one run uses: model, template, limits."""

    model: str
    template: str
    provider_name: str
    context_window: int
    budgets: Budgets = field(default_factory=Budgets)
    mode: Mode = Mode.GENERATE
    max_output_tokens: int = 8192


@dataclass
class RunResult:
    """The outcome of a run, as ``kiln run --json`` prints it."""

    status: str  # completed | failed | cancelled
    stop_reason: str
    turns: int
    files: list[str]
    packages: list[str]
    commands: list[dict[str, Any]]
    build: dict[str, Any] | None
    postgen: dict[str, Any] | None
    sandbox_id: str | None
    dev_url: str | None
    usage: dict[str, Any]
    errors: list[dict[str, Any]]
    # the run recorded no new version, only versions that changed nothing: its answer wrote
    # the same files again (a replayed demo answer does)
    unchanged: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


async def _discard(item: Any) -> None:
    """The default sink: drop."""


class AgentRun:
    """One run of the loop; create one per user message (or per resume)."""

    def __init__(
        self,
        settings: RunSettings,
        provider: Provider,
        workspace: Workspace,
        tools: WebTools,
        *,
        emit: Emit = _discard,
        save: Save = _discard,
        cancel: anyio.Event | None = None,
        history: tuple[Message, ...] = (),
    ) -> None:
        self.settings = settings
        self._provider, self._workspace, self._tools = provider, workspace, tools
        self._emit, self._save = emit, save
        self._cancel = cancel or anyio.Event()
        self._history = history
        self._counter = TokenCounter.for_model(settings.provider_name, settings.model)
        self._tracker = BudgetTracker(settings.budgets)
        self._assembler = FileAssembler()
        self._recorder = TurnRecorder(0)
        self._output: list[str] = []
        self._errors: list[dict[str, Any]] = []
        self._versions: Counter[str] = Counter()  # version records this run, by kind
        self._postgen: PostGenReport | None = None
        self._render_files: dict[str, str] = {}  # files the render check's findings name
        self._active: anyio.CancelScope | None = None
        self._mode, self._template = settings.mode, settings.template
        self._context: ContextSelection | None = None
        self._project_files: dict[str, str] = {}
        self._current: dict[str, str] = {}  # existing files as the run left them so far
        self._edits_seen = (0, 0)  # applied and refused edits of the session already handled
        self._edit_failures: dict[str, int] = {}

    async def run(self, request: str = "", checkpoint: Checkpoint | None = None) -> RunResult:
        """Run (or resume from ``checkpoint``) until the loop stops; never raises for the model's
        or a provider's failures, which end up in the result's ``errors`` and ``stop_reason``."""
        state = checkpoint or Checkpoint.start(request)
        self._tracker = BudgetTracker.from_dict(self.settings.budgets, state.usage)
        log = None
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._watch_cancel)
            try:
                await self._prepare_edit(state)  # before a resume acquires the sandbox
                await self._resume_files(state)
                if likely_to_build(state.request, has_project=self._mode is Mode.EDIT):
                    self._workspace.acquire_early(tasks)  # while the provider thinks
                await self._loop(state)
            finally:
                # Closed here, in the scope that opened the session (task groups must be left
                # in the scope they were entered in); a cancel leaves installs behind.
                log = await self._workspace.close(abandon=self._cancel.is_set())
                tasks.cancel_scope.cancel()
        if self._cancel.is_set():
            state.stop_reason = StopReason.CANCELLED.value
        result = self._result(state, log.commands if log else [])
        await self._emit({"type": "session_complete", **result.to_dict()})
        return result

    async def _watch_cancel(self) -> None:
        await self._cancel.wait()
        if self._active is not None:
            self._active.cancel()

    async def _cancellable(self, work: Awaitable[None]) -> None:
        """Await sandbox or tool work that a cancel must interrupt at once."""
        with anyio.CancelScope() as self._active:
            if self._cancel.is_set():
                self._active.cancel()
            await work
        self._active = None

    async def _resume_files(self, state: Checkpoint) -> None:
        """On resume, the files of earlier turns are written again (the sandbox may be new)."""
        self._assembler.apply_all(_file_events(state.files))
        if state.files:
            target = await self._workspace.target(self._on_record)
            await write_files(target, state.files)

    async def _prepare_edit(self, state: Checkpoint) -> None:
        """A message to a chat whose project has files is an edit: the model is shown the
        project's map and the files most likely concerned (a ``context`` event says which)."""
        if self._mode is not Mode.GENERATE:
            return
        project = await self._workspace.existing_project()
        if project is None:
            return
        self._mode, self._template = Mode.EDIT, project.template
        self._project_files = project.files
        self._current = dict(project.files)
        budget = min(CONTEXT_BUDGET_TOKENS, self.settings.context_window // CONTEXT_WINDOW_SHARE)
        select = functools.partial(
            select_context,
            project.files,
            state.request,
            template=project.template,
            entrypoints=get_template(project.template).entrypoints,
            recent=project.recent,
            budget_tokens=budget,
            count_tokens=self._counter.count,
        )
        # In a thread: scanning a few hundred files' imports takes most of a second.
        self._context = await anyio.to_thread.run_sync(select)
        await self._emit({**self._context.to_event(), "mode": Mode.EDIT.value})

    def _system_prompt(self, fixup: bool) -> str:
        """The turn's system prompt: its mode's, with the project's files in an edit."""
        mode = Mode.FIX if fixup else self._mode
        if self._context is None:
            return system_prompt(self._template, mode)
        return system_prompt(
            self._template,
            mode,
            existing_files=self._context.contents,
            file_map=self._context.file_map,
        )

    async def _loop(self, state: Checkpoint) -> None:
        while state.stop_reason is None:
            await self._turn(state, fixup=False)  # its version is recorded as it ends
            await self._save(state)
        if StopReason(state.stop_reason) not in _BUILDS_AFTER or not state.files:
            return
        if self._cancel.is_set():
            return
        await self._post_generate(state)
        await self._record_version(state, "post-generation fixes")
        budget = self.settings.budgets.max_fixup_turns
        while self._postgen and not self._postgen.ok and state.fixup_turns < budget:
            state.fixup_turns += 1
            state.messages.append(Message("user", self._fixup_prompt(state.fixup_turns)))
            if not await self._turn(state, fixup=True):
                break
            await self._save(state)
            await self._post_generate(state)
            await self._record_version(state, "post-generation fixes")

    async def _record_version(self, state: Checkpoint, note: str) -> None:
        """A version of the chat's project per turn that changed files (a cancelled run's is
        recorded when the workspace closes)."""
        if not self._cancel.is_set():
            await self._cancellable(self._workspace.record_version(state.turn, note))

    async def _post_generate(self, state: Checkpoint) -> None:
        target = await self._workspace.target(self._on_record)
        template = get_template(self._workspace.template)
        files = {**self._project_files, **state.files}  # an edit's project is whole
        report = post_generate(target, template, files, state.packages, self._take_output)
        await self._cancellable(self._keep_postgen(report))

    async def _keep_postgen(self, report: Awaitable[PostGenReport]) -> None:
        postgen = await report
        if postgen.built:  # the app builds: does it render? (issue 23)
            postgen.render = await self._workspace.check_render()
            await self._render_findings(postgen.render)
        self._postgen = postgen
        await self._emit({"type": "postgen", **postgen.to_dict()})

    async def _render_findings(self, render: RenderReport | None) -> None:
        """One ``preview_error`` event per finding; the current files the first findings name
        (at most five: the fix-up prompt shows them whole), for the fix-up prompt."""
        self._render_files = {}
        if render is None:
            return
        target = await self._workspace.target(self._on_record)
        for error in render.findings:
            await self._emit({"type": "preview_error", **error.to_dict()})
            path = error.source.file if error.source else None
            if path and path not in self._render_files and len(self._render_files) < 5:
                content = await target.read_file(path)
                if content is not None:
                    self._render_files[path] = content

    def _fixup_prompt(self, attempt: int) -> str:
        assert self._postgen is not None
        build = self._postgen.build
        render = self._postgen.render
        return fixup_prompt(
            self._postgen.findings,
            render_errors=[e.to_dict() for e in render.findings] if render else [],
            render_files=self._render_files,
            build_output=None if build is None or build.ok else build.output,
            attempt=attempt,
            max_attempts=self.settings.budgets.max_fixup_turns,
            build_output_budget_tokens=self.settings.budgets.continuation_budget_tokens,
            count_tokens=self._counter.count,
        )

    async def _turn(self, state: Checkpoint, *, fixup: bool) -> bool:
        """One turn; returns whether it ran (budgets and the context window may refuse it)."""
        turn = state.turn + 1
        try:
            self._tracker.start_turn()
        except BudgetExceeded as exc:
            state.stop_reason, state.stop_detail = StopReason.MAX_TURNS.value, str(exc)
            return False
        system = self._system_prompt(fixup)
        trimmed = trim_history(
            self._counter,
            system,
            list(self._history),
            state.messages,
            context_window=self.settings.context_window,
            # An answer is never longer than the request's cap: reserving more would waste window.
            reserved_output_tokens=min(
                self.settings.budgets.reserved_output_tokens, self.settings.max_output_tokens
            ),
        )
        if not trimmed.fit.fits:
            await self._error("context_limit_exceeded", trimmed.fit.describe(), "fatal")
            state.stop_reason = StopReason.CONTEXT_LIMIT_EXCEEDED.value
            return False
        # What kiln asked this turn (the request, a continuation, the nudge or a fix-up): shown
        # so a developer can see exactly which prompt led to which answer.
        prompt = state.messages[-1].content
        await self._emit({"type": "turn_start", "turn": turn, "fixup": fixup, "prompt": prompt})
        note = "fix-up turn" if fixup else ""
        answer, fatal = await self._stream_turn(turn, system, trimmed.messages, note)
        state.turn = turn
        state.messages.append(Message("assistant", answer or EMPTY_ANSWER))
        state.files, state.packages = self._assembler.files, list(self._assembler.packages)
        state.usage = self._tracker.to_dict()
        if not fixup or fatal or self._cancel.is_set():
            await self._decide(state, fatal)
        return True

    async def _stream_turn(
        self, turn: int, system: str, messages: list[Message], note: str
    ) -> tuple[str, str | None]:
        """Stream one answer through the parser, then wait for its commands while its version
        (``note``) is recorded; the answer's text and a fatal error, if any."""
        self._recorder = TurnRecorder(turn)
        parser, answer, fatal = StreamParser(), [], None
        request = ProviderRequest(
            model=self.settings.model,
            messages=tuple(messages),
            system=system,
            max_output_tokens=self.settings.max_output_tokens,
            run_turn=turn,
        )
        stream = self._provider.stream(request, self._cancel)
        try:
            async for delta in stream:
                answer.append(delta)
                for event in parser.feed(delta):
                    await self._handle(event, turn)
        except ProviderError as exc:
            fatal = str(exc)
            await self._error(error_code(exc), fatal, "fatal")
        finally:
            await stream.aclose()
        closing = parser.close()
        # A cancel cuts the answer: what the parser ends at the cut (a file half written) was
        # never finished by the model, so it is not handled; the session rolls it back.
        for event in () if self._cancel.is_set() else closing:
            await self._handle(event, turn)
        await self._commands_done(turn, note)
        usage = stream.usage
        self._tracker.record_usage(
            usage.input_tokens, usage.output_tokens, estimated=usage.estimated
        )
        return "".join(answer), fatal

    async def _commands_done(self, turn: int, note: str) -> None:
        """The turn ends once the commands its answer asked for have run (their results are
        this turn's tool results), though the stream did not wait for them. Its version is
        recorded meanwhile: the workspace waits only for what can change the project's files,
        so the build (the slowest command, often still running) and the version overlap."""
        if self._workspace.sandbox_id is not None:
            target = await self._workspace.target(self._on_record)
            await self._cancellable(self._commands_and_version(target, turn, note))

    async def _commands_and_version(self, target: EventTarget, turn: int, note: str) -> None:
        async with anyio.create_task_group() as tasks:
            if not self._cancel.is_set():  # a cancelled run's version is recorded at close
                tasks.start_soon(self._workspace.record_version, turn, note)
            await target.wait_commands()

    async def _decide(self, state: Checkpoint, fatal: str | None) -> None:
        facts = self._recorder.facts(
            max_turns=self.settings.budgets.max_turns,
            budgets_exceeded=self._tracker.exceeded(),
            nudge_used=state.nudge_used,
            cancelled=self._cancel.is_set(),
            fatal_error=fatal,
        )
        outcome = resolve_turn_outcome(facts)
        decision: dict[str, Any] = {"type": "turn_end", "turn": state.turn}
        decision["rule"] = matching_rule(facts).name
        if isinstance(outcome, Stop):
            state.stop_reason, state.stop_detail = outcome.reason.value, outcome.detail
            decision |= {"decision": "stop", "reason": outcome.reason.value}
        else:
            prompt = self._next_prompt(state, outcome.prompt_kind, outcome.tool_results)
            state.messages.append(Message("user", prompt))
            decision |= {"decision": "continue", "prompt": outcome.prompt_kind.value}
        await self._emit(decision)

    def _next_prompt(
        self, state: Checkpoint, kind: PromptKind, results: tuple[ToolResult, ...]
    ) -> str:
        if kind is PromptKind.NUDGE:
            state.nudge_used = True
            return nudge_prompt()
        return continuation_prompt(
            state.request,
            list(state.files),
            results,
            self.settings.budgets.continuation_budget_tokens,
            self._counter.count,
        )

    async def _handle(self, event: Event, turn: int) -> None:
        await self._emit({**event.to_dict(), "turn": turn})
        self._recorder.observe(event)
        self._assembler.apply(event)
        if isinstance(event, InstallContent) and event.framework:
            self._workspace.prefer_template(event.framework)
        elif isinstance(event, SandboxStart) and event.base:
            self._workspace.prefer_template(event.base)
        if isinstance(event, Command) and not self._tracker.allow_tool_call():
            # A command is a tool call: without this a run could hold its worker slot with
            # commands until its deadline (issue 29).
            await self._refuse_over_budget(" ".join((event.command, *event.args)))
        elif isinstance(event, _SANDBOX_EVENTS):
            target = await self._workspace.target(self._on_record)
            await self._cancellable(target.handle(event))
            if isinstance(event, EditEnd):
                await self._after_edit(target)
            elif isinstance(event, FileEnd):
                await self._guard_rewrite(target, event.path)
        elif isinstance(event, Read):
            target = await self._workspace.target(self._on_record)
            read = functools.partial(self._read, target, event.path)
            await self._cancellable(self._tool_call(event.path, read))
        elif isinstance(event, Error) and event.code == MALFORMED_EDIT:
            self._recorder.edit_refused(ToolResult("edit", "malformed", False, event.message))
        elif isinstance(event, WebSearch):
            search = functools.partial(self._tools.search, event.query, event.max_results)
            await self._cancellable(self._tool_call(event.query, search))
        elif isinstance(event, UrlScrape):
            scrape = functools.partial(self._tools.scrape, event.url)
            await self._cancellable(self._tool_call(event.url, scrape))

    async def _read(self, target: EventTarget, path: str) -> ToolResult:
        """A file's current content for ``<edward_read>``."""
        return read_result(path, await target.read_file(path))

    async def _after_edit(self, target: EventTarget) -> None:
        """An edit ended: an applied one is a written file; a refused one goes back to the
        model with the file's current content (after :data:`EDIT_ATTEMPTS`, asking for the
        whole file)."""
        applied, failed = target.log.applied_edits, target.log.failed_edits
        seen_applied, seen_failed = self._edits_seen
        self._edits_seen = (len(applied), len(failed))
        for path, content in applied[seen_applied:]:
            self._assembler.apply_all(_file_events({path: content}))
            self._recorder.file_written(path)
            if path in self._current:
                self._current[path] = content
        for refused in failed[seen_failed:]:
            count = self._edit_failures.get(refused.path, 0) + 1
            self._edit_failures[refused.path] = count
            self._recorder.edit_refused(refused_edit_result(refused, count))

    async def _guard_rewrite(self, target: EventTarget, path: str) -> None:
        """A whole-file rewrite of an existing file that lost code is undone: the previous
        content is written back and the model told why (``app.agent.rewrite_guard``)."""
        old = self._current.get(path)
        if old is None:
            return
        new = self._assembler.files.get(path, "")
        reason = refused_rewrite(path, old, new)
        if reason is None:
            self._current[path] = new
            return
        restore = _file_events({path: old})
        for event in restore:
            await self._cancellable(target.handle(event))
        self._assembler.apply_all(restore)
        advice = f"Change {path!r} with <edward_edit> blocks, or write it whole without omissions."
        self._recorder.edit_refused(ToolResult("file", path, False, f"{reason}. {advice}"))
        await self._error(REWRITE_REFUSED, reason, "recoverable")

    async def _tool_call(self, request: str, call: Callable[[], Awaitable[ToolResult]]) -> None:
        if not self._tracker.allow_tool_call():
            await self._refuse_over_budget(request)
            return
        result = await call()
        self._recorder.tool_results.append(result)
        await self._emit({"type": "tool_result", **result.to_dict()})

    async def _refuse_over_budget(self, request: str) -> None:
        """A tool call (a read, search, scrape or command) past the run's or turn's budget."""
        result = ToolResult("budget", request, False, "The tool-call budget is spent.")
        self._recorder.tool_results.append(result)
        await self._emit({"type": "tool_result", **result.to_dict()})

    async def _on_record(self, kind: str, record: Mapping[str, Any]) -> None:
        """A sandbox session record: shown to the user, and fed to the turn's facts."""
        if kind in _VERSION_RECORDS:
            self._versions[kind] += 1
            if kind == "version_unchanged":
                return  # told once, in the run's result (``unchanged``)
        if kind == "output":
            self._output.append(record["line"])
            self._recorder.command_output(record["line"])
        elif kind == "command":
            self._recorder.command_finished(list(record["argv"]), record["exit_code"])
        elif kind == "error":
            self._errors.append(dict(record))
            if record.get("code") == "command_refused":
                self._recorder.tool_results.append(
                    ToolResult("command", "refused", False, str(record.get("message", "")))
                )
        await self._emit({**record, "type": _RECORD_TYPES.get(kind, kind)})

    def _take_output(self) -> str:
        text, self._output = "\n".join(self._output), []
        return text

    async def _error(self, code: str, message: str, severity: str) -> None:
        record = {"code": code, "message": message, "severity": severity}
        self._errors.append(record)
        await self._emit({"type": "error", **record})

    def _result(self, state: Checkpoint, commands: list[dict[str, Any]]) -> RunResult:
        reason = StopReason(state.stop_reason or StopReason.ERROR.value)
        postgen = self._postgen
        if reason is StopReason.CANCELLED:
            status = "cancelled"
        elif reason in _FAILED or (postgen is not None and not postgen.ok):
            status = "failed"
        else:
            status = "completed"
        build = postgen.build.to_dict() if postgen and postgen.build else None
        return RunResult(
            status=status,
            stop_reason=reason.value,
            turns=state.turn,
            files=sorted(state.files),
            packages=list(state.packages),
            commands=[{"argv": c["argv"], "exit_code": c["exit_code"]} for c in commands],
            build=build,
            postgen=postgen.to_dict() if postgen else None,
            sandbox_id=self._workspace.sandbox_id,
            dev_url=self._workspace.dev_url,
            usage=self._tracker.to_dict(),
            errors=self._errors,
            unchanged=bool(self._versions["version_unchanged"] and not self._versions["version"]),
        )


def _file_events(files: Mapping[str, str]) -> list[Event]:
    events: list[Event] = []
    for path, content in files.items():
        events += [FileStart(path), FileContent(path, content), FileEnd(path)]
    return events
