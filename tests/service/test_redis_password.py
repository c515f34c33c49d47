"""kiln against a Redis that wants a password (a real ``redis-server --requirepass``, started
here): given in ``KILN_REDIS_PASSWORD_FILE``, every client signs in (the worker queue runs a
message through ``kiln serve``, a chat's commit takes the Redis lock); a wrong or missing one
stops ``kiln serve`` / ``kiln worker`` at start in words with the code ``redis_auth_failed``;
the password is never in the serve log, its output, nor ``kiln doctor``'s lines."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import docker
import pytest
import redis

from app.cli.doctor_command import check_redis, format_result
from app.config import ServiceSettings
from app.projects.errors import ProjectError
from app.projects.store import VersionInfo
from app.service.workspaces import project_store
from sandbox.redis_url import with_password
from tests.app.kiln_process import LOGIN_LINK, KilnProcess, hello_recordings, kiln_env
from tests.app.test_serve_command import finish_event, sign_in
from tests.redis_server import start_redis, stop_redis
from tests.sandbox.docker_support import sweep
from tests.servers import free_port

pytestmark = [pytest.mark.redis]
PASSWORD = f"p@ss/w:rd%{secrets.token_hex(8)}"  # characters a URL must percent-encode
WRONG = f"wrong-{secrets.token_hex(8)}"
START_LIMIT_SECONDS = 30.0


@dataclass(frozen=True)
class LockedRedis:
    """A redis-server that wants :data:`PASSWORD`; ``url`` has none, ``password_file`` holds it."""

    url: str
    password_file: Path
    wrong_file: Path

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(with_password(self.url, PASSWORD))


@pytest.fixture(scope="module")
def locked_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LockedRedis]:
    folder = tmp_path_factory.mktemp("locked-redis")
    process, url = start_redis(folder, password=PASSWORD)
    try:
        (folder / "password").write_text(PASSWORD + "\n")
        (folder / "wrong").write_text(WRONG + "\n")
        yield LockedRedis(url, folder / "password", folder / "wrong")
    finally:
        stop_redis(process)


def env_for(locked: LockedRedis, password_file: Path, **extra: str) -> dict[str, str]:
    """kiln's settings pointing at ``locked``, the password read from ``password_file``."""
    return {"REDIS_URL": locked.url, "KILN_REDIS_PASSWORD_FILE": str(password_file), **extra}


def test_a_commit_takes_the_redis_lock_with_the_password(
    locked_redis: LockedRedis, tmp_path: Path
) -> None:
    env = env_for(locked_redis, locked_redis.password_file, KILN_DATA_DIR=str(tmp_path / "d"))
    store = project_store(ServiceSettings.from_env(env))
    assert store.commit("c1", {"a.txt": b"a\n"}, VersionInfo("r", 1)) is not None
    wrong_env = {**env, "KILN_REDIS_PASSWORD_FILE": str(locked_redis.wrong_file)}
    refused = project_store(ServiceSettings.from_env(wrong_env))
    with pytest.raises(ProjectError) as failed:
        refused.commit("c1", {"a.txt": b"b\n"}, VersionInfo("r", 2))
    assert "password" in str(failed.value)
    assert WRONG not in str(failed.value)
    assert [v.number for v in store.versions("c1")] == [1]


@pytest.mark.parametrize(
    ("password_file", "words"),
    [
        pytest.param("password_file", "ok    redis", id="right"),
        pytest.param("wrong_file", "FAIL  redis", id="wrong"),
    ],
)
def test_doctor_says_whether_redis_takes_the_password_and_never_prints_it(
    locked_redis: LockedRedis, tmp_path: Path, password_file: str, words: str
) -> None:
    settings = ServiceSettings.from_env(
        env_for(locked_redis, getattr(locked_redis, password_file), KILN_DATA_DIR=str(tmp_path))
    )
    assert settings.redis_url is not None
    line = format_result(check_redis(settings.redis_url, tmp_path))
    assert line.startswith(words)
    assert "127.0.0.1" in line  # which Redis, redacted
    assert PASSWORD not in line
    assert WRONG not in line
    assert "***" in line


@pytest.mark.parametrize(
    ("command", "password_file", "words"),
    [
        pytest.param("serve", "wrong_file", "redis refused the password", id="serve-wrong"),
        pytest.param("worker", "wrong_file", "redis refused the password", id="worker-wrong"),
        pytest.param("worker", None, "redis wants a password and kiln was given none", id="none"),
    ],
)
def test_a_refused_password_stops_kiln_at_start_in_words(
    locked_redis: LockedRedis, tmp_path: Path, command: str, password_file: str | None, words: str
) -> None:
    env = kiln_env(f"test-redisauth-{secrets.token_hex(3)}", tmp_path / "rec")
    env["REDIS_URL"] = locked_redis.url
    if password_file is not None:
        env["KILN_REDIS_PASSWORD_FILE"] = str(getattr(locked_redis, password_file))
    args = [sys.executable, "-m", "app", command, "--data-dir", str(tmp_path / "data")]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert f"kiln {command}: {words}" in done.stderr
    assert done.stderr.rstrip().endswith("[redis_auth_failed]")
    assert "Traceback" not in done.stderr
    assert WRONG not in done.stderr + done.stdout


@pytest.mark.docker
def test_serve_runs_a_message_on_a_redis_with_a_password_and_never_logs_it(
    locked_redis: LockedRedis, tmp_path: Path
) -> None:
    instance = f"test-redisauth-{secrets.token_hex(3)}"
    port = free_port()
    env = kiln_env(instance, hello_recordings(tmp_path / "rec"))
    env.update(env_for(locked_redis, locked_redis.password_file))
    args = ["serve", "--port", str(port), "--data-dir", str(tmp_path / "data"), "--no-build"]
    try:
        with KilnProcess(args, env, tmp_path / "serve.log") as served:
            link = served.wait_for(LOGIN_LINK)
            with sign_in(f"http://127.0.0.1:{port}", link) as client:
                assert client.get("/healthz").json()["ok"] is True
                chat = client.post("/api/chats", json={"title": "hi"}).json()["chat"]
                posted = client.post(
                    f"/api/chats/{chat['id']}/messages", json={"content": "hi", "model": "hello"}
                )
                assert posted.status_code == 202, posted.text
                finished = finish_event(client, posted.json()["run_id"])  # through the queue
        assert served.process.returncode == 0, served.tail()
        assert finished["status"] == "completed"
        output = (tmp_path / "serve.log").read_text() + "\n".join(served.lines)
        assert PASSWORD not in output
        assert quote(PASSWORD, safe="") not in output
    finally:
        engine = docker.from_env()
        try:
            sweep(engine, instance, with_password(locked_redis.url, PASSWORD))
        finally:
            engine.close()
