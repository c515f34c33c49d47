"""``kiln serve`` as a process: a fresh data directory, the embedded Redis, sign-in, one run,
a clean stop and a restart; plus the argument handling."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import httpx
import pytest
import redis

from app.cli import main
from app.service.embedded_redis import recorded_url
from tests.app.kiln_process import (
    LOGIN_LINK,
    STOP_LIMIT_SECONDS,
    KilnProcess,
    hello_recordings,
    kiln_env,
)
from tests.sandbox.docker_support import leftovers, sweep
from tests.servers import free_port
from tests.waiting import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.redis]
CREATED = re.compile(r"created user 'local'")
RUN_AFTER_OUTAGE_SECONDS = 90.0


@pytest.fixture
def instance(redis_url: str) -> Iterator[str]:
    """A kiln instance name for the process; its Docker objects are swept afterwards."""
    name = f"test-serve-{secrets.token_hex(3)}"
    yield name
    client = docker.from_env()
    try:
        left = leftovers(client, name)
        sweep(client, name, redis_url)
    finally:
        client.close()
    assert [item for item in left if item.startswith("container")] == []


def finish_event(client: httpx.Client, run_id: str) -> dict[str, object]:
    """Follow the run's events to ``run_finished``; that event."""
    with client.stream("GET", f"/api/runs/{run_id}/events", timeout=60) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: ") and '"run_finished"' in line:
                finished: dict[str, object] = json.loads(line.removeprefix("data: "))
                return finished
    raise AssertionError("the stream ended without run_finished")


def pings(url: str) -> bool:
    client = redis.Redis.from_url(url)
    try:
        return bool(client.ping())
    finally:
        client.close()


@contextlib.contextmanager
def sign_in(base: str, link: str) -> Iterator[httpx.Client]:
    """A client carrying the session cookie the login link gives (the server's own address,
    since ``localhost`` may resolve to another loopback address than the one listened on)."""
    with httpx.Client(base_url=base, timeout=30) as client:
        response = client.get(f"/login{link.split('/login', 1)[1]}")
        assert response.status_code == 303
        yield client


def shared_with_others(data: Path) -> list[str]:
    """Folders and files of the data dir that group or others may use."""
    found = []
    for path in [data, *data.rglob("*")]:
        with contextlib.suppress(FileNotFoundError):  # a file the running server removed
            status = path.lstat()
            if (stat.S_ISDIR(status.st_mode) or stat.S_ISREG(status.st_mode)) and (
                status.st_mode & 0o077
            ):
                found.append(f"{oct(status.st_mode)} {path}")
    return found


def test_serve_from_an_empty_data_dir_runs_a_message_and_restarts(
    tmp_path: Path, instance: str
) -> None:
    data, port = tmp_path / "data", free_port()
    env = kiln_env(instance, hello_recordings(tmp_path / "rec"))
    args = ["serve", "--port", str(port), "--data-dir", str(data), "--no-build"]
    base = f"http://127.0.0.1:{port}"
    with KilnProcess(args, env, tmp_path / "first.log") as first:
        link = first.wait_for(LOGIN_LINK)
        assert any(CREATED.search(line) for line in first.lines)
        assert link.startswith(f"http://kiln.localhost:{port}/login?token=")
        with sign_in(base, link) as client:
            assert client.get("/healthz").json()["ok"] is True
            chat = client.post("/api/chats", json={"title": "hi"}).json()["chat"]
            posted = client.post(
                f"/api/chats/{chat['id']}/messages", json={"content": "hi", "model": "hello"}
            )
            assert posted.status_code == 202, posted.text
            finished = finish_event(client, posted.json()["run_id"])
        url = recorded_url(data)
        assert url == f"unix://{data}/redis/redis.sock?db=0"
        assert pings(url)
    assert first.process.returncode == 0, first.tail()
    assert finished["status"] == "completed"
    with pytest.raises(redis.exceptions.ConnectionError):
        pings(url)  # the embedded Redis stopped with kiln
    assert shared_with_others(data) == []  # database, WAL, secret, projects, Redis: all private
    for path in [data, *data.rglob("*")]:  # as an older kiln left them
        if not path.is_socket():
            path.chmod(0o755 if path.is_dir() else 0o644)
    with KilnProcess(args, env, tmp_path / "second.log") as second:
        new_link = second.wait_for(LOGIN_LINK)
        wait_until(lambda: shared_with_others(data) == [], "the data dir made private", 30, 0.2)
        assert not any(CREATED.search(line) for line in second.lines)
        assert httpx.get(f"{base}/login{link.split('/login', 1)[1]}").status_code == 401
        with sign_in(base, new_link) as client:
            chats = client.get("/api/chats").json()["chats"]
    assert [item["id"] for item in chats] == [chat["id"]]
    # Access logs are off by default: the sign-in link must stand out in the log.
    assert '"logger": "uvicorn.access"' not in (tmp_path / "first.log").read_text()


def test_access_log_on_request(tmp_path: Path, instance: str) -> None:
    data, port = tmp_path / "data", free_port()
    env = kiln_env(instance, hello_recordings(tmp_path / "rec"))
    args = ["serve", "--port", str(port), "--data-dir", str(data), "--no-build", "--access-log"]
    with KilnProcess(args, env, tmp_path / "serve.log") as served:
        served.wait_for(LOGIN_LINK)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
    assert '"logger": "uvicorn.access"' in served.tail()


LONG_ANSWER = "<Response>\n" + " ".join(f"word{i}" for i in range(600)) + "\n</Response>\n"


def run_status(client: httpx.Client, run_id: str) -> str:
    """The run's status now."""
    status: str = client.get(f"/api/runs/{run_id}").json()["status"]
    return status


@pytest.mark.parametrize(
    "when",
    [
        pytest.param("queued", id="before-the-stream"),
        pytest.param("streaming", id="mid-stream"),
    ],
)
def test_a_redis_killed_under_a_run_comes_back_and_the_run_completes(
    tmp_path: Path, instance: str, when: str
) -> None:
    """kill -9 of the embedded redis-server: the supervisor restarts it (append-only file), no
    loop spins on the outage, the run ends completed and every event is stored in order."""
    data, port = tmp_path / "data", free_port()
    recordings = hello_recordings(tmp_path / "rec")
    (recordings / "long.txt").write_text(LONG_ANSWER)
    # A run whose worker lost track of it in the outage is reclaimed after this idle time.
    env = kiln_env(instance, recordings, KILN_RUN_CLAIM_IDLE="5")
    args = ["serve", "--port", str(port), "--data-dir", str(data), "--no-build"]
    base = f"http://127.0.0.1:{port}"
    with KilnProcess(args, env, tmp_path / "serve.log") as served:
        link = served.wait_for(LOGIN_LINK)
        url = recorded_url(data)
        assert url is not None
        with sign_in(base, link) as client:
            chat = client.post("/api/chats", json={"title": "long"}).json()["chat"]
            posted = client.post(
                f"/api/chats/{chat['id']}/messages", json={"content": "go", "model": "long"}
            )
            assert posted.status_code == 202, posted.text
            run_id = posted.json()["run_id"]
            if when == "streaming":
                wait_until(lambda: run_status(client, run_id) == "running", "the run to start")
            kill_redis(url)
            deadline = time.monotonic() + RUN_AFTER_OUTAGE_SECONDS
            while run_status_or_none(client, run_id) not in ("completed", "failed", "cancelled"):
                assert time.monotonic() < deadline, f"the run never ended; log: {served.tail()}"
                time.sleep(0.5)
            assert run_status(client, run_id) == "completed", served.tail()
            assert client.get("/healthz").json()["ok"] is True
            finished = finish_event(client, run_id)
    assert finished["status"] == "completed"


def run_status_or_none(client: httpx.Client, run_id: str) -> str | None:
    """The run's status, or ``None`` while the service answers errors (Redis restarting)."""
    try:
        response = client.get(f"/api/runs/{run_id}", timeout=5)
    except httpx.HTTPError:
        return None
    return str(response.json()["status"]) if response.status_code == 200 else None


def kill_redis(url: str) -> None:
    """SIGKILL the redis-server answering on ``url``."""
    client = redis.Redis.from_url(url)
    try:
        pid = int(client.info("server")["process_id"])
    finally:
        client.close()
    os.kill(pid, signal.SIGKILL)


def test_ctrl_c_to_the_process_group_stops_serve_and_then_its_redis(
    tmp_path: Path, instance: str
) -> None:
    """A terminal's Ctrl+C signals the whole group: kiln stops cleanly, and Redis after it."""
    data, port = tmp_path / "data", free_port()
    env = kiln_env(instance, hello_recordings(tmp_path / "rec"))
    args = ["serve", "--port", str(port), "--data-dir", str(data), "--no-build"]
    with KilnProcess(args, env, tmp_path / "serve.log", own_group=True) as served:
        served.wait_for(LOGIN_LINK)
        url = recorded_url(data)
        assert url is not None
        assert pings(url)
        os.killpg(served.process.pid, signal.SIGINT)
        try:
            code = served.process.wait(STOP_LIMIT_SECONDS)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"kiln ignored Ctrl+C; log: {served.tail()}") from None
    assert code == 0, served.tail()
    with pytest.raises(redis.exceptions.ConnectionError):
        pings(url)
    # Redis sits in a process group of its own: kiln stopped it (SIGTERM), last; the terminal's
    # SIGINT never reached it, so it could not die under kiln's own shutdown.
    redis_log = (data / "redis" / "redis.log").read_text()
    assert "SIGTERM" in redis_log
    assert "SIGINT" not in redis_log


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--workers", "0"], "--workers must be at least 1", id="no-workers"),
        pytest.param(["--port", "70000"], "KILN_PORT", id="bad-port"),
    ],
)
def test_bad_arguments_are_bad_usage(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["serve", "--data-dir", str(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err


def test_workers_and_no_worker_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--workers", "2", "--no-worker"])
    assert exited.value.code == 2
