"""The agent loop: turns until the resolver says stop, then post-generation.

Each turn streams the provider into a fresh :class:`parser.StreamParser` and hands every event
to :class:`app.agent.turn_events.TurnEvents` the moment it is parsed: sandbox events go to the
workspace (files stream into the sandbox while the answer is still arriving), tool calls to the
tools, and everything is published through ``emit`` as a JSON-ready dict. An edit's project (its
files, its context) is :class:`app.agent.project_edits.ProjectEdits`. After the turn,
``app.agent.turn_outcome`` decides;
the state is checkpointed (``save``) at every turn boundary, so a run can resume from any of
them. A stop with files written is followed by post-generation (fixes written to the sandbox,
validation, ``npm run build``) and at most ``Budgets.max_fixup_turns`` fix-up turns.

Cancellation (``cancel`` set) stops the provider stream and any sandbox wait promptly; what was
written is still flushed before the run ends, with status ``cancelled``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from app.agent.budgets import BudgetTracker, trim_history
from app.agent.cancel_watch import CancelWatch
from app.agent.checkpoint import Checkpoint
from app.agent.project_edits import ProjectEdits
from app.agent.render_findings import publish_render_findings
from app.agent.run_result import RunResult, RunSettings, run_status
from app.agent.turn_events import Emit, TurnEvents
from app.agent.turn_outcome import PromptKind, Stop, StopReason, matching_rule, resolve_turn_outcome
from app.agent.web_tools import ToolResult, WebTools
from app.agent.workspace import Workspace, likely_to_build
from app.chat_images import ChatImage
from app.errors import BudgetExceeded, ProviderError, error_code
from app.postgen.pipeline import EventTarget, PostGenReport, post_generate, write_files
from app.providers.base import Message, Provider, ProviderRequest
from app.tokens import TokenCounter
from parser import StreamParser
from prompts.compose import Mode, continuation_prompt, fixup_prompt, nudge_prompt
from sandbox import SandboxLost, get_template

__all__ = ["EMPTY_ANSWER", "NO_CHANGES", "AgentRun", "Emit", "RunResult", "RunSettings", "Save"]

Save = Callable[[Checkpoint], Awaitable[None]]
NO_CHANGES = "No changes: the answer wrote the same files again"
_BUILDS_AFTER = {StopReason.CODE_WRITTEN, StopReason.DONE, StopReason.MAX_TURNS}
EMPTY_ANSWER = "(no answer)"  # providers refuse empty assistant messages


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
        images: tuple[ChatImage, ...] = (),
    ) -> None:
        self.settings = settings
        self._images = images  # the request's, sent with it on every turn of the run
        self._provider, self._workspace = provider, workspace
        self._emit, self._save = emit, save
        self._cancel = cancel or anyio.Event()
        self._history = history
        self._counter = TokenCounter.for_model(settings.provider_name, settings.model)
        self._tracker = BudgetTracker(settings.budgets)
        self._watch = CancelWatch(self._cancel)
        self._events = TurnEvents(emit, workspace, tools, self._tracker, self._watch)
        # The names post-generation and fix-up turns use (kept while issue 23 changes them).
        self._on_record = self._events.on_record
        self._take_output = self._events.take_output
        self._cancellable = self._watch.cancellable
        self._postgen: PostGenReport | None = None
        self._render_files: dict[str, str] = {}  # files the render check's findings name
        self._lost_said = False  # the sandbox_lost that ends the run was told
        self._mode, self._template = settings.mode, settings.template

    async def run(self, request: str = "", checkpoint: Checkpoint | None = None) -> RunResult:
        """Run (or resume from ``checkpoint``) until the loop stops; never raises for the model's
        or a provider's failures, which end up in the result's ``errors`` and ``stop_reason``."""
        state = checkpoint or Checkpoint.start(request)
        self._tracker = BudgetTracker.from_dict(self.settings.budgets, state.usage)
        self._events.tracker = self._tracker
        log = None
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._watch.watch)
            try:
                await self._say_images_ignored(checkpoint)
                await self._prepare_edit(state, tasks)  # before a resume acquires the sandbox
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

    async def _say_images_ignored(self, checkpoint: Checkpoint | None) -> None:
        """Replay plays a recording: the request's images reach no model, and the run says so
        (once, not again on resume)."""
        if self._images and checkpoint is None and self.settings.provider_name == "replay":
            count = len(self._images)
            message = f"the recorded demo does not look at images: {count} image(s) ignored"
            await self._emit({"type": "warning", "code": "images_ignored", "message": message})

    def _with_images(self, messages: list[Message]) -> list[Message]:
        """This run's messages, the request (the first) carrying the message's images: every
        turn of the run (continuations, fix-ups) still shows them; earlier messages of the
        chat never send theirs again (app/runs/history.py)."""
        if not self._images or not messages:
            return messages
        return [dataclasses.replace(messages[0], images=self._images), *messages[1:]]

    async def _resume_files(self, state: Checkpoint) -> None:
        """On resume, the files of earlier turns are written again (the sandbox may be new)."""
        for path, content in state.files.items():
            self._events.assembler.put(path, content)
        if state.files:
            target = await self._workspace.target(self._on_record)
            await write_files(target, state.files)

    async def _prepare_edit(self, state: Checkpoint, tasks: TaskGroup) -> None:
        """A message to a chat whose project has files is an edit: the model is shown the
        project's map and the files most likely concerned (a ``context`` event says which).
        Its sandbox is acquired (and restored) as soon as the project's template is known,
        while the context is chosen."""
        if self._mode is not Mode.GENERATE:
            return
        project = await self._workspace.existing_project()
        if project is None:
            return
        self._mode, self._template = Mode.EDIT, project.template
        self._workspace.acquire_early(tasks, self._on_record)  # an edit always builds
        edits = await ProjectEdits.select(
            project,
            state.request,
            selected=self.settings.selected_files,
            context_window=self.settings.context_window,
            count_tokens=self._counter.count,
        )
        self._events.edits = edits
        assert edits.context is not None  # select() always chooses one
        await self._emit({**edits.context.to_event(), "mode": Mode.EDIT.value})

    @property
    def _project_files(self) -> dict[str, str]:
        """The whole project of an edit, as the run left it so far (empty when generating)."""
        return self._events.edits.files

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
        while (
            not await self._ended_by_loss(state)
            and self._postgen
            and not self._postgen.ok
            and state.fixup_turns < budget
        ):
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
        self._render_files = {}
        if postgen.built:  # the app builds: does it render? (issue 23)
            postgen.render = await self._workspace.check_render()
            target = await self._workspace.target(self._on_record)
            self._render_files = await publish_render_findings(postgen.render, self._emit, target)
        self._postgen = postgen
        await self._emit({"type": "postgen", **postgen.to_dict()})

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
        system = self._events.edits.system_prompt(
            self._template, Mode.FIX if fixup else self._mode, self.settings.app_env
        )
        trimmed = trim_history(
            self._counter,
            system,
            list(self._history),
            self._with_images(state.messages),
            context_window=self.settings.context_window,
            # An answer is never longer than the request's cap: reserving more would waste window.
            reserved_output_tokens=min(
                self.settings.budgets.reserved_output_tokens, self.settings.max_output_tokens
            ),
        )
        if not trimmed.fit.fits:
            await self._events.error("context_limit_exceeded", trimmed.fit.describe(), "fatal")
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
        assembler = self._events.assembler
        state.files, state.packages = assembler.files, list(assembler.packages)
        state.usage = self._tracker.to_dict()
        if not fixup or fatal or self._cancel.is_set():
            await self._decide(state, fatal)
        return True

    async def _stream_turn(
        self, turn: int, system: str, messages: list[Message], note: str
    ) -> tuple[str, str | None]:
        """Stream one answer through the parser, then wait for its commands while its version
        (``note``) is recorded; the answer's text and a fatal error, if any."""
        self._events.start_turn(turn)
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
                    await self._events.handle(event, turn)
                if self._events.lost is not None:
                    break  # nothing more can be written: the answer is cut here
        except ProviderError as exc:
            fatal = str(exc)
            await self._events.error(error_code(exc), fatal, "fatal")
        finally:
            await stream.aclose()
        closing = parser.close()
        lost = await self._sandbox_lost()
        # A cancel cuts the answer: what the parser ends at the cut (a file half written) was
        # never finished by the model, so it is not handled; the session rolls it back. A
        # lost sandbox takes nothing more (the project store keeps what was written).
        for event in () if self._cancel.is_set() or lost else closing:
            await self._events.handle(event, turn)
        if lost is None:
            await self._commands_done(turn, note)
            lost = await self._sandbox_lost()
        usage = stream.usage
        self._tracker.record_usage(
            usage.input_tokens, usage.output_tokens, estimated=usage.estimated
        )
        return "".join(answer), fatal or lost

    async def _ended_by_loss(self, state: Checkpoint) -> bool:
        """Whether the sandbox was lost (during post-generation): the run ends there, with no
        fix-up turn for a sandbox that is gone."""
        lost = await self._sandbox_lost()
        if lost is not None:
            state.stop_reason, state.stop_detail = StopReason.ERROR.value, lost
        return lost is not None

    async def _sandbox_lost(self) -> str | None:
        """The run's fatal error once its sandbox was lost with its cluster node (said once):
        what it wrote is kept, and the chat's next message starts on another node."""
        lost = self._events.lost
        if lost is not None and not self._lost_said:
            self._lost_said = True
            words = f"{lost}: the run stops here; the chat's next message goes on elsewhere"
            await self._events.error(SandboxLost.code, words, "fatal")
        return lost

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
                # Beside the build, before turn_end releases the preview: the module warm-up
                # (sandbox/preview/module_warmup.py), then, when post-generation follows, its
                # render check (it loads the dev server's app, not the build's output).
                tasks.start_soon(self._workspace.warm_preview, self._events.postgen_follows)
            await target.wait_commands()

    async def _decide(self, state: Checkpoint, fatal: str | None) -> None:
        facts = self._events.recorder.facts(
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

    def _result(self, state: Checkpoint, commands: list[dict[str, Any]]) -> RunResult:
        reason = StopReason(state.stop_reason or StopReason.ERROR.value)
        postgen = self._postgen
        build = postgen.build.to_dict() if postgen and postgen.build else None
        return RunResult(
            status=run_status(reason, postgen.ok if postgen else None),
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
            errors=self._events.errors,
            unchanged=self._events.unchanged,
        )
