"""Ending a run outside its worker: run_finished written once, slot released."""

from __future__ import annotations

import pytest
import redis.asyncio

from app.config import ServiceSettings
from app.runs.admission import Admission
from app.runs.ending import end_run, ensure_finished_event, run_finished_event
from app.store import Store
from tests.runs.conftest import new_chat

pytestmark = pytest.mark.anyio


async def test_only_the_first_of_two_enders_writes_run_finished(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    admission = Admission(client, settings)
    user, chat = new_chat(store)
    run = store.create_run(chat.id, user.id, None, None, None)
    await admission.admit(run.id, user.id, chat.id)
    assert await end_run(store, client, admission, run, "failed", "x", error="boom")
    assert not await end_run(store, client, admission, run, "cancelled", "cancelled")
    assert store.events_after(run.id) == [
        (1, {"type": "run_finished", "status": "failed", "stop_reason": "x", "error": "boom"})
    ]
    assert await admission.active_runs() == set()


async def test_the_slot_is_released_before_run_finished_is_written(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    events_at_release: list[int] = []

    class Recording(Admission):
        async def release(self, run_id: str, user_id: str, chat_id: str) -> None:
            events_at_release.append(len(store.events_after(run_id)))
            await super().release(run_id, user_id, chat_id)

    admission = Recording(client, settings)
    user, chat = new_chat(store)
    run = store.create_run(chat.id, user.id, None, None, None)
    await admission.admit(run.id, user.id, chat.id)
    assert await end_run(store, client, admission, run, "cancelled", "cancelled")
    assert events_at_release == [0]
    assert len(store.events_after(run.id)) == 1


async def test_a_missing_run_finished_is_written_once(
    store: Store, client: redis.asyncio.Redis
) -> None:
    user, chat = new_chat(store)
    run = store.create_run(chat.id, user.id, None, None, None)
    store.append_events(run.id, [{"type": "run_started"}])
    store.finish_run(run.id, "completed", "done")
    ended = store.get_run(run.id)
    assert ended is not None
    await ensure_finished_event(store, client, ended)
    await ensure_finished_event(store, client, ended)
    assert [event for _seq, event in store.events_after(run.id)] == [
        {"type": "run_started"},
        run_finished_event("completed", "done", None),
    ]
