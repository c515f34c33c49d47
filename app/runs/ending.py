"""Ending a run: the terminal ``run_finished`` event and the release of its admission slot.

The worker ends the runs it executes; :func:`end_run` is for everybody else (a cancel of a run
still queued, the stale-run reaper): the store's conditional update decides who ends a run, and
only the winner writes ``run_finished``, so it is written once.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import redis.asyncio

from app.runs.admission import Admission
from app.runs.errors import QueueUnavailable
from app.runs.events import TERMINAL_EVENT, persist_and_publish
from app.store import ACTIVE_STATUSES, Run, Store

log = logging.getLogger(__name__)


def run_finished_event(status: str, stop_reason: str | None, error: str | None) -> dict[str, Any]:
    """The terminal event: ``{type: run_finished, status, stop_reason, error?}``."""
    event: dict[str, Any] = {"type": TERMINAL_EVENT, "status": status, "stop_reason": stop_reason}
    if error:
        event["error"] = error
    return event


async def end_run(
    store: Store,
    client: redis.asyncio.Redis,
    admission: Admission,
    run: Run,
    status: str,
    stop_reason: str,
    *,
    error: str | None = None,
    from_statuses: tuple[str, ...] = ACTIVE_STATUSES,
) -> bool:
    """End ``run`` unless it left ``from_statuses`` meanwhile; whether this call ended it."""
    ended = await anyio.to_thread.run_sync(
        lambda: store.finish_run(
            run.id, status, stop_reason, from_statuses=from_statuses, error=error
        )
    )
    if ended:
        await release_slot(admission, run)  # before ``run_finished``: see RunExecution._finish
        await persist_and_publish(
            store, client, run.id, [run_finished_event(status, stop_reason, error)]
        )
    return ended


async def release_slot(admission: Admission, run: Run) -> None:
    """Release the run's admission slot; a Redis failure is left to the reconciler."""
    try:
        await admission.release(run.id, run.user_id, run.chat_id)
    except QueueUnavailable as exc:
        log.warning("slot of run %r not released (the reaper will): %s", run.id, exc)


async def ensure_finished_event(store: Store, client: redis.asyncio.Redis, run: Run) -> None:
    """Write the missing ``run_finished`` of an ended run (its writer died in between)."""
    last = await anyio.to_thread.run_sync(store.last_seq, run.id)
    if last:
        tail = await anyio.to_thread.run_sync(store.events_after, run.id, last - 1, 1)
        if tail and tail[0][1].get("type") == TERMINAL_EVENT:
            return
    await persist_and_publish(
        store, client, run.id, [run_finished_event(run.status, run.stop_reason, run.error)]
    )
