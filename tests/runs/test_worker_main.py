"""Crash recovery: a worker process killed with SIGKILL mid-run; another one finishes the run.

The worker processes are :func:`app.service.worker_main.serve_worker` with files written into a
folder (``tests/runs/worker_process.py``), so the files left by the interrupted run plus its
resumption can be compared with those of a run that was never interrupted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis.asyncio

from app.config import ServiceSettings
from app.runs.follow import RunFollower
from app.runs.queue import RunQueue
from app.runs.service import RunService
from app.runs.worker import Worker
from app.store import Store
from tests.agent.fakes import FakeTools
from tests.runs.conftest import new_chat
from tests.runs.fakes import (
    SEARCH_THEN_BUILD,
    TODO,
    TODO_FILES,
    folder_files,
    folder_workspaces,
    replay_factory,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD_SECONDS = 90
KillWhen = Callable[[Store, str], bool]


def some_files_written(store: Store, run_id: str) -> bool:
    """Two files of the single turn are complete (and more are coming)."""
    return len(store.events_of_type(run_id, "file_end")) >= 2


def second_turn_streaming(store: Store, run_id: str) -> bool:
    """Turn 1 is checkpointed and turn 2 is writing its first file."""
    starts = store.events_of_type(run_id, "file_start")
    return store.load_checkpoint(run_id) is not None and any(e["turn"] == 2 for _, e in starts)


@pytest.fixture
def worker_env(settings: ServiceSettings) -> dict[str, str]:
    """The environment of a worker process sharing the test's store and Redis."""
    assert settings.redis_url is not None
    return {
        **os.environ,
        "KILN_DATA_DIR": str(settings.data_dir),
        "KILN_SECRET_KEY": settings.secret_key,
        "REDIS_URL": settings.redis_url,
        "KILN_RUN_CLAIM_IDLE": "1",
        "PYTHONPATH": str(REPO),
    }


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Worker processes started by the test; all are stopped at the end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def start_worker(
    env: dict[str, str], root: Path, recording: Path, pace: float, name: str, log: Path
) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "tests.runs.worker_process", str(root), str(recording)]
    with log.open("ab") as output:
        return subprocess.Popen(
            [*argv, str(pace), name], cwd=REPO, env=env, stdout=output, stderr=output
        )


async def reference_files(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    recording: Path,
    root: Path,
) -> dict[str, str]:
    """The files of the same request run without interruption (in this process)."""
    service = RunService(store, client, settings, env={})
    user, chat = new_chat(store, "reference")
    worker = Worker(
        settings, store, client, folder_workspaces(root), replay_factory(recording), FakeTools()
    )
    async with anyio.create_task_group() as tasks:
        await tasks.start(worker.run)
        run_id, _ = await service.submit(user.id, chat.id, "make an app")
        await finished_events(store, client, run_id)
        with anyio.fail_after(HANG_GUARD_SECONDS):
            while await RunQueue(client).pending_count():
                await anyio.sleep(0.02)
        tasks.cancel_scope.cancel()
    return folder_files(root / chat.id)


async def finished_events(
    store: Store, client: redis.asyncio.Redis, run_id: str
) -> list[dict[str, Any]]:
    with anyio.fail_after(HANG_GUARD_SECONDS):
        async with RunFollower(store, client, run_id, poll_seconds=0.2) as follower:
            return [event async for _seq, event in follower]


@pytest.mark.parametrize(
    ("recording", "pace", "kill_when", "resumed_from"),
    [
        pytest.param(TODO, 300.0, some_files_written, None, id="mid-turn-restart"),
        pytest.param(SEARCH_THEN_BUILD, 100.0, second_turn_streaming, 1, id="resume-checkpoint"),
    ],
)
async def test_a_killed_workers_run_is_reclaimed_and_finished_by_another(
    settings: ServiceSettings,
    store: Store,
    client: redis.asyncio.Redis,
    worker_env: dict[str, str],
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
    recording: Path,
    pace: float,
    kill_when: KillWhen,
    resumed_from: int | None,
) -> None:
    expected = await reference_files(settings, store, client, recording, tmp_path / "reference")
    root, log = tmp_path / "files", tmp_path / "workers.log"
    user, chat = new_chat(store)
    run_id, _ = await RunService(store, client, settings, env={}).submit(
        user.id, chat.id, "make an app"
    )
    processes.append(start_worker(worker_env, root, recording, pace, "first", log))
    with anyio.fail_after(HANG_GUARD_SECONDS):
        while not kill_when(store, run_id):
            assert processes[0].poll() is None, log.read_text()
            await anyio.sleep(0.02)
    processes[0].send_signal(signal.SIGKILL)
    processes[0].wait()
    interrupted = store.get_run(run_id)
    assert interrupted is not None
    assert interrupted.status == "running"
    assert not store.events_of_type(run_id, "session_complete")  # killed mid-run
    processes.append(start_worker(worker_env, root, recording, 0, "second", log))
    events = await finished_events(store, client, run_id)
    with anyio.fail_after(HANG_GUARD_SECONDS):
        while await RunQueue(client).pending_count():
            await anyio.sleep(0.02)

    run = store.get_run(run_id)
    assert run is not None, log.read_text()
    assert (run.status, run.worker, run.attempts) == ("completed", "crash-test-second", 2)
    types = [event["type"] for event in events]
    assert types.count("run_finished") == 1
    assert types[-1] == "run_finished"
    started = [event for event in events if event["type"] == "run_started"]
    assert [event["resumed"] for event in started] == [False, resumed_from is not None]
    assert started[-1].get("from_turn") == resumed_from
    assert [m.role for m in store.list_messages(chat.id)] == ["user", "assistant"]
    assert folder_files(root / chat.id) == expected
    if recording == TODO:
        assert sorted(expected) == TODO_FILES
