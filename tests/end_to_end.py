"""The served kiln of an end-to-end test module: one shared pair of fixtures.

A module declares what its kiln is, ``END_TO_END = EndToEnd(...)`` (its name, its Redis
database, its recordings), and asks for ``live`` (and ``instance``, its sandboxes' instance):
one kiln served for the module (store, Redis, the real sandbox manager, workers, HTTP), whose
Docker objects must all be gone at the end. A module that needs its own providers builds its
``live`` with :func:`serve_end_to_end` instead.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import docker
import pytest
import redis

from app.config import ServiceSettings
from app.runs.execution import ProviderFactory
from tests.api.stack import LiveService, copy_recordings, live_service
from tests.sandbox.docker_support import leftovers_but_claim, remove_npm_proxy, settings_for, sweep


@dataclass(frozen=True)
class EndToEnd:
    """One module's served kiln. Each module has a Redis database of its own (flushed before
    its kiln starts): sandbox 0, api 3, end-to-end 4, runs 7, web 9, huge workspace 10,
    projects 11, edits 12, scripted model 13, crash recovery 14, cancel 15."""

    name: str  # names the instance (``test-<name>-<random>``) and the module's folder
    redis_db: int
    secret: str
    recordings: Mapping[str, str] = field(default_factory=dict)  # added: ``<name>.txt``
    workers: int = 1
    worker_concurrency: int | None = None

    def redis_url(self, session_url: str) -> str:
        """The module's database on the session's Redis server."""
        return session_url.rsplit("/", 1)[0] + f"/{self.redis_db}"


def _declared(request: pytest.FixtureRequest) -> EndToEnd:
    declared = getattr(request.module, "END_TO_END", None)
    assert isinstance(declared, EndToEnd), f"{request.module.__name__} declares no END_TO_END"
    return declared


@pytest.fixture(scope="module")
def instance(request: pytest.FixtureRequest, redis_url: str) -> Iterator[str]:
    """The module's kiln instance; every Docker object of it must be gone at the end."""
    declared = _declared(request)
    name = f"test-{declared.name}-{secrets.token_hex(3)}"
    yield name
    client = docker.from_env()
    try:
        left = leftovers_but_claim(client, name)
        sweep(client, name, declared.redis_url(redis_url))
    finally:
        client.close()
    assert not left, f"the {declared.name} tests left Docker objects behind: {left}"


@pytest.fixture(scope="module")
async def live(
    request: pytest.FixtureRequest,
    instance: str,
    redis_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[LiveService]:
    """One served kiln for the module, replaying the shared recordings and the module's own."""
    declared = _declared(request)
    root = tmp_path_factory.mktemp(declared.name)
    async with serve_end_to_end(declared, instance, redis_url, root) as served:
        yield served


@contextlib.asynccontextmanager
async def serve_end_to_end(
    declared: EndToEnd,
    instance: str,
    redis_url: str,
    root: Path,
    *,
    providers: ProviderFactory | None = None,
    provider_env: Mapping[str, str] | None = None,
) -> AsyncIterator[LiveService]:
    """Serve ``declared``'s kiln with its data under ``root``; at the end its sandboxes and npm
    proxy are removed (the ``instance`` fixture then checks nothing is left)."""
    url = declared.redis_url(redis_url)
    concurrency = declared.worker_concurrency
    extra = {} if concurrency is None else {"worker_concurrency": concurrency}
    settings = ServiceSettings(root / "data", declared.secret, redis_url=url, **extra)
    sandbox_settings = settings_for(instance, url, warm_pool_size=0)
    flusher = redis.Redis.from_url(url)
    flusher.flushdb()  # before any worker creates its consumer group
    flusher.close()
    recordings = copy_recordings(root / "rec")
    for name, text in declared.recordings.items():
        (recordings / f"{name}.txt").write_text(text)
    async with live_service(
        settings,
        sandbox_settings,
        recordings,
        workers=declared.workers,
        providers=providers,
        provider_env=provider_env,
    ) as served:
        yield served
        for record in await served.stack.manager.list():
            await served.stack.manager.destroy(record.id)
        await remove_npm_proxy(served.stack.manager.client, sandbox_settings.instance)
