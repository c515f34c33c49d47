"""One claimed run, from ``run_started`` to ``run_finished``.

:class:`RunExecution` builds the agent loop for a run the worker claimed (provider with the
user's keys, the chat's workspace, the chat's history, the checkpoint when resuming), and
watches it while it runs:

- a **heartbeat** keeps the queue entry fresh; if the entry was taken over by another worker
  (this one paused for longer than the claim idle time), the run is abandoned here;
- **cancel**: a message on ``kiln:cancel:{run_id}`` or the row's ``cancel_requested`` (polled
  every second) sets the loop's cancel event; a row that ended elsewhere (the stale-run
  reaper) makes the run abandoned too.

An abandoned run stops quietly: its events are muted and it neither finishes the row nor
acknowledges the entry (the new owner does). Otherwise the run always ends with the assistant's
reply stored, the row finished (both in one transaction) and ``run_finished`` as the last
event, also when the loop crashed: status ``failed``, an ``error`` event with the stable code
and the sentence of :func:`app.runs.failures.failure_of` (Docker or Redis down, no room for a
sandbox, an image missing, a full disk), that sentence in ``error``; never a class name or a
traceback, which go to the log.
"""

from __future__ import annotations

import dataclasses
import logging
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import redis.asyncio
import redis.exceptions

from app.agent.budgets import Budgets
from app.agent.checkpoint import Checkpoint
from app.agent.loop import AgentRun, RunResult, RunSettings
from app.agent.selection import SelectedElement, selection_of, user_turn
from app.agent.web_tools import WebTools
from app.agent.workspace import Workspace
from app.chat_images import ChatImage
from app.config import ServiceSettings
from app.errors import KilnError
from app.projects.app_env import env_names
from app.providers import Provider
from app.providers.models import DEFAULT_MAX_OUTPUT_TOKENS
from app.runs.admission import Admission
from app.runs.cancel import cancel_channel
from app.runs.ending import release_slot, run_finished_event
from app.runs.errors import QueueUnavailable
from app.runs.events import RunEventWriter
from app.runs.failures import Failure, failure_of, unfinished_reason
from app.runs.history import chat_history, reply_text
from app.runs.queue import GONE, TAKEN, Delivery, RunQueue
from app.store import FAILED, Chat, Message, Run, Store
from prompts.compose import EnvName
from sandbox import (
    DEFAULT_TEMPLATE,
    SandboxUnavailable,
    docker_tenant,
    hold_preview,
    preview_url,
    release_preview,
)

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0
# Events that change the app's files or packages: the preview's hot updates are held (the
# TTL renewed) until the turn ends, so a whole file importing one not yet written (or a package
# still installing) never shows the dev server's error overlay in the frame.
HOLDING_EVENTS = frozenset({"sandbox_ready", "file_start", "file_end", "install_started"})


@dataclass(frozen=True)
class ResolvedProvider:
    """The provider a run streams from, and what the loop must know about its model."""

    provider: Provider
    name: str
    model: str
    context_window: int
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS


ProviderFactory = Callable[[Run, Mapping[str, str]], ResolvedProvider]
"""``(run, the user's decrypted provider keys) -> provider``; raises ConfigError/ModelRefused."""
WorkspaceFactory = Callable[[Run, Chat], Workspace]
"""``(run, chat) -> the workspace (sandbox) the run writes into``."""


@dataclass(frozen=True)
class WorkerContext:
    """What every run a worker executes shares."""

    name: str
    settings: ServiceSettings
    store: Store
    redis: redis.asyncio.Redis
    queue: RunQueue
    admission: Admission
    workspaces: WorkspaceFactory
    providers: ProviderFactory
    web_tools: WebTools
    budgets: Budgets = field(default_factory=Budgets)


@dataclass
class Outcome:
    """How a run ended, with the loop's result when it got one."""

    status: str
    stop_reason: str
    error: str | None = None
    result: RunResult | None = None


class RunExecution:
    """Executes one claimed run; :meth:`execute` says whether to acknowledge its entry."""

    def __init__(self, context: WorkerContext, delivery: Delivery, run: Run) -> None:
        """``run`` as claimed by this worker."""
        self._ctx, self._delivery, self._run = context, delivery, run
        self._cancel = anyio.Event()
        self._abandoned = False
        self._ended_elsewhere = False
        self._writer: RunEventWriter | None = None
        self._texts: dict[int, list[str]] = {}
        self._sandbox_id: str | None = None
        self._holding = False  # the preview's hot updates are held (sandbox.preview.hmr_hold)

    async def execute(self) -> bool:
        """Run the loop to its end; whether to acknowledge the entry (not if another worker
        took the run over: the entry is that worker's now)."""
        settings = self._ctx.settings
        writer = RunEventWriter(
            self._ctx.store,
            self._ctx.redis,
            self._run.id,
            batch_seconds=settings.event_batch_seconds,
            batch_bytes=settings.event_batch_bytes,
        )
        async with writer:
            self._writer = writer
            # The run's Docker calls count against its user's share of the threads.
            with docker_tenant(self._run.user_id):
                async with anyio.create_task_group() as watchers:
                    await watchers.start(self._listen_for_cancel)
                    watchers.start_soon(self._heartbeat)
                    watchers.start_soon(self._poll_row)
                    outcome = await self._outcome()
                    watchers.cancel_scope.cancel()
                if not self._abandoned:
                    await self._finish(outcome)
        return not self._abandoned or self._ended_elsewhere

    async def _outcome(self) -> Outcome:
        """Run the agent loop; any crash becomes a ``failed`` outcome."""
        try:
            result = await self._run_agent()
        except Exception as exc:
            log.error("run %r crashed:\n%s", self._run.id, traceback.format_exc())
            failure = failure_of(exc)
            await self._emit_failure(failure)
            return Outcome(FAILED, "error", failure.message)
        fatal = next((e["message"] for e in result.errors if e.get("severity") == "fatal"), None)
        error = fatal or unfinished_reason(result)
        return Outcome(result.status, result.stop_reason, error, result)

    async def _run_agent(self) -> RunResult:
        store, run = self._ctx.store, self._run
        checkpoint = await anyio.to_thread.run_sync(store.load_checkpoint, run.id)
        resumed = Checkpoint.from_dict(checkpoint) if checkpoint else None
        await self._emit(self._started_event(resumed))
        if resumed is not None:
            await self._recall_texts(resumed.turn)
        chat, messages = await anyio.to_thread.run_sync(self._chat_and_messages)
        images = await anyio.to_thread.run_sync(store.message_images, run.message_id or "")
        app_env = await anyio.to_thread.run_sync(store.app_variables, chat.id)
        keys = await anyio.to_thread.run_sync(store.provider_keys, run.user_id)
        # In a thread: building an SDK provider imports the SDK (up to a second).
        resolved = await anyio.to_thread.run_sync(self._ctx.providers, run, keys)
        asked = next((m for m in messages if m.id == run.message_id), None)
        selection = selection_of(asked.data) if asked else ()
        try:
            agent = self._agent(resolved, chat, messages, images, selection, env_names(app_env))
            request = user_turn(asked.content, selection) if asked else ""
            result = await agent.run(request, checkpoint=resumed)
        finally:
            with anyio.CancelScope(shield=True):
                await resolved.provider.aclose()
        self._sandbox_id = result.sandbox_id or self._sandbox_id
        return result

    def _agent(
        self,
        resolved: ResolvedProvider,
        chat: Chat,
        messages: list[Message],
        images: tuple[ChatImage, ...],
        selection: tuple[SelectedElement, ...],
        app_env: tuple[EnvName, ...],
    ) -> AgentRun:
        """The agent loop of this run (its message's ``images`` sent with the request, the
        elements selected in the preview first, the app's environment by name), wired to the
        writer, the store and the cancel event."""
        files = tuple(dict.fromkeys(element.file for element in selection))
        return AgentRun(
            dataclasses.replace(self._run_settings(resolved, app_env), selected_files=files),
            resolved.provider,
            self._ctx.workspaces(self._run, chat),
            self._ctx.web_tools,
            emit=self._emit,
            save=self._save,
            cancel=self._cancel,
            history=chat_history(messages, self._run.message_id),
            images=images,
        )

    def _started_event(self, resumed: Checkpoint | None) -> dict[str, Any]:
        event: dict[str, Any] = {"type": "run_started", "run_id": self._run.id}
        event |= {"attempt": self._run.attempts, "resumed": resumed is not None}
        if resumed is not None:
            # Events of turns after this one are played again: clients drop what they showed.
            event["from_turn"] = resumed.turn
        return event

    def _chat_and_messages(self) -> tuple[Chat, list[Message]]:
        chat = self._ctx.store.get_chat(self._run.chat_id)
        if chat is None:
            raise KilnError(f"the chat {self._run.chat_id!r} of run {self._run.id!r} is gone")
        return chat, self._ctx.store.list_messages(chat.id)

    def _run_settings(
        self, resolved: ResolvedProvider, app_env: tuple[EnvName, ...]
    ) -> RunSettings:
        return RunSettings(
            model=resolved.model,
            template=self._run.template or DEFAULT_TEMPLATE,
            provider_name=resolved.name,
            context_window=resolved.context_window,
            max_output_tokens=resolved.max_output_tokens,
            budgets=self._ctx.budgets,
            app_env=app_env,
        )

    async def _recall_texts(self, up_to_turn: int) -> None:
        """On resume, the answer's text of the turns the checkpoint covers (from the store)."""
        stored = await anyio.to_thread.run_sync(
            self._ctx.store.events_of_type, self._run.id, "text"
        )
        for _seq, event in stored:
            turn = int(event.get("turn") or 0)
            if turn <= up_to_turn:
                self._texts.setdefault(turn, []).append(str(event.get("content", "")))

    async def _emit(self, event: dict[str, Any]) -> None:
        """The loop's ``emit``: remember the answer's text, then write the event."""
        kind = event.get("type")
        if kind == "text":
            self._texts.setdefault(int(event.get("turn") or 0), []).append(event["content"])
        elif kind == "sandbox_ready":
            event = await self._sandbox_ready(str(event["sandbox_id"]), event)
        if kind in HOLDING_EVENTS:
            await self._hold_preview()
        assert self._writer is not None
        await self._writer.emit(event)
        if kind == "turn_end":  # its files are whole and its installs done: a complete state
            await self._release_preview()

    async def _hold_preview(self) -> None:
        """Hold the preview's hot updates while files change (again: each file renews the TTL)."""
        if self._sandbox_id is None:
            return
        try:
            await hold_preview(self._ctx.redis, self._sandbox_id)
        except SandboxUnavailable:
            log.warning("the preview of %r is not held: redis failed", self._sandbox_id)
            return
        self._holding = True

    async def _release_preview(self) -> None:
        """Release the hold and say ``preview_ready``: the frame may load the complete state."""
        if not self._holding or self._sandbox_id is None:
            return
        self._holding = False
        try:
            await release_preview(self._ctx.redis, self._sandbox_id)
        except SandboxUnavailable:  # the hold's TTL ends it
            log.warning("the preview of %r was not released: redis failed", self._sandbox_id)
        assert self._writer is not None
        await self._writer.emit({"type": "preview_ready", "sandbox_id": self._sandbox_id})

    async def _emit_failure(self, failure: Failure) -> None:
        """The fatal ``error`` event of a crashed run (if even that cannot be written, the
        row's ``error`` still says it)."""
        event = {"type": "error", "code": failure.code, "message": failure.message}
        try:
            await self._emit({**event, "severity": "fatal"})
        except Exception:
            log.exception("the error event of run %r was not written", self._run.id)

    async def _sandbox_ready(self, sandbox_id: str, event: dict[str, Any]) -> dict[str, Any]:
        """Show the preview while the run streams: on the run, the chat and the event."""
        self._sandbox_id, url = sandbox_id, self._preview_url(sandbox_id)
        store, run = self._ctx.store, self._run

        def remember() -> None:
            store.update_run(run.id, sandbox_id=sandbox_id, preview_url=url)
            store.set_chat_sandbox(run.chat_id, sandbox_id)

        await anyio.to_thread.run_sync(remember)
        return {**event, "preview_url": url}

    async def _save(self, checkpoint: Checkpoint) -> None:
        """The loop's ``save``: the checkpoint, and the turns done so far on the row."""
        store, run_id = self._ctx.store, self._run.id
        await anyio.to_thread.run_sync(store.save_checkpoint, run_id, checkpoint.to_dict())
        await anyio.to_thread.run_sync(lambda: store.update_run(run_id, turns=checkpoint.turn))

    async def _finish(self, outcome: Outcome) -> None:
        """Reply, row and ``run_finished`` (only if this worker still held the run)."""
        store, run = self._ctx.store, self._run
        fields = self._final_fields(outcome)
        reply = (reply_text(self._texts), self._reply_data(outcome, fields))
        finished = await anyio.to_thread.run_sync(
            lambda: store.finish_run(
                run.id,
                outcome.status,
                outcome.stop_reason,
                worker=self._ctx.name,
                reply=reply,
                **fields,
            )
        )
        if finished and self._sandbox_id:
            await anyio.to_thread.run_sync(store.set_chat_sandbox, run.chat_id, self._sandbox_id)
        # The slot is free before ``run_finished`` is out: a client that sends the next
        # message on seeing it must not be told the chat still has an active run.
        await release_slot(self._ctx.admission, run)
        if finished:
            await self._release_preview()  # also after a cancel or a failure
            assert self._writer is not None
            await self._writer.emit(
                run_finished_event(outcome.status, outcome.stop_reason, outcome.error)
            )

    def _final_fields(self, outcome: Outcome) -> dict[str, Any]:
        result = outcome.result
        fields: dict[str, Any] = {"error": outcome.error}
        if result is not None:
            fields |= {"turns": result.turns, "usage": result.usage}
        if self._sandbox_id:
            fields["sandbox_id"] = self._sandbox_id
            fields["preview_url"] = self._preview_url(self._sandbox_id)
        return fields

    def _preview_url(self, sandbox_id: str) -> str | None:
        settings = self._ctx.settings
        try:
            return preview_url(sandbox_id, settings.public_host, settings.port)
        except ValueError:
            return None

    def _reply_data(self, outcome: Outcome, fields: dict[str, Any]) -> dict[str, Any]:
        """The assistant message's ``data``: files, packages, usage and how the run ended."""
        result = outcome.result
        data: dict[str, Any] = {"run_id": self._run.id, "status": outcome.status}
        data |= {"stop_reason": outcome.stop_reason, "error": outcome.error}
        data |= {"sandbox_id": fields.get("sandbox_id"), "preview_url": fields.get("preview_url")}
        if result is not None:
            data |= {"files": result.files, "packages": result.packages, "usage": result.usage}
            data |= {"turns": result.turns, "build": result.build}
        return data

    async def _listen_for_cancel(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Check the row whenever something is published on the run's cancel channel."""
        pubsub = self._ctx.redis.pubsub()
        try:
            await pubsub.subscribe(cancel_channel(self._run.id))
            task_status.started()
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
                if message is not None:
                    await self._check_row()
        except redis.exceptions.RedisError as exc:
            log.warning("cancel channel of run %r lost (polling only): %s", self._run.id, exc)
            task_status.started()
        finally:
            with anyio.CancelScope(shield=True):
                await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _poll_row(self) -> None:
        if self._run.cancel_requested:
            self._cancel.set()
        while True:
            await anyio.sleep(POLL_SECONDS)
            await self._check_row()

    async def _check_row(self) -> None:
        """Cancel on request; abandon if the run ended elsewhere or changed hands."""
        run = await anyio.to_thread.run_sync(self._ctx.store.get_run, self._run.id)
        if run is None or run.terminal:
            self._ended_elsewhere = True
            self._abandon("the run was ended elsewhere (cancelled, or failed by the reaper)")
        elif run.worker != self._ctx.name:
            self._abandon(f"worker {run.worker!r} took the run over")
        elif run.cancel_requested:
            self._cancel.set()

    async def _heartbeat(self) -> None:
        interval = max(0.1, self._ctx.settings.run_claim_idle_seconds / 3)
        while True:
            await anyio.sleep(interval)
            try:
                found = await self._ctx.queue.heartbeat(self._ctx.name, self._delivery.entry_id)
            except QueueUnavailable as exc:
                log.warning("heartbeat of run %r failed: %s", self._run.id, exc)
                continue
            if found == TAKEN:
                self._abandon("another worker took the run over")
                return
            if found == GONE:  # nobody can take it over: the run's record fences it (_watch)
                log.warning(
                    "run %r: its queue entry is gone (Redis lost it); the run goes on here",
                    self._run.id,
                )
                return

    def _abandon(self, why: str) -> None:
        if not self._abandoned:
            log.warning("run %r abandoned by worker %r: %s", self._run.id, self._ctx.name, why)
        self._abandoned = True
        if self._writer is not None:
            self._writer.mute()
        self._cancel.set()
