"""Cancel: a queued run ends at once; a running one is marked and its worker told."""

from __future__ import annotations

import anyio
import pytest
import redis.asyncio

from app.config import ServiceSettings
from app.runs.admission import Admission
from app.runs.cancel import cancel_channel, request_cancel
from app.runs.errors import RunFinished, RunNotFound
from app.store import Run, Store
from tests.runs.conftest import new_chat

pytestmark = pytest.mark.anyio


async def admitted_run(store: Store, admission: Admission) -> Run:
    user, chat = new_chat(store)
    run = store.create_run(chat.id, user.id, None, "replay", "todo-app")
    await admission.admit(run.id, user.id, chat.id)
    return run


async def test_a_queued_run_is_cancelled_here_and_its_slot_freed(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    admission = Admission(client, settings)
    run = await admitted_run(store, admission)
    cancelled = await request_cancel(store, client, admission, run.id)
    assert (cancelled.status, cancelled.stop_reason) == ("cancelled", "cancelled")
    assert store.events_after(run.id) == [
        (1, {"type": "run_finished", "status": "cancelled", "stop_reason": "cancelled"})
    ]
    assert await admission.active_runs() == set()


async def test_a_running_run_is_marked_and_its_worker_told(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    admission = Admission(client, settings)
    run = await admitted_run(store, admission)
    store.claim_run(run.id, "w1")
    pubsub = client.pubsub()
    await pubsub.subscribe(cancel_channel(run.id))
    marked = await request_cancel(store, client, admission, run.id)
    message = None
    with anyio.fail_after(10):
        while message is None:  # the subscription's confirmation comes first, as None
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
    await pubsub.aclose()  # type: ignore[no-untyped-call]
    assert (marked.status, marked.cancel_requested) == ("running", True)
    assert store.events_after(run.id) == []  # the worker writes run_finished
    assert await admission.active_runs() == {run.id}


async def test_an_ended_or_unknown_run_cannot_be_cancelled(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    admission = Admission(client, settings)
    run = await admitted_run(store, admission)
    store.finish_run(run.id, "completed", "done")
    with pytest.raises(RunFinished, match="completed"):
        await request_cancel(store, client, admission, run.id)
    with pytest.raises(RunNotFound, match="'nope'"):
        await request_cancel(store, client, admission, "nope")
