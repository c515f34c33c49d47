"""Fixtures of the API tests: a real store and run service (Redis), uvicorn on loopback.

Sandboxes are a fake (:class:`~tests.api.harness.FakeSandboxes`) here; the tests that need real
ones (files, end to end) build their own stack with Docker.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis.asyncio

from app.api.app import build_app
from app.api.services import ApiSettings, HealthCheck
from app.config import ServiceSettings
from app.runs.service import RunService
from app.store import Store
from tests.api.harness import FakeSandboxes, Person, add_person, api_redis_url, serving

SECRET = "test-secret-key-0123456789"


@dataclass
class Api:
    """A served API with two users and an anonymous client."""

    url: str
    store: Store
    redis: redis.asyncio.Redis
    runs: RunService
    sandboxes: FakeSandboxes
    alice: Person
    bob: Person
    anonymous: httpx.AsyncClient


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A fresh store in a temporary folder."""
    return Store(tmp_path / "kiln.db", SECRET)


@pytest.fixture
async def api_redis(redis_url: str) -> AsyncIterator[redis.asyncio.Redis]:
    """A client of the API tests' Redis database, emptied first."""
    client = redis.asyncio.Redis.from_url(api_redis_url(redis_url))
    await client.flushdb()
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def service_settings(tmp_path: Path, redis_url: str) -> ServiceSettings:
    """The defaults, on the test's folder and Redis database."""
    return ServiceSettings(tmp_path, SECRET, redis_url=api_redis_url(redis_url))


@pytest.fixture
def health_checks() -> dict[str, HealthCheck]:
    """No health checks unless a test says otherwise."""
    return {}


@pytest.fixture
def provider_env() -> dict[str, str]:
    """The operator's provider settings (none: keys come from users); a test may parametrize
    it (``openai-compatible``'s base URL, a server key)."""
    return {}


@pytest.fixture
async def api(
    store: Store,
    api_redis: redis.asyncio.Redis,
    service_settings: ServiceSettings,
    health_checks: dict[str, HealthCheck],
    provider_env: dict[str, str],
) -> AsyncIterator[Api]:
    """The API with the real run service (no workers) and fake sandboxes, on loopback."""
    runs = RunService(store, api_redis, service_settings, env=provider_env)
    sandboxes = FakeSandboxes()
    settings = ApiSettings(
        public_host="localhost",
        public_port=8000,
        sse_ping_interval=0.2,
        secret_key=SECRET,
        provider_env=provider_env,
    )
    app = build_app(store, runs, sandboxes, settings=settings, health_checks=health_checks)
    async with serving(app) as url:
        alice, bob = add_person(store, "alice", url), add_person(store, "bob", url)
        anonymous = httpx.AsyncClient(base_url=url, timeout=30)
        try:
            yield Api(url, store, api_redis, runs, sandboxes, alice, bob, anonymous)
        finally:
            for client in (alice.client, bob.client, anonymous):
                await client.aclose()
    store.close()
