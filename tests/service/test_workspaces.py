"""The service's project store, as wired: in ``KILN_PROJECTS_DIR``, its commits locked per chat
in Redis when the process has Redis (a real redis-server, database 2), else by a lock file."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import redis

from app.config import ServiceSettings
from app.projects.commit_lock import RedisCommitLock
from app.projects.store import VersionInfo
from app.service.workspaces import project_store

FILES = {"index.html": b"<h1>hi</h1>\n"}


class Watched(Mapping[str, bytes]):
    """``FILES``, noting whether the chat's Redis lock is held each time a content is read
    (the commit compares the contents with the tip's while it holds the lock)."""

    def __init__(self, client: redis.Redis, chat: str) -> None:
        self.client, self.key, self.held = client, RedisCommitLock.key(chat), list[int]()

    def __getitem__(self, path: str) -> bytes:
        self.held.append(int(self.client.exists(self.key)))
        return FILES[path]

    def __iter__(self) -> Iterator[str]:
        return iter(FILES)

    def __len__(self) -> int:
        return len(FILES)


@pytest.mark.redis
def test_with_redis_a_commit_holds_the_chats_redis_lock(tmp_path: Path, redis_url: str) -> None:
    url = redis_url.rsplit("/", 1)[0] + "/2"
    settings = ServiceSettings(
        tmp_path / "data", "s" * 20, redis_url=url, projects_root=tmp_path / "shared"
    )
    client = redis.Redis.from_url(url)
    try:
        watched = Watched(client, "wired1")
        version = project_store(settings).commit("wired1", watched, VersionInfo("r", 1))
        assert version is not None
        assert watched.held
        assert all(watched.held)
        assert client.exists(RedisCommitLock.key("wired1")) == 0  # released
    finally:
        client.close()
    assert (tmp_path / "shared" / "wired1" / "HEAD").is_file()
    assert not (tmp_path / "shared" / "wired1" / "kiln.lock").exists()
    assert not (tmp_path / "data" / "projects").exists()


def test_without_redis_a_commit_takes_the_local_lock_file(tmp_path: Path) -> None:
    settings = ServiceSettings(tmp_path, "s" * 20)
    assert project_store(settings).commit("wired1", FILES, VersionInfo("r", 1)) is not None
    assert (tmp_path / "projects" / "wired1" / "kiln.lock").is_file()
