"""Shared fixtures of the sandbox tests: one kiln instance per test session, swept at the end.

Everything the tests create carries ``kiln.instance=<this session's instance>`` (or an instance
made with ``instances.new``), so concurrent sessions never touch each other's objects. At the
end of the session every registered instance is swept with plain Docker SDK calls (not with
the code under test) and the session fails if any container, network or volume is left.

The manager fixture is package-scoped and async: it relies on the session-scoped
``anyio_backend`` of ``tests/conftest.py`` (a module overriding it cannot use the manager).
Package, not session: while an async fixture lives, anyio's test runner holds the thread as
"running asyncio", so a plain test after it that calls ``anyio.run`` (kiln's CLI ``main``) would
fail; with the suite in two processes (``make test``), other folders' modules run between the
sandbox modules, and the manager is closed when the process leaves ``tests/sandbox``.
Redis is the session's private ``redis_url``.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator, Iterator

import docker
import pytest
import redis.asyncio

from sandbox.containers.networks import remove_network
from sandbox.containers.npm_proxy import proxy_volume_name, remove_proxy
from sandbox.containers.provisioning import remove_volume
from sandbox.lifecycle.manager import SandboxManager
from sandbox.lifecycle.registry import SandboxRegistry
from sandbox.settings import SandboxSettings
from sandbox.writes.write_buffer import WriteBuffer
from tests.sandbox.docker_support import (
    TestInstances,
    leftovers,
    settings_for,
    sweep,
)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    """A Docker client for assertions; fails (never skips) without an engine."""
    client = docker.from_env()
    client.ping()
    yield client
    client.close()


@pytest.fixture(scope="session")
def instances(docker_client: docker.DockerClient, redis_url: str) -> Iterator[TestInstances]:
    """This session's instances; at the end everything is swept and must be gone."""
    registered = TestInstances(main=f"test-{secrets.token_hex(4)}")
    yield registered
    left: list[str] = []
    for instance in registered.all:
        left += leftovers(docker_client, instance)  # what kiln itself failed to clean up
        sweep(docker_client, instance, redis_url)
    assert not left, f"the sandbox tests left Docker objects behind: {left}"


@pytest.fixture(scope="session")
def sandbox_settings(instances: TestInstances, redis_url: str) -> SandboxSettings:
    """Settings of the session's main instance, with a warm pool of one vanilla sandbox."""
    # A pool of exactly one: the session's many acquires must not grow it (their load).
    return settings_for(instances.main, redis_url, warm_pool_size=1, warm_pool_max=1)


@pytest.fixture(scope="package")
async def manager(sandbox_settings: SandboxSettings) -> AsyncIterator[SandboxManager]:
    """The manager of the sandbox tests, its warm pool running; destroys what it made when the
    process leaves ``tests/sandbox`` (module docstring)."""
    opened = await SandboxManager.open(sandbox_settings)
    try:
        async with opened:
            yield opened
        for record in await opened.list():
            await opened.destroy(record.id)
        await _remove_shared(opened)
    finally:
        await opened.aclose()


async def _remove_shared(opened: SandboxManager) -> None:
    """Remove the session's sandbox network, npm proxy and caches (kept in production)."""
    await remove_network(opened.client, opened.settings.network)
    await remove_proxy(opened.client, opened.settings.instance)
    await remove_volume(opened.client, proxy_volume_name(opened.settings.instance))


@pytest.fixture
async def registry(instances: TestInstances, redis_url: str) -> AsyncIterator[SandboxRegistry]:
    """A registry on a fresh instance of its own."""
    opened = SandboxRegistry.from_url(redis_url, instances.new("registry"))
    try:
        yield opened
        await opened.clear()
    finally:
        await opened.aclose()


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[redis.asyncio.Redis]:
    """A connection to the session's private Redis."""
    connection = redis.asyncio.Redis.from_url(redis_url)
    try:
        yield connection
    finally:
        await connection.aclose()


@pytest.fixture
def buffer(client: redis.asyncio.Redis) -> WriteBuffer:
    """A write buffer of a sandbox id no other test uses."""
    return WriteBuffer(client, f"buf-{uuid.uuid4().hex[:10]}", ttl_seconds=600)
