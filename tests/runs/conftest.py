"""Fixtures of the runs tests: a store in a temporary directory, and a Redis database of their
own on the session's private ``redis-server`` (emptied before each test)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio

from app.config import ServiceSettings
from app.store import Chat, Store, User

RUNS_REDIS_DB = 7  # the sandbox tests use database 0 of the same server
SECRET = "a-test-secret-of-some-length"
# The checkout's sibling ``shared/`` folder (``/work/shared`` here, beside the clone in CI).
TIKTOKEN_CACHE = Path(__file__).resolve().parents[3] / "shared" / "tiktoken-cache"


@pytest.fixture(autouse=True)
def tiktoken_cache(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The agent loop counts tokens: tiktoken reads the shared encodings (no downloads here)."""
    monkeypatch.setenv(
        "TIKTOKEN_CACHE_DIR", os.environ.get("TIKTOKEN_CACHE_DIR") or str(TIKTOKEN_CACHE)
    )
    return TIKTOKEN_CACHE


@pytest.fixture
def runs_redis_url(redis_url: str) -> str:
    """The session's Redis, database :data:`RUNS_REDIS_DB`."""
    return redis_url.rsplit("/", 1)[0] + f"/{RUNS_REDIS_DB}"


@pytest.fixture
async def client(runs_redis_url: str) -> AsyncIterator[redis.asyncio.Redis]:
    """A client on an emptied database."""
    opened = redis.asyncio.Redis.from_url(runs_redis_url)
    await opened.flushdb()
    yield opened
    await opened.aclose()


@pytest.fixture
def settings(tmp_path: Path, runs_redis_url: str) -> ServiceSettings:
    """Service settings for tests: quick reclaims and batches."""
    return ServiceSettings(
        data_dir=tmp_path,
        secret_key=SECRET,
        redis_url=runs_redis_url,
        run_claim_idle_seconds=1.0,
        event_batch_seconds=0.05,
    )


@pytest.fixture
def store(settings: ServiceSettings) -> Iterator[Store]:
    """An empty store in the test's data directory."""
    opened = Store(settings.database_path, settings.secret_key)
    yield opened
    opened.close()


def with_limits(settings: ServiceSettings, **limits: int | float) -> ServiceSettings:
    """``settings`` with other limits."""
    return dataclasses.replace(settings, **limits)  # type: ignore[arg-type]


def new_chat(store: Store, user_name: str = "ann") -> tuple[User, Chat]:
    """A user (created if needed) and a new chat of theirs."""
    user = store.user_by_name(user_name) or store.create_user(user_name)
    return user, store.create_chat(user.id, "a chat")
