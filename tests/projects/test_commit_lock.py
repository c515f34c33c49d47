"""Writers of one chat's project on several "hosts" (processes), on real git and a real Redis
(database 2 of the tests' redis-server): no version lost, history only grows, a writer whose
lock expired mid-commit loses the compare-and-swap and records again on the new tip."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from app.projects.commit_lock import FileCommitLock, RedisCommitLock, commit_lock
from app.projects.errors import ProjectError
from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from tests.projects.project_writers import files_of

ROOT = Path(__file__).resolve().parents[2]
WRITES_EACH = 10
DATABASE = 2

pytestmark = pytest.mark.redis


@pytest.fixture(scope="module")
def lock_redis_url(redis_url: str) -> str:
    return redis_url.rsplit("/", 1)[0] + f"/{DATABASE}"


@pytest.fixture
def client(lock_redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(lock_redis_url)
    client.flushdb()
    try:
        yield client
    finally:
        client.close()


def start_writer(root: Path, chat: str, name: str, count: int, *lock: str) -> subprocess.Popen[str]:
    """A writer process (tests/projects/project_writers.py), once it says it is ready."""
    argv = [sys.executable, "-m", "tests.projects.project_writers", str(root), chat, name]
    process = subprocess.Popen(
        [*argv, str(count), *lock], cwd=ROOT, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    return process


def go(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()


def outcome(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0, out
    result: dict[str, Any] = json.loads(out)
    return result


@pytest.mark.parametrize(
    "locked", [pytest.param("redis", id="redis"), pytest.param("file", id="file-no-redis")]
)
def test_two_hosts_writing_at_once_lose_no_version(
    tmp_path: Path, client: redis.Redis, lock_redis_url: str, locked: str
) -> None:
    lock = [lock_redis_url] if locked == "redis" else []
    writers = {name: start_writer(tmp_path, "chat1", name, WRITES_EACH, *lock) for name in "ab"}
    for process in writers.values():
        go(process)
    numbers = {name: outcome(process)["numbers"] for name, process in writers.items()}
    store = GitProjectStore(tmp_path)
    versions = store.versions("chat1")
    assert [v.number for v in versions] == list(range(1, 2 * WRITES_EACH + 1))
    for name, got in numbers.items():
        assert got == sorted(set(got))  # strictly growing
        made = [(v.number, v.info.turn) for v in versions if v.info.run == name]
        assert made == list(zip(got, range(1, WRITES_EACH + 1), strict=True))
    for version in versions:  # each holds its writer's files of that turn
        mine, kept = (
            files_of(version.info.run, version.info.turn),
            store.files("chat1", version.number),
        )
        assert {path: kept[path] for path in mine} == mine
    assert client.keys("*") == []  # every lock released


def test_a_writer_paused_past_its_lock_loses_the_swap_and_records_again(
    tmp_path: Path, client: redis.Redis, lock_redis_url: str
) -> None:
    store = GitProjectStore(tmp_path, RedisCommitLock(client))
    store.commit("chat1", {"base.txt": b"base\n"}, VersionInfo("setup", 1))
    paused = start_writer(tmp_path, "chat1", "a", 0, lock_redis_url, "0.3")
    go(paused)
    _, status = os.waitpid(paused.pid, os.WUNTRACED)  # it took the lock, read the tip, stopped
    assert os.WIFSTOPPED(status)
    try:
        other = store.commit("chat1", files_of("b", 1), VersionInfo("b", 1))  # once a's expired
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    result = outcome(paused)
    assert other is not None
    assert other.number == 2
    assert result["numbers"] == [3]
    assert any("moved on mid-commit" in warning for warning in result["warnings"])
    assert [(v.info.run, v.number) for v in store.versions("chat1")] == [
        ("setup", 1), ("b", 2), ("a", 3),
    ]  # fmt: skip
    assert store.files("chat1", 3) == files_of("a", 1)
    assert store.files("chat1", 2) == files_of("b", 1)


def test_a_held_lock_is_renewed_past_its_time_to_live(client: redis.Redis, tmp_path: Path) -> None:
    # Renewed every third of its life: a 1.5 s key outlives a renewal thread held off the CPU
    # for a second (0.2 s did not, at load 40 in CI).
    lock = RedisCommitLock(client, ttl_seconds=1.5)
    impatient = RedisCommitLock(client, wait_seconds=0.0)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock.held("chat1", tmp_path):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        for _ in range(3):  # three lifetimes of the key pass while it is held
            assert not release.wait(1.5)
            with (
                pytest.raises(ProjectError, match="'chat1' is busy"),
                impatient.held("chat1", tmp_path),
            ):
                pass
    finally:
        release.set()
        holder.join()
    assert client.get(RedisCommitLock.key("chat1")) is None


def test_a_writer_never_releases_a_lock_it_no_longer_holds(
    client: redis.Redis, tmp_path: Path
) -> None:
    lock = RedisCommitLock(client, ttl_seconds=30)
    key = RedisCommitLock.key("chat1")
    with lock.held("chat1", tmp_path):
        client.set(key, b"someone else")  # ours expired; another writer took it
    assert client.get(key) == b"someone else"


def test_an_unreachable_redis_is_a_project_error_in_words(tmp_path: Path) -> None:
    lock = RedisCommitLock(redis.Redis.from_url("redis://127.0.0.1:1/0"))
    taking = "redis unreachable while taking the project lock of chat 'chat1'"
    with pytest.raises(ProjectError, match=taking), lock.held("chat1", tmp_path):
        pass


@pytest.mark.parametrize(
    ("has_redis", "kind"),
    [
        pytest.param(True, RedisCommitLock, id="redis"),
        pytest.param(False, FileCommitLock, id="none"),
    ],
)
def test_the_lock_follows_whether_the_process_has_redis(
    client: redis.Redis, has_redis: bool, kind: type[object]
) -> None:
    assert isinstance(commit_lock(client if has_redis else None), kind)


class RedisGoneAfterTaking:
    """A stand-in client: the lock is taken, then Redis is gone (release fails)."""

    def set(self, *args: object, **kwargs: object) -> bool:
        return True

    def eval(self, *args: object) -> int:
        raise redis.exceptions.ConnectionError("Connection refused")


def test_a_lock_that_cannot_be_released_does_not_hide_the_commits_outcome(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lock = RedisCommitLock(cast(redis.Redis, RedisGoneAfterTaking()))
    with lock.held("chat1", tmp_path):
        pass  # the commit went through: its outcome is what the caller gets
    assert "project lock not released (it expires by itself)" in caplog.text
    assert "redis unreachable while releasing the project lock of chat 'chat1'" in caplog.text
