"""Cancelling a run: mark it in the store, then tell its worker on ``kiln:cancel:{run_id}``.

A running run's worker hears the message at once (and polls the row every second in case the
message was lost); its agent loop stops the provider stream, flushes the files written so far,
and the run ends ``cancelled``. A run still queued has no worker to tell: it is ended here,
and the worker that later reads its queue entry skips it.
"""

from __future__ import annotations

import anyio
import redis.asyncio
import redis.exceptions

from app.runs.admission import Admission
from app.runs.ending import end_run
from app.runs.errors import RunFinished, RunNotFound, redis_errors
from app.store import CANCELLED, QUEUED, Run, Store

CANCEL_REASON = "cancelled"


def cancel_channel(run_id: str) -> str:
    """The Redis channel a run's worker listens on for a cancel."""
    return f"kiln:cancel:{run_id}"


async def request_cancel(
    store: Store, client: redis.asyncio.Redis, admission: Admission, run_id: str
) -> Run:
    """Cancel ``run_id``; the run as it now is.

    :class:`RunNotFound` if there is no such run, :class:`RunFinished` if it had ended.
    """
    run = await anyio.to_thread.run_sync(store.request_cancel, run_id)
    if run is None:
        raise RunNotFound(f"no run {run_id!r}")
    if run.terminal:
        raise RunFinished(f"run {run_id!r} has already ended ({run.status})")
    if run.status == QUEUED:
        await end_run(
            store, client, admission, run, CANCELLED, CANCEL_REASON, from_statuses=(QUEUED,)
        )
    with redis_errors(f"publishing the cancel of run {run_id!r}"):
        await client.publish(cancel_channel(run_id), "cancel")
    current = await anyio.to_thread.run_sync(store.get_run, run_id)
    return current or run
