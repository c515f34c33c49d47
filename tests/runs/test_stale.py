"""The stale-run reaper."""

from __future__ import annotations

import time

import pytest
import redis.asyncio

from app.config import ServiceSettings
from app.runs.admission import Admission
from app.runs.stale import StaleRunReaper
from app.store import Run, Store
from tests.runs.conftest import new_chat, with_limits

pytestmark = pytest.mark.anyio


async def admitted_run(store: Store, admission: Admission, running: bool) -> Run:
    user, chat = new_chat(store)
    run = store.create_run(chat.id, user.id, None, "replay", "todo-app")
    await admission.admit(run.id, user.id, chat.id)
    if running:
        store.claim_run(run.id, "w1")
    return run


async def test_stale_runs_fail_with_a_clear_reason_and_fresh_ones_stay(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    settings = with_limits(
        settings, queued_timeout_seconds=60, run_deadline_seconds=600, max_active_runs_per_user=10
    )
    admission = Admission(client, settings)
    reaper = StaleRunReaper(store, client, settings, admission)
    queued = await admitted_run(store, admission, running=False)
    running = await admitted_run(store, admission, running=True)
    assert await reaper.reap() == []
    assert await reaper.reap(now=time.time() + 120) == [queued.id]
    assert await reaper.reap(now=time.time() + 1200) == [running.id]
    for run, reason, words in (
        (queued, "queued_timeout", "waited in the queue for more than 60 s"),
        (running, "deadline_exceeded", "longer than its deadline of 600 s"),
    ):
        failed = store.get_run(run.id)
        assert failed is not None
        assert (failed.status, failed.stop_reason) == ("failed", reason)
        assert words in (failed.error or "")
        assert store.events_after(run.id)[-1][1]["type"] == "run_finished"
    assert await admission.active_runs() == set()


async def test_the_reaper_frees_slots_of_runs_that_ended_without_releasing(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    admission = Admission(client, settings)
    run = await admitted_run(store, admission, running=True)
    store.finish_run(run.id, "completed", "done")  # as if the worker died before releasing
    await StaleRunReaper(store, client, settings, admission).reap()
    assert await admission.active_runs() == set()
