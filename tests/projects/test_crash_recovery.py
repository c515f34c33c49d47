"""A worker killed with SIGKILL between a turn's writes and its commit loses no file of the
turn: another worker resumes the run in the same chat's sandbox (real Docker, Redis and git)
and the version recorded after the resume holds every file of the turn, as checkpointed.

A turn's version is recorded as its stream ends, while its build still runs, and its checkpoint
once the build's result is in: the window is from the turn's first file written to its version,
and the resume, with no checkpoint of that turn, runs the turn again."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import docker
import pytest
import redis
import redis.asyncio

from app.config import ServiceSettings
from app.postgen.template_workspace import read_template_workspace
from app.projects.git_store import GitProjectStore
from app.runs.follow import RunFollower
from app.runs.service import RunService
from app.store import Store
from sandbox.writes.write_buffer import STAGING
from tests.runs.conftest import new_chat
from tests.runs.fakes import TODO, TODO_FILES
from tests.runs.worker_process import SANDBOXES
from tests.sandbox.docker_support import CA_BUNDLE, leftovers_but_claim, sweep

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow, pytest.mark.npm]

CRASH_REDIS_DB = 14  # others: sandbox 0, api 3, end-to-end 4, runs 7, web 9, projects 11, 12, 13
SECRET = "projects-crash-secret-0123456789"
REPO = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 300


@pytest.fixture
def instance(redis_url: str) -> Iterator[str]:
    """This test's kiln instance. Its workers are killed, so their sandbox, networks and
    volumes stay (as after a real crash: the reaper's job); they are swept here, and nothing
    of the instance may remain after."""
    name = f"test-projcrash-{secrets.token_hex(3)}"
    yield name
    client = docker.from_env()
    try:
        sweep(client, name, crash_redis_url(redis_url))
        for volume in client.volumes.list(filters={"name": f"kiln-npm-cache-{name}"}):
            volume.remove(force=True)
        left = leftovers_but_claim(client, name)
    finally:
        client.close()
    assert not left, f"Docker objects of the crash test survived the sweep: {left}"


def crash_redis_url(session_url: str) -> str:
    return session_url.rsplit("/", 1)[0] + f"/{CRASH_REDIS_DB}"


@pytest.fixture
def settings(tmp_path: Path, redis_url: str) -> ServiceSettings:
    url = crash_redis_url(redis_url)
    flusher = redis.Redis.from_url(url)
    flusher.flushdb()
    flusher.close()
    return ServiceSettings(tmp_path / "data", SECRET, redis_url=url, run_claim_idle_seconds=1.0)


@pytest.fixture
async def client(settings: ServiceSettings) -> AsyncIterator[redis.asyncio.Redis]:
    opened = redis.asyncio.Redis.from_url(str(settings.redis_url))
    yield opened
    await opened.aclose()


@pytest.fixture
def workers(instance: str, settings: ServiceSettings) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Worker processes on real sandboxes of ``instance``; all are killed at the end (before
    the instance's Docker objects are swept)."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def start_worker(
    instance: str, settings: ServiceSettings, pace: float, name: str, log: Path
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "KILN_DATA_DIR": str(settings.data_dir),
        "KILN_SECRET_KEY": settings.secret_key,
        "REDIS_URL": str(settings.redis_url),
        "KILN_RUN_CLAIM_IDLE": "1",
        "KILN_INSTANCE": instance,
        "KILN_WARM_POOL_SIZE": "0",
        "KILN_SANDBOX_CA_BUNDLE": str(CA_BUNDLE),
        "PYTHONPATH": str(REPO),
    }
    argv = [sys.executable, "-m", "tests.runs.worker_process", SANDBOXES, str(TODO), str(pace)]
    with log.open("ab") as output:
        return subprocess.Popen([*argv, name], cwd=REPO, env=env, stdout=output, stderr=output)


def between_writes_and_commit(store: Store, run_id: str) -> bool:
    """Files of the turn are in its sandbox; its version is not recorded."""
    written = store.events_of_type(run_id, "file_written")
    return bool(written) and not store.events_of_type(run_id, "version")


async def test_a_kill_between_writes_and_commit_loses_no_file_of_the_turn(
    instance: str,
    settings: ServiceSettings,
    client: redis.asyncio.Redis,
    workers: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    store = Store(settings.database_path, settings.secret_key)
    log = tmp_path / "workers.log"
    user, chat = new_chat(store)
    run_id, _ = await RunService(store, client, settings, env={}).submit(
        user.id, chat.id, "make an app"
    )
    workers.append(start_worker(instance, settings, 300.0, "first", log))
    with anyio.fail_after(DEADLINE_SECONDS):
        while not between_writes_and_commit(store, run_id):
            assert workers[0].poll() is None, log.read_text()
            await anyio.sleep(0.01)
    workers[0].send_signal(signal.SIGKILL)
    workers[0].wait()
    assert not store.events_of_type(run_id, "version"), "killed too late: the turn was recorded"
    workers.append(start_worker(instance, settings, 0, "second", log))
    with anyio.fail_after(DEADLINE_SECONDS):
        async with RunFollower(store, client, run_id, poll_seconds=0.2) as follower:
            events = [event async for _seq, event in follower]
    run = store.get_run(run_id)
    checkpoint = store.load_checkpoint(run_id)
    store.close()
    assert run is not None
    assert (run.status, run.worker) == ("completed", "crash-test-second"), log.read_text()
    assert [e["type"] for e in events].count("version") >= 1
    assert checkpoint is not None
    recorded = GitProjectStore(settings.projects_dir).files(chat.id, "latest")
    assert set(TODO_FILES) <= set(recorded)
    for path, content in checkpoint["files"].items():
        assert recorded.get(path) == content.encode(), path


def mid_file(store: Store, run_id: str) -> str | None:
    """A file of the run started and not ended (after at least one whole file), if any."""
    ended = {event["path"] for _, event in store.events_of_type(run_id, "file_end")}
    started = [event["path"] for _, event in store.events_of_type(run_id, "file_start")]
    open_paths = [path for path in started if path not in ended]
    return open_paths[0] if ended and open_paths else None


def workspace_file(instance: str, path: str) -> bytes | None:
    """``path`` in the instance's one sandbox as it is now (``None``: there is none)."""
    client = docker.from_env()
    try:
        # A sandbox has a template; the npm proxy and a render browser of the instance do not.
        labels = [f"kiln.instance={instance}", "kiln.template"]
        [container] = client.containers.list(filters={"label": labels})
        code, output = container.exec_run(["cat", f"/workspace/{path}"], user="1000:1000")
    finally:
        client.close()
    return bytes(output) if code == 0 else None


async def staged_mid_file(
    store: Store, run_id: str, instance: str, worker: subprocess.Popen[bytes], log: Path
) -> str:
    """A file the run is writing whose streamed part already reached the sandbox's disk (in
    the staging folder)."""
    while True:
        assert worker.poll() is None, log.read_text()
        path = mid_file(store, run_id)
        if path is not None:
            staged = f"{STAGING}/{path}"
            found = await anyio.to_thread.run_sync(workspace_file, instance, staged)
            if found and mid_file(store, run_id) == path:
                return path
        await anyio.sleep(0.05)


async def test_a_kill_mid_file_leaves_no_half_file_and_the_resume_writes_it_whole(
    instance: str,
    settings: ServiceSettings,
    client: redis.asyncio.Redis,
    workers: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    store = Store(settings.database_path, settings.secret_key)
    log = tmp_path / "workers.log"
    user, chat = new_chat(store)
    run_id, _ = await RunService(store, client, settings, env={}).submit(
        user.id, chat.id, "make an app"
    )
    workers.append(start_worker(instance, settings, 100.0, "first", log))
    with anyio.fail_after(DEADLINE_SECONDS):
        path = await staged_mid_file(store, run_id, instance, workers[0], log)
    workers[0].send_signal(signal.SIGKILL)
    workers[0].wait()
    assert mid_file(store, run_id) == path, "the file ended before the kill: try a slower pace"
    before = read_template_workspace("vite-react").get(path)
    on_disk = await anyio.to_thread.run_sync(workspace_file, instance, path)
    assert (on_disk.decode() if on_disk is not None else None) == before, path
    workers.append(start_worker(instance, settings, 0, "second", log))
    with anyio.fail_after(DEADLINE_SECONDS):
        async with RunFollower(store, client, run_id, poll_seconds=0.2) as follower:
            [event async for _seq, event in follower]
    run = store.get_run(run_id)
    checkpoint = store.load_checkpoint(run_id)
    store.close()
    assert run is not None
    assert run.status == "completed", log.read_text()
    assert checkpoint is not None
    recorded = GitProjectStore(settings.projects_dir).files(chat.id, "latest")
    for name, content in checkpoint["files"].items():
        assert recorded.get(name) == content.encode(), name
        on_disk = await anyio.to_thread.run_sync(workspace_file, instance, name)
        assert on_disk == content.encode(), name
