"""RunService.submit/cancel/get_run: admission, persistence and queueing, nothing half made."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import redis.asyncio

from app.config import ServiceSettings
from app.errors import AdmissionRefused, ConfigError
from app.runs.errors import InvalidRunRequest, QueueUnavailable, RunFinished, RunNotFound
from app.runs.queue import RunQueue
from app.runs.service import RunService
from app.store import Store, StoreError
from tests.runs.conftest import new_chat, with_limits
from tests.store.conftest import raw_rows

pytestmark = pytest.mark.anyio


def row_counts(store: Store) -> tuple[int, int]:
    """(messages, runs) in the whole store, read under the repository."""
    (messages,) = raw_rows(store, "SELECT COUNT(*) FROM messages")
    (runs,) = raw_rows(store, "SELECT COUNT(*) FROM runs")
    return int(messages[0]), int(runs[0])  # type: ignore[call-overload]


async def test_submit_writes_the_message_and_a_queued_run_and_queues_it(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    service = RunService(store, client, settings, env={})
    user, chat = new_chat(store)
    run_id, message_id = await service.submit(user.id, chat.id, "make a todo app")
    run = store.get_run(run_id)
    assert run is not None
    assert (run.status, run.message_id, run.provider, run.model) == (
        "queued",
        message_id,
        "replay",
        "todo-app",
    )
    assert [m.content for m in store.list_messages(chat.id)] == ["make a todo app"]
    queue = RunQueue(client)
    await queue.ensure_group()
    delivered = await queue.read("w", block_ms=10)
    assert [d.run_id for d in delivered] == [run_id]
    assert await service.admission.active_runs() == {run_id}


async def test_a_refused_submit_leaves_nothing_behind(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    service = RunService(store, client, settings, env={})
    user, chat = new_chat(store)
    await service.submit(user.id, chat.id, "first")
    with pytest.raises(AdmissionRefused) as refused:
        await service.submit(user.id, chat.id, "second")
    assert refused.value.limit == "chat"
    assert row_counts(store) == (1, 1)


async def test_concurrent_submits_never_exceed_the_limits(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    service = RunService(store, client, with_limits(settings, max_active_runs=3), env={})
    chats = [new_chat(store, f"user{i % 4}") for i in range(12)]
    outcomes: list[str] = []

    async def submit(user_id: str, chat_id: str) -> None:
        try:
            await service.submit(user_id, chat_id, "make an app")
        except AdmissionRefused as exc:
            outcomes.append(exc.limit)
        else:
            outcomes.append("ok")

    async with anyio.create_task_group() as tasks:
        for user, chat in chats * 2:  # every chat asked twice at once
            tasks.start_soon(submit, user.id, chat.id)
    assert outcomes.count("ok") == 3
    assert row_counts(store) == (3, 3)
    assert len(store.active_runs()) == 3


async def test_a_failed_write_releases_the_slot(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service = RunService(store, client, settings, env={})
    user, chat = new_chat(store)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("the store failed: disk I/O error")

    monkeypatch.setattr(store, "create_run", broken)
    with pytest.raises(StoreError, match="disk"):
        await service.submit(user.id, chat.id, "make an app")
    assert row_counts(store) == (0, 0)  # the message went with the failed transaction
    assert await service.admission.active_runs() == set()


async def test_a_failed_enqueue_fails_the_run_and_releases_the_slot(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service = RunService(store, client, settings, env={})
    user, chat = new_chat(store)

    async def broken(run_id: str, user_id: str) -> str:
        raise QueueUnavailable("redis failed while queueing: connection refused")

    monkeypatch.setattr(service.queue, "enqueue", broken)
    with pytest.raises(QueueUnavailable):
        await service.submit(user.id, chat.id, "make an app")
    (run,) = store.list_runs(chat.id)
    assert run.status == "failed"
    assert "could not be queued" in (run.error or "")
    assert await service.admission.active_runs() == set()


@pytest.mark.parametrize(
    ("content", "options", "error", "match"),
    [
        pytest.param("  ", {}, InvalidRunRequest, "empty", id="empty"),
        pytest.param("x" * 100_001, {}, InvalidRunRequest, "100000", id="too-long"),
        pytest.param("hi", {"template": "django"}, InvalidRunRequest, "'django'", id="template"),
        pytest.param("hi", {"provider": "openai"}, ConfigError, "OPENAI_API_KEY", id="no-key"),
    ],
)
async def test_a_bad_request_is_refused_before_anything_is_written(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    content: str,
    options: dict[str, str],
    error: type[Exception],
    match: str,
) -> None:
    service = RunService(store, client, settings, env={})
    user, chat = new_chat(store)
    with pytest.raises(error, match=match):
        await service.submit(user.id, chat.id, content, **options)
    assert row_counts(store) == (0, 0)
    assert await service.admission.active_runs() == set()


async def test_a_stored_key_is_used_to_pick_the_provider(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    service = RunService(store, client, settings, env={})
    user, chat = new_chat(store)
    store.set_provider_key(user.id, "openai", "sk-test")
    run_id, _ = await service.submit(user.id, chat.id, "hi")
    run = store.get_run(run_id)
    assert run is not None
    assert run.provider == "openai"


async def test_other_users_runs_and_chats_are_not_found(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    service = RunService(store, client, settings, env={})
    ann, chat = new_chat(store, "ann")
    bob, _ = new_chat(store, "bob")
    with pytest.raises(RunNotFound):
        await service.submit(bob.id, chat.id, "hi")
    run_id, _ = await service.submit(ann.id, chat.id, "hi")
    with pytest.raises(RunNotFound):
        await service.get_run(bob.id, run_id)
    with pytest.raises(RunNotFound):
        await service.cancel(bob.id, run_id)
    assert (await service.get_run(ann.id, run_id)).id == run_id


async def test_cancel_of_a_queued_run_ends_it_and_twice_is_a_conflict(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    service = RunService(store, client, settings, env={})
    user, chat = new_chat(store)
    run_id, _ = await service.submit(user.id, chat.id, "hi")
    assert (await service.cancel(user.id, run_id)).status == "cancelled"
    with pytest.raises(RunFinished):
        await service.cancel(user.id, run_id)
    async with service.follow(run_id) as events:
        seen = [event async for _seq, event in events]
    assert seen == [{"type": "run_finished", "status": "cancelled", "stop_reason": "cancelled"}]
