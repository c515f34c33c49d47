"""The worker with the replay provider and in-memory workspaces (no Docker)."""

from __future__ import annotations

import contextlib
import errno
import json
import secrets
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import docker
import docker.errors
import pytest
import redis.asyncio
import redis.exceptions
import requests.exceptions

from app.agent.checkpoint import Checkpoint
from app.chat_images import ChatImage
from app.config import ServiceSettings
from app.errors import ConfigError
from app.event_types import BY_NAME
from app.projects.app_env import app_env_lookup
from app.providers import Message as PromptMessage
from app.runs.admission import Admission
from app.runs.errors import QueueUnavailable
from app.runs.execution import ProviderFactory, ResolvedProvider, WorkspaceFactory
from app.runs.failures import SENTENCES
from app.runs.follow import RunFollower
from app.runs.queue import RunQueue
from app.runs.service import RunService
from app.runs.stale import StaleRunReaper
from app.runs.worker import Worker, default_provider_factory, sandbox_workspaces
from app.service.workspaces import project_store, project_workspaces
from app.store import AppVariable, Run, Store
from sandbox.docker_boundary import call, run_wrapped
from sandbox.errors import ImageMissing, SandboxCapacity, SandboxError
from sandbox.images.templates import WORKSPACE
from sandbox.lifecycle.manager import SandboxManager
from sandbox.lifecycle.registry import SandboxRecord
from sandbox.preview.hmr_hold import preview_held
from sandbox.redis_boundary import wrap_redis_errors
from sandbox.session_log import RecordSink
from tests.agent.fakes import FakeTarget, FakeTools
from tests.image_samples import gif, png
from tests.providers.wire_servers import SENT_KEY, Answer, WireServer, anthropic_error
from tests.runs.conftest import new_chat, with_limits
from tests.runs.fakes import (
    SEARCH_THEN_BUILD,
    TODO,
    TODO_FILES,
    GatedWorkspaces,
    MemoryWorkspaces,
    ReadyWorkspace,
    replay_factory,
)
from tests.sandbox.docker_support import (
    leftovers,
    remove_npm_proxy,
    sandbox_files_tar,
    settings_for,
    sweep,
)

pytestmark = pytest.mark.anyio

HANG_GUARD_SECONDS = 60  # a broken worker fails the test instead of hanging it


@contextlib.asynccontextmanager
async def running_workers(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    workspaces: WorkspaceFactory,
    providers: ProviderFactory,
    count: int = 1,
) -> AsyncIterator[list[Worker]]:
    """``count`` workers consuming the queue until the block ends."""
    workers = [
        Worker(settings, store, client, workspaces, providers, FakeTools(), name=f"w{i}")
        for i in range(count)
    ]
    async with anyio.create_task_group() as tasks:
        for worker in workers:
            await tasks.start(worker.run)
        yield workers
        tasks.cancel_scope.cancel()


async def events_until_finished(
    store: Store, client: redis.asyncio.Redis, run_id: str, limit: float = HANG_GUARD_SECONDS
) -> list[dict[str, Any]]:
    """Every event of the run, waiting for ``run_finished`` (at most ``limit`` seconds)."""
    with anyio.fail_after(limit):
        async with RunFollower(store, client, run_id, poll_seconds=0.2) as follower:
            return [event async for _seq, event in follower]


async def queue_drained(client: redis.asyncio.Redis) -> None:
    """Wait until every queue entry is acknowledged (a worker acks just after the run ends)."""
    with anyio.fail_after(HANG_GUARD_SECONDS):
        while await RunQueue(client).pending_count():
            await anyio.sleep(0.02)


async def first_file_written(store: Store, run_id: str) -> None:
    """Wait until the run wrote its first file (it is under way, holding its queue entry)."""
    with anyio.fail_after(HANG_GUARD_SECONDS):
        while not store.events_of_type(run_id, "file_end"):
            await anyio.sleep(0.02)


async def submit(service: RunService, store: Store, content: str = "make a todo app") -> Run:
    user, chat = new_chat(store)
    run_id, _message_id = await service.submit(user.id, chat.id, content, "replay", "todo-app")
    run = store.get_run(run_id)
    assert run is not None
    return run


def _undeclared(event: dict[str, Any]) -> str:
    """What ``event`` has that app/event_types.py does not declare (or lacks), else ``""``."""
    declared = BY_NAME.get(event["type"])
    if declared is None:
        return f"{event['type']!r} is not declared"
    fields = {name.rstrip("?") for name in declared.all_fields}
    required = {name for name in declared.all_fields if not name.endswith("?")}
    extra, missing = set(event) - fields - {"type"}, required - set(event)
    return (
        f"{event['type']!r}: extra {sorted(extra)}, missing {sorted(missing)}"
        if extra or missing
        else ""
    )


async def test_a_run_completes_with_its_reply_and_events_in_order(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    service, workspaces = RunService(store, client, settings), MemoryWorkspaces()
    async with running_workers(settings, store, client, workspaces, replay_factory()):
        run = await submit(service, store)
        events = await events_until_finished(store, client, run.id)
        await queue_drained(client)
    types = [event["type"] for event in events]
    assert types[0] == "run_started"
    assert types[-2:] == ["session_complete", "run_finished"]
    assert [_undeclared(event) for event in events if _undeclared(event)] == []
    ready = next(event for event in events if event["type"] == "sandbox_ready")
    assert ready["preview_url"] == "http://fake1.preview.kiln.localhost:8000/"
    # The preview is complete once, after the turn's files and installs, before the end.
    assert types.count("preview_ready") == 1
    assert types.index("turn_end") < types.index("preview_ready")
    assert types.index("file_end") < types.index("preview_ready")
    assert not await preview_held(client, "fake1")
    assert events[-1] == {
        "type": "run_finished",
        "status": "completed",
        "stop_reason": "code_written",
    }
    finished = store.get_run(run.id)
    assert finished is not None
    assert (finished.status, finished.turns, finished.sandbox_id) == ("completed", 1, "fake1")
    assert finished.preview_url == "http://fake1.preview.kiln.localhost:8000/"
    assert finished.usage["total_tokens"] > 0
    reply = store.list_messages(run.chat_id)[-1]
    assert reply.role == "assistant"
    assert reply.data is not None
    assert reply.data["files"] == TODO_FILES
    assert reply.data["packages"] == ["zustand"]
    assert reply.data["usage"] == finished.usage
    chat = store.get_chat(run.chat_id)
    assert chat is not None
    assert chat.sandbox_id == "fake1"
    assert await service.admission.active_runs() == set()


async def test_the_slot_is_free_before_run_finished_is_out(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A client that sends the next message on seeing ``run_finished`` (two hosts' test) was
    # refused: "this chat has 1 active run(s)", the slot was released after the event.
    seen_at_release: list[list[str]] = []
    release = Admission.release

    async def recording_release(self: Admission, run_id: str, user_id: str, chat_id: str) -> None:
        seen_at_release.append([event["type"] for _seq, event in store.events_after(run_id)])
        await release(self, run_id, user_id, chat_id)

    monkeypatch.setattr(Admission, "release", recording_release)
    service, workspaces = RunService(store, client, settings), MemoryWorkspaces()
    async with running_workers(settings, store, client, workspaces, replay_factory()):
        run = await submit(service, store)
        await events_until_finished(store, client, run.id)
        await queue_drained(client)
    assert seen_at_release, "the slot was never released"
    assert "run_finished" not in seen_at_release[0]


async def test_a_follow_up_in_a_demo_chat_replays_from_the_first_turn(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    """The chat's first exchange is history: the replay plays turn 1 again, not "no output"."""
    service, workspaces = RunService(store, client, settings), MemoryWorkspaces()
    async with running_workers(settings, store, client, workspaces, replay_factory()):
        first = await submit(service, store)
        await events_until_finished(store, client, first.id)
        await queue_drained(client)
        run_id, _ = await service.submit(
            first.user_id, first.chat_id, "now make it blue", "replay", "todo-app"
        )
        events = await events_until_finished(store, client, run_id)
    assert events[-1] == {
        "type": "run_finished",
        "status": "completed",
        "stop_reason": "code_written",
    }


async def test_content_is_stored_in_batches_not_per_token(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    service = RunService(store, client, settings)
    async with running_workers(settings, store, client, MemoryWorkspaces(), replay_factory()):
        run = await submit(service, store)
        events = await events_until_finished(store, client, run.id)
    contents = [e for e in events if e["type"] == "file_content"]
    assert len(contents) <= 2 * len(TODO_FILES)  # hundreds of token deltas, merged per file


async def test_a_crashing_provider_fails_the_run_with_a_clear_error(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    def refuse(run: Run, api_keys: object) -> ResolvedProvider:
        raise ConfigError("no API key for 'openai': set OPENAI_API_KEY or store a key")

    service = RunService(store, client, settings)
    async with running_workers(settings, store, client, MemoryWorkspaces(), refuse):
        run = await submit(service, store)
        events = await events_until_finished(store, client, run.id)
    assert [e["type"] for e in events] == ["run_started", "error", "run_finished"]
    assert (events[1]["code"], events[1]["severity"]) == ("config_error", "fatal")
    assert events[-1]["status"] == "failed"
    assert "OPENAI_API_KEY" in events[-1]["error"]
    failed = store.get_run(run.id)
    assert failed is not None
    assert failed.status == "failed"
    assert "OPENAI_API_KEY" in (failed.error or "")
    assert await service.admission.active_runs() == set()


async def test_a_crash_inside_the_loop_still_ends_with_run_finished(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    def broken_workspace(run: Run, chat: object) -> Any:
        raise RuntimeError("the sandbox layer exploded")

    service = RunService(store, client, settings)
    async with running_workers(settings, store, client, broken_workspace, replay_factory()):
        run = await submit(service, store)
        events = await events_until_finished(store, client, run.id)
    assert events[0]["type"] == "run_started"
    # A bug: the user reads a sentence and the code, the log has the exception.
    assert events[-2] == {
        "type": "error",
        "code": "internal_error",
        "message": SENTENCES["internal_error"],
        "severity": "fatal",
    }
    assert events[-1] == {
        "type": "run_finished",
        "status": "failed",
        "stop_reason": "error",
        "error": SENTENCES["internal_error"],
    }


async def test_cancel_mid_stream_stops_within_a_second_and_keeps_partial_files(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    tokens_per_second = 200.0
    service, workspaces = RunService(store, client, settings), MemoryWorkspaces()
    providers = replay_factory(tokens_per_second=tokens_per_second)
    async with running_workers(settings, store, client, workspaces, providers):
        run = await submit(service, store)
        async with RunFollower(store, client, run.id, poll_seconds=0.2) as follower:
            async for _seq, event in follower:
                if event["type"] == "file_end":
                    break
        held_mid_answer = await preview_held(client, "fake1")
        await service.cancel(run.user_id, run.id)
        cancelled_at = store.last_seq(run.id)
        events = await events_until_finished(store, client, run.id)
    assert held_mid_answer
    assert [e["type"] for e in events].count("preview_ready") == 1
    assert not await preview_held(client, "fake1")  # a cancel releases the preview
    after_cancel = store.events_after(run.id, cancelled_at)
    streamed = sum(
        len(e.get("content", ""))
        for _, e in after_cancel
        if e["type"] in ("text", "file_content", "thinking_content")
    )
    # Replay sends ~4 characters per token: one second of stream is ~800 characters.
    assert streamed < tokens_per_second * 4
    assert events[-1]["status"] == "cancelled"
    reply = store.list_messages(run.chat_id)[-1]
    assert reply.data is not None
    assert 1 <= len(reply.data["files"]) < len(TODO_FILES)
    target = workspaces.by_run[run.id].target_
    assert target is not None
    assert set(reply.data["files"]) <= set(target.assembler.files)


async def test_a_run_failed_by_the_reaper_is_dropped_quietly_by_its_worker(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    service = RunService(store, client, settings)
    reaper = StaleRunReaper(store, client, settings, service.admission)
    providers = replay_factory(tokens_per_second=200.0)
    async with running_workers(settings, store, client, MemoryWorkspaces(), providers):
        run = await submit(service, store)
        await first_file_written(store, run.id)
        assert await reaper.reap(now=time.time() + 10 * settings.run_deadline_seconds) == [run.id]
        await events_until_finished(store, client, run.id)
        await queue_drained(client)  # the worker acknowledged the entry of the ended run
    events = [event for _seq, event in store.events_after(run.id, 0, limit=10_000)]
    finishes = [event for event in events if event["type"] == "run_finished"]
    assert [event["stop_reason"] for event in finishes] == ["deadline_exceeded"]
    assert not [event for event in events if event["type"] == "session_complete"]
    assert [m.role for m in store.list_messages(run.chat_id)] == ["user"]
    ended = store.get_run(run.id)
    assert ended is not None
    assert ended.status == "failed"


async def test_a_run_whose_queue_entry_redis_lost_goes_on_and_completes(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    # A Redis killed while its append-only write was postponed came back without the run's
    # entry (measured in CI: the worker then abandoned the run, which hung until its deadline).
    service = RunService(store, client, settings)
    providers = replay_factory(tokens_per_second=200.0)
    async with running_workers(settings, store, client, MemoryWorkspaces(), providers):
        run = await submit(service, store)
        await first_file_written(store, run.id)
        queue = RunQueue(client)
        for entry in await client.xrange(queue.stream):
            await client.xdel(queue.stream, entry[0])
        events = await events_until_finished(store, client, run.id)
    assert events[-1]["status"] == "completed", events[-3:]
    assert [m.role for m in store.list_messages(run.chat_id)] == ["user", "assistant"]


async def test_a_resumed_run_continues_from_its_checkpoint(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    service, workspaces = RunService(store, client, settings), MemoryWorkspaces()
    run = await submit(service, store, "a relative time app")
    checkpoint = Checkpoint.start("a relative time app")
    checkpoint.turn = 1
    checkpoint.messages += [
        PromptMessage("assistant", '<web_search query="Intl.RelativeTimeFormat examples"/>'),
        PromptMessage("user", "Search result: Intl.RelativeTimeFormat formats it. Continue."),
    ]
    store.save_checkpoint(run.id, checkpoint.to_dict())
    store.append_events(run.id, [{"type": "text", "content": "Searching first.", "turn": 1}])
    async with running_workers(
        settings, store, client, workspaces, replay_factory(SEARCH_THEN_BUILD)
    ):
        events = await events_until_finished(store, client, run.id)
    started = next(e for e in events if e["type"] == "run_started")
    assert (started["resumed"], started["from_turn"]) == (True, 1)
    assert {e["turn"] for e in events if e["type"] == "file_start"} == {2}
    assert events[-1]["status"] == "completed"
    reply = store.list_messages(run.chat_id)[-1]
    assert reply.content.startswith("Searching first.")
    assert reply.data is not None
    assert reply.data["files"] == ["src/App.jsx", "src/index.css"]


async def test_an_ended_run_in_the_queue_is_skipped(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    user, chat = new_chat(store)
    run = store.create_run(chat.id, user.id, None, "replay", "todo-app")
    store.finish_run(run.id, "cancelled", "cancelled")
    queue = RunQueue(client)
    await queue.ensure_group()
    await queue.enqueue(run.id)
    async with running_workers(settings, store, client, MemoryWorkspaces(), replay_factory()):
        # Waited for in the store, not with a follower: a follower stops waiting for the end
        # event of a run that ended long ago, and a loaded machine may start the workers late.
        with anyio.fail_after(HANG_GUARD_SECONDS):
            while not store.events_of_type(run.id, "run_finished"):
                await anyio.sleep(0.02)
        await queue_drained(client)
    events = [event for _seq, event in store.events_after(run.id)]
    assert events == [{"type": "run_finished", "status": "cancelled", "stop_reason": "cancelled"}]
    assert store.list_messages(chat.id) == []


async def test_many_runs_on_two_workers_each_run_exactly_once(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = with_limits(settings, max_active_runs_per_user=20, worker_concurrency=3)
    # One user's 8 new chats each wait for a sandbox of their own.
    monkeypatch.setenv("KILN_MAX_SANDBOXES_PER_USER", "20")
    service = RunService(store, client, settings)
    async with running_workers(
        settings, store, client, MemoryWorkspaces(), replay_factory(), count=2
    ) as workers:
        runs = [await submit(service, store) for _ in range(8)]
        for run in runs:
            await events_until_finished(store, client, run.id)
    for run in runs:
        types = [event["type"] for _seq, event in store.events_after(run.id)]
        assert types.count("run_started") == 1
        assert types.count("run_finished") == 1
        assert [m.role for m in store.list_messages(run.chat_id)] == ["user", "assistant"]
    ran_by = {store.get_run(run.id).worker for run in runs}  # type: ignore[union-attr]
    assert ran_by <= {worker.name for worker in workers}


async def runs_started(workspaces: GatedWorkspaces, count: int) -> list[str]:
    """Wait until ``count`` runs have started; the ids in the order they started."""
    with anyio.fail_after(HANG_GUARD_SECONDS):
        while len(workspaces.started) < count:
            await anyio.sleep(0.02)
    return list(workspaces.started)


@pytest.mark.parametrize(
    "ends_first", [pytest.param("ann", id="ann"), pytest.param("bob", id="bob")]
)
async def test_a_third_user_waits_for_one_run_not_for_two_busy_users(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis, ends_first: str
) -> None:
    """Ann and Bob queue 2 runs each, then Cy 1, and the worker has 2 slots: Ann and Bob get
    one each, and Cy the first slot that frees up, whoever's run ends (first come would give
    Ann both slots and Cy the fifth; fewest slots alone would give Bob's second run the slot
    his first freed)."""
    settings = with_limits(settings, worker_concurrency=2)
    service, workspaces = RunService(store, client, settings), GatedWorkspaces()
    runs = {}
    for name in ("ann", "ann", "bob", "bob", "cy"):
        user, chat = new_chat(store, name)
        run_id, _ = await service.submit(user.id, chat.id, "make a todo app", "replay", "todo")
        runs[run_id] = name
    async with running_workers(settings, store, client, workspaces, replay_factory()):
        first_two = await runs_started(workspaces, 2)
        assert sorted(runs[run_id] for run_id in first_two) == ["ann", "bob"]
        workspaces.release(next(r for r in first_two if runs[r] == ends_first))
        third = (await runs_started(workspaces, 3))[2]
        assert runs[third] == "cy"
        for run_id in runs:
            workspaces.release(run_id)
        for run_id in runs:
            assert (await events_until_finished(store, client, run_id))[-1]["status"] == (
                "completed"
            )
        await queue_drained(client)
    assert len(workspaces.started) == 5  # every run ran once, none twice


@pytest.fixture
async def sandbox_manager(redis_url: str) -> AsyncIterator[SandboxManager]:
    """A manager of a kiln instance of this test; everything it made is removed (and checked)."""
    instance = f"test-runs-{secrets.token_hex(4)}"
    docker_client = docker.from_env()
    opened = await SandboxManager.open(settings_for(instance, redis_url))
    try:
        async with opened:
            yield opened
        for record in await opened.list():
            await opened.destroy(record.id)
        await remove_npm_proxy(opened.client, opened.settings.instance)
    finally:
        await opened.aclose()
        left = leftovers(docker_client, instance)
        sweep(docker_client, instance, redis_url)
        docker_client.close()
    assert not left, f"the worker test left Docker objects behind: {left}"


@pytest.mark.docker
@pytest.mark.slow
async def test_the_todo_recording_runs_into_a_real_sandbox(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    sandbox_manager: SandboxManager,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The worker's part, within its hang guard: the render check after the build (a browser
    # in a container, ~3-17 s on a loaded host) has tests of its own, end to end included.
    monkeypatch.setenv("KILN_RENDER_CHECK", "0")
    service = RunService(store, client, settings)
    workspaces = sandbox_workspaces(sandbox_manager)
    async with running_workers(settings, store, client, workspaces, replay_factory()):
        run = await submit(service, store)
        events = await events_until_finished(store, client, run.id)
    assert events[-1] == {
        "type": "run_finished",
        "status": "completed",
        "stop_reason": "code_written",
    }
    assert [_undeclared(event) for event in events if _undeclared(event)] == []  # real records
    finished = store.get_run(run.id)
    assert finished is not None
    assert finished.sandbox_id is not None
    assert finished.preview_url == f"http://{finished.sandbox_id}.preview.kiln.localhost:8000/"
    ready = next(event for event in events if event["type"] == "sandbox_ready")
    assert ready["preview_url"] == finished.preview_url
    reply = store.list_messages(run.chat_id)[-1]
    assert reply.data is not None
    assert reply.data["files"] == TODO_FILES
    assert reply.data["build"]["ok"]
    container = await sandbox_manager.container_for(finished.sandbox_id)
    listing = await call(container.exec_run, ["cat", "src/App.jsx"], workdir=WORKSPACE)
    assert listing.exit_code == 0
    assert b"Todos" in listing.output


async def test_a_worker_recreates_a_lost_consumer_group(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis
) -> None:
    service = RunService(store, client, settings)
    async with running_workers(settings, store, client, MemoryWorkspaces(), replay_factory()):
        await client.flushdb()  # as if Redis restarted without persistence
        run = await submit(service, store)
        events = await events_until_finished(store, client, run.id)
    assert events[-1]["status"] == "completed"


@pytest.fixture
def chat_server() -> Iterator[WireServer]:
    """A local OpenAI-compatible server (Chat Completions) for the worker's real provider."""
    with WireServer("openai") as wire:
        yield wire


TODO_ANSWER = tuple(TODO.read_text()[i : i + 400] for i in range(0, len(TODO.read_text()), 400))


def compatible_env(server: WireServer, window: int, cap: int) -> dict[str, str]:
    """The settings of an ``openai-compatible`` server with ``window`` and output ``cap``."""
    return {
        "KILN_OPENAI_COMPATIBLE_BASE_URL": f"{server.url}/v1",
        "KILN_OPENAI_COMPATIBLE_CONTEXT_WINDOW": str(window),
        "KILN_OPENAI_COMPATIBLE_MAX_OUTPUT_TOKENS": str(cap),
    }


async def test_an_openai_compatible_run_uses_its_configured_window_and_cap(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    chat_server: WireServer,
) -> None:
    env = compatible_env(chat_server, 65_536, 2_048)
    chat_server.script(*[Answer(TODO_ANSWER, input_tokens=1_234, output_tokens=567)] * 3)
    service = RunService(store, client, settings, env=env)
    factory = default_provider_factory(env)
    async with running_workers(settings, store, client, MemoryWorkspaces(), factory):
        user, chat = new_chat(store)
        run_id, _ = await service.submit(
            user.id, chat.id, "make a todo app", "openai-compatible", "qwen2.5-coder:32b"
        )
        events = await events_until_finished(store, client, run_id)
    assert events[-1]["status"] == "completed"
    seen = chat_server.requests[0]
    assert (seen.body["model"], seen.body["max_tokens"]) == ("qwen2.5-coder:32b", 2_048)
    finished = store.get_run(run_id)
    assert finished is not None
    first = finished.usage["turns"][0]
    assert (first["input_tokens"], first["output_tokens"]) == (1_234, 567)


async def test_an_openai_compatible_server_without_usage_gets_an_estimate_marked_as_such(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    chat_server: WireServer,
) -> None:
    env = compatible_env(chat_server, 65_536, 2_048)
    chat_server.script(*[Answer(TODO_ANSWER, usage=False)] * 3)
    service = RunService(store, client, settings, env=env)
    factory = default_provider_factory(env)
    async with running_workers(settings, store, client, MemoryWorkspaces(), factory):
        user, chat = new_chat(store)
        run_id, _ = await service.submit(user.id, chat.id, "make a todo app", "openai-compatible")
        events = await events_until_finished(store, client, run_id)
    assert events[-1]["status"] == "completed"
    finished = store.get_run(run_id)
    assert finished is not None
    first = finished.usage["turns"][0]
    assert first["estimated"] is True
    assert first["input_tokens"] > 1_000  # kiln's system prompt and the request, counted
    assert first["output_tokens"] > 1_000  # the whole todo app, counted


async def test_a_messages_images_reach_the_model_on_every_turn_byte_for_byte(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    chat_server: WireServer,
) -> None:
    """Submitted with the message, stored, loaded by the worker, sent by the real SDK."""
    env = compatible_env(chat_server, 65_536, 2_048) | {"KILN_OPENAI_COMPATIBLE_IMAGES": "true"}
    chat_server.script(*[Answer(TODO_ANSWER)] * 3)
    service = RunService(store, client, settings, env=env)
    images = (ChatImage("image/png", png()), ChatImage("image/gif", gif()))
    async with running_workers(
        settings, store, client, MemoryWorkspaces(), default_provider_factory(env)
    ):
        user, chat = new_chat(store)
        run_id, _ = await service.submit(
            user.id, chat.id, "make a todo app like this", "openai-compatible", images=images
        )
        events = await events_until_finished(store, client, run_id)
    assert events[-1]["status"] == "completed"
    assert chat_server.requests
    for seen in chat_server.requests:
        assert seen.images() == [(image.media_type, image.data) for image in images]
    assert not [event for event in events if event.get("code") == "images_ignored"]


async def test_an_openai_compatible_window_too_small_fails_before_any_request(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    chat_server: WireServer,
) -> None:
    env = compatible_env(chat_server, 1_000, 500)  # far below kiln's system prompt
    chat_server.script(Answer())
    service = RunService(store, client, settings, env=env)
    factory = default_provider_factory(env)
    async with running_workers(settings, store, client, MemoryWorkspaces(), factory):
        user, chat = new_chat(store)
        run_id, _ = await service.submit(user.id, chat.id, "make a todo app", "openai-compatible")
        events = await events_until_finished(store, client, run_id)
    errors = [event for event in events if event["type"] == "error"]
    assert errors[0]["code"] == "context_limit_exceeded"
    assert "1000" in errors[0]["message"]
    assert events[-1]["status"] == "failed"
    assert chat_server.requests == []


ECHOED_KEY = "sk-ant-test-" + "k3y" * 10  # what a user stored or the server's env holds


@pytest.mark.parametrize(
    "stored",
    [pytest.param(True, id="the-users-stored-key"), pytest.param(False, id="the-servers-env-key")],
)
async def test_a_key_an_upstream_echoes_in_its_error_is_stored_nowhere(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis, stored: bool
) -> None:
    """A gateway that quotes the key it was sent in its 401 (the run's error and its events
    kept it in plaintext in kiln.db): the error still says what happened, without the key."""
    with WireServer("anthropic") as server:
        server.script(anthropic_error(401, "authentication_error", f"bad key {SENT_KEY}"))
        env = {"KILN_ANTHROPIC_BASE_URL": server.url}
        env |= {} if stored else {"ANTHROPIC_API_KEY": ECHOED_KEY}
        service = RunService(store, client, settings, env=env)
        factory = default_provider_factory(env)
        async with running_workers(settings, store, client, MemoryWorkspaces(), factory):
            user, chat = new_chat(store)
            if stored:
                store.set_provider_key(user.id, "anthropic", ECHOED_KEY)
            run_id, _ = await service.submit(user.id, chat.id, "make a todo app", "anthropic")
            events = await events_until_finished(store, client, run_id)
        assert server.requests, events
        assert any(ECHOED_KEY in value for value in server.requests[0].headers.values())
    errors = [event for event in events if event["type"] == "error"]
    assert errors[0]["code"] == "provider_auth"
    assert "bad key [redacted]" in errors[0]["message"]
    finished = store.get_run(run_id)
    assert finished is not None
    assert "bad key [redacted]" in (finished.error or "")
    with contextlib.closing(sqlite3.connect(settings.database_path)) as database:
        dumped = "\n".join(database.iterdump())
    assert "bad key [redacted]" in dumped
    assert ECHOED_KEY not in dumped


def _docker_refusal(explanation: str) -> BaseException:
    """What the Docker boundary raises when the engine answers ``explanation``."""

    def refuse() -> None:
        raise docker.errors.APIError("500 Server Error", explanation=explanation)

    try:
        run_wrapped(refuse)
    except SandboxError as exc:
        return exc
    raise AssertionError("run_wrapped did not raise")


def _docker_down() -> BaseException:
    def unreachable() -> None:
        raise requests.exceptions.ConnectionError("Connection refused: /var/run/docker.sock")

    try:
        run_wrapped(unreachable)
    except SandboxError as exc:
        return exc
    raise AssertionError("run_wrapped did not raise")


def _redis_down() -> BaseException:
    try:
        with wrap_redis_errors("acquire sandbox"):
            raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6390")
    except SandboxError as exc:
        return exc
    raise AssertionError("wrap_redis_errors did not raise")


class _FailingWorkspace(ReadyWorkspace):
    """A workspace whose sandbox cannot be had: ``target`` raises ``error``."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self._error = error

    async def target(self, on_record: RecordSink) -> FakeTarget:
        raise self._error


@pytest.mark.parametrize(
    ("error", "code"),
    [
        pytest.param(
            _docker_refusal(
                "could not find an available, non-overlapping IPv4 address pool among the "
                "defaults to assign to the network"
            ),
            "sandbox_capacity",
            id="network-pool-exhausted",
        ),
        pytest.param(
            SandboxCapacity("this host holds 9 sandboxes, the limit is 9 (KILN_MAX_SANDBOXES)"),
            "sandbox_capacity",
            id="max-sandboxes",
        ),
        pytest.param(_docker_down(), "docker_unavailable", id="docker-down"),
        pytest.param(_redis_down(), "redis_unavailable", id="redis-down"),
        pytest.param(
            QueueUnavailable("redis unreachable while reading"), "queue_unavailable", id="queue"
        ),
        pytest.param(
            ImageMissing("cannot create sandbox 'x' from 'kiln/sandbox-vanilla'"),
            "image_missing",
            id="image-missing",
        ),
        pytest.param(
            _docker_refusal("write /var/lib/docker/x: no space left on device"),
            "disk_full",
            id="disk-full-docker",
        ),
        pytest.param(
            OSError(errno.ENOSPC, "No space left on device"), "disk_full", id="disk-full-host"
        ),
    ],
)
async def test_an_infrastructure_failure_ends_the_run_with_a_code_and_a_sentence(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    error: BaseException,
    code: str,
) -> None:
    service = RunService(store, client, settings)
    workspaces = lambda run, chat: _FailingWorkspace(error)  # noqa: E731
    async with running_workers(settings, store, client, workspaces, replay_factory()):
        run = await submit(service, store)
        events = await events_until_finished(store, client, run.id)
    failure = next(event for event in events if event["type"] == "error")
    assert failure == {
        "type": "error",
        "code": code,
        "message": SENTENCES[code],
        "severity": "fatal",
    }
    assert events[-1]["status"] == "failed"
    assert events[-1]["error"] == SENTENCES[code]
    _assert_no_internals(events, error)
    finished = store.get_run(run.id)
    assert finished is not None
    assert (finished.status, finished.error) == ("failed", SENTENCES[code])


def _assert_no_internals(events: list[dict[str, Any]], error: BaseException) -> None:
    """No class name, traceback, task group or docker/redis detail reaches the user."""
    shown = json.dumps(events)
    for internal in ("TaskGroup", "Traceback", "ExceptionGroup", type(error).__name__, "docker:"):
        assert internal not in shown


@pytest.mark.docker
async def test_a_run_that_finds_the_host_full_ends_with_sandbox_capacity(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis, redis_url: str
) -> None:
    """A real manager whose host may hold one sandbox, already held: nothing reaches Docker."""
    instance = f"test-runs-full-{secrets.token_hex(4)}"
    manager = await SandboxManager.open(settings_for(instance, redis_url, max_sandboxes=1))
    docker_client = docker.from_env()
    try:
        held = SandboxRecord("held1", "vanilla", "v", "n", state="in_use")
        await manager.registry.save(held)
        service = RunService(store, client, settings)
        async with running_workers(
            settings, store, client, sandbox_workspaces(manager), replay_factory()
        ):
            run = await submit(service, store)
            events = await events_until_finished(store, client, run.id)
        await manager.registry.clear()
    finally:
        await manager.aclose()
        left = leftovers(docker_client, instance)
        sweep(docker_client, instance, redis_url)
        docker_client.close()
    failure = next(event for event in events if event["type"] == "error")
    assert (failure["code"], failure["message"]) == (
        "sandbox_capacity",
        SENTENCES["sandbox_capacity"],
    )
    assert events[-1]["status"] == "failed"
    _assert_no_internals(events, SandboxCapacity())
    assert left == []


ENV_SECRET = "sk_live_never-anywhere-5150"
REAL_SANDBOX_LIMIT_SECONDS = 240
ENV_PUBLIC = "https://api.kiln-env.test"
PRINT_ENV = "console.log('token=' + process.env.STRIPE_KEY + ' url=' + process.env.VITE_API_URL)\n"


@pytest.mark.docker
@pytest.mark.slow
async def test_a_secret_reaches_the_sandbox_and_nothing_else(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    sandbox_manager: SandboxManager,
    chat_server: WireServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 27's "done": the chat's secret is in the sandbox's environment, and absent from the
    model's requests (as the wire server recorded them), the version, its zip, the run's events
    and the chat's messages."""
    monkeypatch.setenv("KILN_RENDER_CHECK", "0")
    env = compatible_env(chat_server, 65_536, 4_096)
    chat_server.script(*[Answer(TODO_ANSWER)] * 3)
    sandbox_manager.app_env = app_env_lookup(store)
    user, chat = new_chat(store)
    store.set_app_variable(chat.id, AppVariable("STRIPE_KEY", ENV_SECRET, secret=True))
    store.set_app_variable(chat.id, AppVariable("VITE_API_URL", ENV_PUBLIC))
    service = RunService(store, client, settings, env=env)
    workspaces = project_workspaces(sandbox_manager, settings)
    async with running_workers(settings, store, client, workspaces, default_provider_factory(env)):
        run_id, _ = await service.submit(
            user.id, chat.id, "make a todo app", "openai-compatible", "m"
        )
        # A real sandbox on a loaded host: the install through the npm proxy and the build.
        events = await events_until_finished(store, client, run_id, REAL_SANDBOX_LIMIT_SECONDS)
    assert events[-1]["status"] == "completed", events[-1]
    requests_sent = json.dumps([seen.body for seen in chat_server.requests])
    assert "STRIPE_KEY" in requests_sent  # the model is told the names...
    assert ENV_SECRET not in requests_sent  # ...never the values
    assert ENV_PUBLIC not in requests_sent
    projects = project_store(settings)
    assert projects.versions(chat.id)
    version_files = b"".join(projects.files(chat.id, "latest").values()).decode("latin-1")
    archive = projects.archive(chat.id, "latest")
    for kept in (version_files, archive.decode("latin-1"), json.dumps(events)):
        assert ENV_SECRET not in kept
        assert ENV_PUBLIC not in kept
    assert ENV_SECRET not in json.dumps([m.to_dict() for m in store.list_messages(chat.id)])
    finished = store.get_run(run_id)
    assert finished is not None
    assert finished.sandbox_id is not None
    container = await sandbox_manager.container_for(finished.sandbox_id)
    await call(container.put_archive, WORKSPACE, sandbox_files_tar({"print-env.js": PRINT_ENV}))
    shown = await sandbox_manager.run_command(finished.sandbox_id, ["node", "print-env.js"])
    assert shown.output == f"token=[secret] url={ENV_PUBLIC}"  # there, and redacted when echoed
