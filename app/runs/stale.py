"""The stale-run reaper: fails runs that waited in the queue or ran for too long.

- a run ``queued`` for more than ``queued_timeout_seconds`` (no worker took it: none is running,
  or all are busy) fails with stop reason ``queued_timeout``;
- a run ``running`` for more than ``run_deadline_seconds`` fails with ``deadline_exceeded``;
  its worker (if it is alive) sees the run ended on its next poll and stops.

Each failure carries a clear ``error`` and a ``run_finished`` event, and frees the admission
slot. The reaper also reconciles admission (:meth:`~app.runs.admission.Admission.reconcile`).
Several reapers (one per worker) may run at once: the store's conditional update lets exactly
one of them end a given run.
"""

from __future__ import annotations

import time

import anyio
import redis.asyncio

from app.config import ServiceSettings
from app.runs.admission import Admission
from app.runs.cancel import cancel_channel
from app.runs.ending import end_run
from app.runs.errors import redis_errors
from app.store import FAILED, QUEUED, RUNNING, Run, Store

QUEUED_TIMEOUT = "queued_timeout"
DEADLINE_EXCEEDED = "deadline_exceeded"


def stale_reason(run: Run, now: float, settings: ServiceSettings) -> tuple[str, str] | None:
    """``(stop_reason, error)`` if ``run`` is stale at ``now``; None otherwise."""
    if run.status == QUEUED and run.created < now - settings.queued_timeout_seconds:
        return QUEUED_TIMEOUT, (
            f"the run waited in the queue for more than {settings.queued_timeout_seconds:g} s "
            "without a worker taking it"
        )
    started = run.started or run.created
    if run.status == RUNNING and started < now - settings.run_deadline_seconds:
        return DEADLINE_EXCEEDED, (
            f"the run took longer than its deadline of {settings.run_deadline_seconds:g} s"
        )
    return None


class StaleRunReaper:
    """Finds and fails stale runs."""

    def __init__(
        self,
        store: Store,
        client: redis.asyncio.Redis,
        settings: ServiceSettings,
        admission: Admission,
    ) -> None:
        """Limits come from ``settings``."""
        self._store, self._redis = store, client
        self._settings, self._admission = settings, admission

    async def reap(self, now: float | None = None) -> list[str]:
        """Fail every stale run; the ids this call failed."""
        now = time.time() if now is None else now
        failed: list[str] = []
        for run in await anyio.to_thread.run_sync(self._store.active_runs):
            stale = stale_reason(run, now, self._settings)
            if stale is None:
                continue
            reason, error = stale
            if await end_run(
                self._store,
                self._redis,
                self._admission,
                run,
                FAILED,
                reason,
                error=error,
                from_statuses=(run.status,),
            ):
                failed.append(run.id)
                await self._stop_worker(run)
        await self._admission.reconcile(self._store)
        return failed

    async def _stop_worker(self, run: Run) -> None:
        """Wake the run's worker (if any) so it notices at once that the run ended."""
        if run.status == RUNNING:
            with redis_errors(f"publishing the end of run {run.id!r}"):
                await self._redis.publish(cancel_channel(run.id), "stale")
