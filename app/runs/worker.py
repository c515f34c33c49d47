"""The worker: consumes ``kiln:runs`` and executes each run with the agent loop.

A worker (a task in ``kiln serve``, or a process of its own: ``kiln worker``) reads entries of
the consumer group, at most ``worker_concurrency`` runs at once. For each entry:

1. a run that no longer exists, or has ended, is skipped (its ``run_finished`` is written if a
   crash lost it) and the entry acknowledged;
2. the run is claimed in the store (``queued -> running``; an entry reclaimed from a dead
   worker takes the ``running`` run over, resuming from its checkpoint); a run that fails to
   claim belongs to someone else: the duplicate entry is dropped;
3. a run interrupted more than ``MAX_ATTEMPTS`` times (it keeps killing its workers) fails;
4. :class:`~app.runs.execution.RunExecution` runs it; the entry is acknowledged once the run
   has ended, so a crash at any point leaves it pending, to be reclaimed.

A fresh entry whose user already holds more slots than a waiting user goes to the back of the
queue (:meth:`~app.runs.queue.RunQueue.defer_if_unfair`): slots are shared fairly across users.
Entries idle for ``run_claim_idle_seconds`` (their worker died) are reclaimed with
``XAUTOCLAIM``; a live worker's heartbeats keep its own entries fresh. Every worker also runs the
stale-run reaper now and then. Processing is idempotent: the store's conditional updates let
one worker finish a run, once.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Mapping

import anyio
import anyio.abc
import redis.asyncio

from app.agent.budgets import Budgets
from app.agent.web_tools import WebTools
from app.agent.workspace import SandboxWorkspace, Workspace
from app.config import ServiceSettings
from app.errors import ConfigError, KilnError
from app.logs import log_context
from app.providers import model_limits, resolve_provider
from app.providers.replay import ReplayProvider
from app.runs.admission import Admission
from app.runs.ending import ensure_finished_event, release_slot, run_finished_event
from app.runs.events import persist_and_publish
from app.runs.execution import (
    ProviderFactory,
    ResolvedProvider,
    RunExecution,
    WorkerContext,
    WorkspaceFactory,
)
from app.runs.queue import Delivery, RunQueue
from app.runs.stale import StaleRunReaper
from app.store import FAILED, Chat, Run, Store
from sandbox import EnvReader, SandboxManager, SandboxSettings

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
REAP_INTERVAL_SECONDS = 30.0
READ_BLOCK_MS = 1000
RETRY_PAUSE_SECONDS = 1.0


def worker_name() -> str:
    """A consumer name unique to this process (host, pid and a random part)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class Worker:
    """Consumes the run queue; :meth:`run` until cancelled."""

    def __init__(
        self,
        settings: ServiceSettings,
        store: Store,
        client: redis.asyncio.Redis,
        workspaces: WorkspaceFactory,
        providers: ProviderFactory,
        web_tools: WebTools,
        *,
        name: str | None = None,
        budgets: Budgets | None = None,
        reap_interval: float = REAP_INTERVAL_SECONDS,
        sandboxes: SandboxSettings | None = None,
    ) -> None:
        """``workspaces`` and ``providers`` build each run's sandbox and LLM provider
        (:func:`sandbox_workspaces`, :func:`default_provider_factory` in production);
        ``sandboxes`` are the sandbox manager's settings admission counts against (from the
        environment unless given)."""
        self.name = name or worker_name()
        queue, admission = RunQueue(client), Admission(client, settings, sandboxes)
        self._ctx = WorkerContext(
            self.name,
            settings,
            store,
            client,
            queue,
            admission,
            workspaces,
            providers,
            web_tools,
            budgets or Budgets.from_env(),
        )
        self._reaper = StaleRunReaper(store, client, settings, admission)
        self._reap_interval = reap_interval
        self._slots = anyio.Semaphore(settings.worker_concurrency)
        self._next_reclaim = 0.0

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Consume the queue forever (cancel the calling scope to stop)."""
        await self._ctx.queue.ensure_group()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._reap_forever)
            task_status.started()
            while True:
                await self._slots.acquire()
                delivery = await self._next_delivery()
                if delivery is None:
                    self._slots.release()
                    continue
                tasks.start_soon(self._process_in_slot, delivery)

    async def _next_delivery(self) -> Delivery | None:
        """A reclaimed entry (now and then), else a new one; None if none came."""
        queue, idle = self._ctx.queue, self._ctx.settings.run_claim_idle_seconds
        try:
            if time.monotonic() >= self._next_reclaim:
                self._next_reclaim = time.monotonic() + idle / 2
                reclaimed = await queue.reclaim(self.name, idle)
                if reclaimed:
                    self._next_reclaim = 0.0  # there may be more: look again next time
                    return reclaimed[0]
            fresh = await queue.read(self.name, block_ms=READ_BLOCK_MS)
            if fresh and await queue.defer_if_unfair(fresh[0]):
                return None  # behind a user holding fewer slots: read again at once
        except KilnError as exc:
            log.warning("worker %r cannot read the queue: %s", self.name, exc)
            await anyio.sleep(RETRY_PAUSE_SECONDS)
            if "NOGROUP" in str(exc):  # Redis restarted empty: the group is gone
                await self._recreate_group()
            return None
        return fresh[0] if fresh else None

    async def _recreate_group(self) -> None:
        try:
            await self._ctx.queue.ensure_group()
        except KilnError as exc:
            log.warning("worker %r cannot create the consumer group: %s", self.name, exc)

    async def _process_in_slot(self, delivery: Delivery) -> None:
        # Every line logged for this run (in this task and the tasks it starts) has its run_id.
        with log_context(run_id=delivery.run_id):
            try:
                await self.process(delivery)
            except Exception:
                # Left unacknowledged: the entry is reclaimed after the idle time and retried.
                log.exception("worker %r failed on run %r", self.name, delivery.run_id)
            finally:
                self._slots.release()

    async def process(self, delivery: Delivery) -> None:
        """Handle one queue entry (the steps in the module docstring)."""
        store = self._ctx.store
        run = await anyio.to_thread.run_sync(store.get_run, delivery.run_id)
        if run is None or run.terminal:
            await self._skip(delivery, run)
            return
        claimed = await anyio.to_thread.run_sync(
            lambda: store.claim_run(run.id, self.name, takeover=delivery.reclaimed)
        )
        current = await anyio.to_thread.run_sync(store.get_run, run.id)
        if not claimed or current is None:
            log.info("run %r is not %r's to run; entry dropped", run.id, self.name)
            await self._ctx.queue.ack(delivery.entry_id)
            return
        if current.attempts > MAX_ATTEMPTS:
            await self._give_up(current)
        elif not await RunExecution(self._ctx, delivery, current).execute():
            return  # abandoned: the entry is another worker's now
        await self._ctx.queue.ack(delivery.entry_id)

    async def _skip(self, delivery: Delivery, run: Run | None) -> None:
        """Drop the entry of a missing or ended run, repairing what a crash may have left."""
        if run is not None:
            await ensure_finished_event(self._ctx.store, self._ctx.redis, run)
            await release_slot(self._ctx.admission, run)
        await self._ctx.queue.ack(delivery.entry_id)

    async def _give_up(self, run: Run) -> None:
        """Fail a run that was interrupted too often."""
        error = (
            f"the run was interrupted {run.attempts - 1} times (its worker stopped); "
            "it is not tried again"
        )
        store = self._ctx.store
        ended = await anyio.to_thread.run_sync(
            lambda: store.finish_run(run.id, FAILED, "error", worker=self.name, error=error)
        )
        await release_slot(self._ctx.admission, run)  # before ``run_finished`` is out
        if ended:
            event = run_finished_event(FAILED, "error", error)
            await persist_and_publish(store, self._ctx.redis, run.id, [event])

    async def _reap_forever(self) -> None:
        while True:
            try:
                await self._reaper.reap()
            except KilnError as exc:
                log.warning("stale-run reaper of %r failed: %s", self.name, exc)
            await anyio.sleep(self._reap_interval)


def default_provider_factory(env: Mapping[str, str] | None = None) -> ProviderFactory:
    """Providers as the run asks for them: the user's stored keys first, then ``env``'s."""
    environment = os.environ if env is None else env

    def build(run: Run, api_keys: Mapping[str, str]) -> ResolvedProvider:
        choice = resolve_provider(run.provider, run.model, environment, api_keys=api_keys)
        # Provider-aware: an openai-compatible model's window and cap are settings.
        limits = model_limits(choice.provider, choice.model, environment)
        if choice.provider == "replay":
            folder = EnvReader(environment, ConfigError).optional_path("KILN_RECORDINGS_DIR")
            replay = ReplayProvider(folder)
            return ResolvedProvider(replay, "replay", choice.model, limits.context_window)
        provider = choice.build(environment)
        return ResolvedProvider(
            provider,
            choice.provider,
            choice.model,
            limits.context_window,
            limits.max_output_tokens,
        )

    return build


def sandbox_workspaces(manager: SandboxManager) -> WorkspaceFactory:
    """Each run writes into its chat's sandbox (acquired from ``manager`` on first use)."""

    def build(run: Run, chat: Chat) -> Workspace:
        return SandboxWorkspace(manager, run.template, chat=chat.id, owner=run.user_id)

    return build
