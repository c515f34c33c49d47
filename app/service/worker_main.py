"""A worker process: ``python -m app.service.worker_main`` (what ``kiln worker`` wraps).

It reads :class:`~app.config.ServiceSettings` and the sandbox settings from the environment
(``REDIS_URL`` is required: a separate worker shares the API's Redis and data directory), opens
the store, the sandbox manager and the web tools, and consumes the queue until SIGINT/SIGTERM.
Runs in progress when it stops are left pending; another worker resumes them after
``KILN_RUN_CLAIM_IDLE`` seconds (a restarted worker is another worker).
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys

import anyio
import redis.asyncio

from app.agent.web_tools import web_tools_from_env
from app.config import ServiceSettings
from app.errors import ConfigError
from app.projects.app_env import app_env_lookup
from app.runs.execution import ProviderFactory, WorkspaceFactory
from app.runs.worker import Worker, default_provider_factory
from app.service.deployment import join_deployment
from app.service.stack import sandbox_settings_for
from app.service.workspaces import project_workspaces
from app.store import Store
from sandbox import NestedExits, SandboxManager, SandboxSettings, ping_redis

EXIT_OK, EXIT_FAILED, EXIT_BAD_USAGE = 0, 1, 2


async def serve_worker(
    settings: ServiceSettings,
    *,
    name: str | None = None,
    workspaces: WorkspaceFactory | None = None,
    providers: ProviderFactory | None = None,
) -> None:
    """Run one worker until cancelled (or a signal), then release everything it opened.

    ``workspaces`` defaults to sandboxes of a :class:`SandboxManager` opened here and
    ``providers`` to :func:`default_provider_factory` (tests pass stand-ins).
    """
    if settings.redis_url is None:
        raise ConfigError("a worker needs REDIS_URL: the queue is shared with the API")
    sandboxes = dataclasses.replace(sandbox_settings_for(settings), redis_url=settings.redis_url)
    async with NestedExits() as stack:
        store = Store(
            settings.database_location, settings.secret_key, pool_size=settings.database_pool
        )
        stack.callback(store.close)
        client = redis.asyncio.Redis.from_url(settings.redis_url)
        stack.push_async_callback(client.aclose)
        await ping_redis(client)  # a wrong password stops the worker here, in words
        if workspaces is None:
            await join_deployment(settings, store, client, sandboxes.instance)
            manager = await _open_manager(stack, sandboxes)
            manager.app_env = app_env_lookup(store)
            workspaces = project_workspaces(manager, settings)
        worker = Worker(
            settings,
            store,
            client,
            workspaces,
            providers or default_provider_factory(),
            web_tools_from_env(),
            name=name,
            sandboxes=sandboxes,
        )
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_stop_on_signal, tasks.cancel_scope)
            await worker.run()


async def _open_manager(stack: NestedExits, sandboxes: SandboxSettings) -> SandboxManager:
    """The sandbox manager on ``sandboxes`` (closed with ``stack``); the instance is claimed."""
    manager = await SandboxManager.open(sandboxes)
    stack.push_async_callback(manager.aclose)
    # Entered, the manager keeps its warm pool and reaps idle sandboxes while the worker runs.
    return await stack.enter_async_context(manager)


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _signal in signals:
            scope.cancel()
            return


def main() -> int:
    """Run a worker process; the exit code."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        settings = ServiceSettings.from_env()
    except ConfigError as exc:
        print(f"kiln worker: {exc}", file=sys.stderr)
        return EXIT_BAD_USAGE
    try:
        anyio.run(serve_worker, settings)
    except ConfigError as exc:
        print(f"kiln worker: {exc}", file=sys.stderr)
        return EXIT_BAD_USAGE
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
