"""What ``kiln serve`` and ``kiln worker`` both open: store, Redis, sandbox manager, workers.

:func:`open_stack` opens them in order and closes them in reverse, also on errors::

    async with open_stack(settings) as stack:      # settings.redis_url must be set
        stack.store, stack.redis, stack.manager    # the manager runs its warm pool and reaper
        workers = stack.workers(2)                 # run each with ``await worker.run()``
        stack.projects                             # the chats' versioned projects
        stack.publisher(env)                       # publishes versions at their own links
        stack.live                                 # the one pub/sub connection of followers
        checks = stack.health_checks()             # for /healthz
        app = build_app_for(stack, stopping)       # the ASGI app kiln serve runs

The sandbox settings come from the environment (``KILN_SANDBOX_*`` and friends) on the
service's data directory (:func:`sandbox_settings_for`), with the service's Redis URL, so
sandboxes and runs share one Redis; the run service's and the workers' admission count against
the same settings the manager has. The Redis client's pool is bounded
and *waits* (at most :data:`POOL_WAIT_SECONDS`) for a free connection rather than failing at
once, so a burst of work slows down instead of answering 503s.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import redis.asyncio
from starlette.types import ASGIApp

from app.agent.web_tools import web_tools_from_env
from app.api.app import build_app
from app.api.services import ApiSettings, HealthCheck
from app.config import ServiceSettings
from app.errors import ConfigError
from app.projects.app_env import app_env_lookup
from app.projects.git_remote import RemoteLimits
from app.projects.store import ProjectStore
from app.projects.sync import ProjectAccess, manager_installer
from app.publish.jobs import PublishJobs
from app.publish.publisher import Publisher
from app.publish.settings import PublishSettings
from app.publish.storage import LocalBuildStorage
from app.runs.execution import ProviderFactory
from app.runs.live import LiveEvents
from app.runs.service import RunService
from app.runs.worker import Worker, default_provider_factory
from app.service.deployment import join_deployment
from app.service.workspaces import project_store, project_workspaces
from app.store import Store
from sandbox import (
    EnvReader,
    ErrorStreamSettings,
    ImageBuildSettings,
    NestedExits,
    PreviewErrorStream,
    SandboxManager,
    SandboxSettings,
    ping_redis,
    redis_hold,
)

POOL_CONNECTIONS = 200
POOL_WAIT_SECONDS = 10.0


@dataclass
class ServiceStack:
    """The opened service objects (see the module docstring)."""

    settings: ServiceSettings
    store: Store
    redis: redis.asyncio.Redis
    manager: SandboxManager
    live: LiveEvents
    deployment: str | None = None  # the shared database's deployment (app.service.deployment)

    def workers(self, count: int, providers: ProviderFactory | None = None) -> list[Worker]:
        """``count`` workers on this stack; ``providers`` defaults to the real providers."""
        factory = providers or default_provider_factory()
        tools = web_tools_from_env()
        return [
            Worker(
                self.settings,
                self.store,
                self.redis,
                project_workspaces(self.manager, self.settings),
                factory,
                tools,
                sandboxes=self.manager.settings,
            )
            for _ in range(count)
        ]

    @functools.cached_property
    def projects(self) -> ProjectStore:
        """The chats' projects (versioned source files), for the versions API (one store, so
        one Redis client for its commit locks)."""
        return project_store(self.settings)

    def project_access(self, env: Mapping[str, str] | None = None) -> ProjectAccess:
        """What the versions and remotes APIs are given: the project store, the sandbox
        manager (restores, an import's first sandbox), the installer, the limits."""
        settings = self.settings
        return ProjectAccess(
            self.projects,
            self.manager,
            manager_installer(self.manager),
            max_bytes=settings.project_max_bytes,
            starter=self.manager,
            remote_limits=RemoteLimits.from_env(settings.project_max_bytes, env),
            images_dir=ImageBuildSettings.images_folder(env),
        )

    def publisher(self, env: Mapping[str, str] | None = None) -> Publisher:
        """Publishing of versions (builds in sandboxes of this manager, kept in the data dir),
        with the ``KILN_PUBLISH_*`` settings of ``env`` (``os.environ`` unless given)."""
        return Publisher(
            self.projects,
            self.store,
            LocalBuildStorage(self.settings.published_dir),
            self.manager,
            PublishSettings.from_env(env),
            project_max_bytes=self.settings.project_max_bytes,
            app_env=self.store,
        )

    def health_checks(self) -> dict[str, HealthCheck]:
        """The checks of ``/healthz``: the database, Redis and the Docker engine answer."""

        async def store() -> None:
            await anyio.to_thread.run_sync(self.store.ping)

        async def redis_ping() -> None:
            await self.redis.ping()

        async def docker() -> None:
            await self.manager.ping()

        return {"store": store, "redis": redis_ping, "docker": docker}


def sandbox_settings_for(
    settings: ServiceSettings, env: Mapping[str, str] | None = None
) -> SandboxSettings:
    """The sandbox settings of ``env`` (``os.environ`` unless given) on the service's data
    directory, which names the sandboxes' instance unless ``KILN_INSTANCE`` does (``--data-dir``
    reaches the sandboxes this way, not through the process's environment)."""
    environment = dict(os.environ if env is None else env)
    environment["KILN_DATA_DIR"] = str(settings.data_dir)
    return SandboxSettings.from_env(environment)


@asynccontextmanager
async def open_stack(
    settings: ServiceSettings,
    sandbox_settings: SandboxSettings | None = None,
    *,
    store: Store | None = None,
) -> AsyncIterator[ServiceStack]:
    """Open store (unless given: benchmarks pass an instrumented one), Redis client and
    sandbox manager; close them all at the end."""
    if settings.redis_url is None:
        raise ConfigError("no Redis URL: set REDIS_URL (or let kiln serve start one)")
    base = sandbox_settings or sandbox_settings_for(settings)
    sandboxes = dataclasses.replace(base, redis_url=settings.redis_url)
    async with NestedExits() as stack:
        store = store or Store(
            settings.database_location, settings.secret_key, pool_size=settings.database_pool
        )
        stack.callback(store.close)
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            settings.redis_url, max_connections=POOL_CONNECTIONS, timeout=POOL_WAIT_SECONDS
        )
        client = redis.asyncio.Redis.from_pool(pool)  # closing the client closes the pool
        stack.push_async_callback(client.aclose)
        await ping_redis(client)  # a wrong password stops kiln here, in words
        # Before any reaping: the instance is claimed (for the deployment on a shared database).
        deployment = await join_deployment(settings, store, client, sandboxes.instance)
        manager = await SandboxManager.open(sandboxes)
        manager.app_env = app_env_lookup(store)
        stack.push_async_callback(manager.aclose)
        await stack.enter_async_context(manager)
        live = LiveEvents(client)
        tasks = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tasks.cancel_scope.cancel)
        tasks.start_soon(live.run)
        yield ServiceStack(settings, store, client, manager, live, deployment)


def build_app_for(stack: ServiceStack, stopping: anyio.Event) -> ASGIApp:
    """The ASGI app on ``stack``: real run service, the stack's health checks; its event
    streams end once ``stopping`` is set."""
    settings = stack.settings
    read = EnvReader(None, ConfigError)
    api_settings = ApiSettings(
        public_host=settings.public_host,
        public_port=settings.port,
        recordings_dir=read.optional_path("KILN_RECORDINGS_DIR"),
        max_event_streams_per_user=settings.max_event_streams_per_user,
        provider_env=dict(read.env),
        secret_key=settings.secret_key,  # preview links sealed by one process open in another
    )
    runs = RunService(
        stack.store,
        stack.redis,
        settings,
        live=stack.live,
        sandboxes=stack.manager.settings,
        room=stack.manager.memory_room,  # a swarm's nodes, not this host, hold the sandboxes
    )
    return build_app(
        stack.store,
        runs,
        stack.manager,
        settings=api_settings,
        health_checks=stack.health_checks(),
        projects=stack.project_access(read.env),
        stopping=stopping,
        preview_hold=redis_hold(stack.redis),
        preview_errors=PreviewErrorStream(stack.redis, ErrorStreamSettings.from_env(read)),
        publish_jobs=PublishJobs(stack.publisher(read.env), stack.store),
    )
