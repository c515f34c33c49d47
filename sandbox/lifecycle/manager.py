"""The sandbox manager: which sandbox a chat gets (reuse, warm pool, new), release, destroy.

Public API (what the write path, the agent loop, the preview proxy and the CLI use)::

    manager = await SandboxManager.open(SandboxSettings.from_env())
    async with manager:                       # optional: runs the warm pool and the reaper loop
        sandbox = await manager.acquire(chat="c1", owner="u1", template="vite-react")
        sandbox.id, sandbox.container_id, sandbox.template, sandbox.volume, sandbox.network
        sandbox.dev_url                       # http://<container ip on its network>:<dev port>
        container = await manager.container_for(sandbox.id)   # live docker Container
        await manager.install(sandbox.id, ["zod@^3"], on_output)
        result = await manager.run_command(sandbox.id, ["npm", "run", "build"], on_output)
        await manager.list_files(sandbox.id)  # [WorkspaceFile(path, size)], as the sandbox user
        await manager.read_file(sandbox.id, "src/App.jsx")  # text or None; never via a symlink
        await manager.apply_app_env(sandbox.id)  # the chat's environment changed: write it again
        await manager.release(sandbox.id)     # the run is done; the chat keeps its sandbox
    await manager.aclose()

- ``acquire`` returns the chat's existing sandbox (reviving a dead container), else a warm one
  from the pool (already serving its dev server), else a freshly provisioned one (whose dev
  server may still be starting: ``wait_ready``); another template replaces the chat's sandbox.
- ``container_for`` is the write path's recovery point: a container that died or vanished is
  started anew on the same volume and network (its address may change: ``get`` again); a
  sandbox whose cluster node was lost is ``SandboxLost`` (``sandbox_lost``, the run ends in
  words), and the chat's next ``acquire`` gives it a new sandbox on another node (the project
  store restores it on acquire).
- The app's environment (:mod:`sandbox.execution.app_env`): ``app_env`` (the wiring sets it)
  gives a chat's variables; a container gets them when it is bound to a chat (``acquire``) or
  made again (``container_for``), and again on ``apply_app_env``; every exec redacts the
  chat's secrets from its output.
- ``park`` (``kiln serve`` stopping) removes the containers no other process holds, the
  instance's network and npm proxy (:mod:`sandbox.containers.npm_proxy`, the only registry
  sandboxes reach), and keeps volumes and records; ``destroy`` removes container, volume and
  record; ``reap`` runs one reaper pass.
- Capacity (docs/architecture.md, "Fair shares"): at most ``settings.sandbox_limit`` sandboxes,
  warm ones included (``SandboxCapacity`` past it; an acquire first gives up a warm one of
  another template), at most ``settings.max_sandboxes_per_user`` per user, and none past the
  host's memory reserve (:mod:`sandbox.lifecycle.fair_share`,
  :mod:`sandbox.backends.host_memory`); the warm pool (:mod:`sandbox.lifecycle.warm_pool`)
  grows only into free slots.

State shared between processes (chat bindings, owners, last use) lives in the Redis registry;
the warm pool, the install queues and the locks are per process. The work is done in
:mod:`sandbox.lifecycle.provisioner` (the backend's sandboxes and their records) and
:mod:`sandbox.lifecycle.operations` (installs, commands, workspace reads).

Where sandboxes live is the backend's (:mod:`sandbox.backends.contract`; ``KILN_SANDBOX_BACKEND``
chooses it, the single Docker engine by default): the manager creates, revives, parks and
removes them, waits for their dev port, asks the engine's health and the hosts' capacity
through it. ``client`` and ``disk`` are the backend's, for the modules that still speak
docker-py (docs/architecture.md, "Sandbox backends").
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from operator import attrgetter
from types import TracebackType
from typing import Any

import anyio
import anyio.abc

from sandbox.backends.choice import open_backend
from sandbox.backends.contract import EngineBackend, HostCapacity, SandboxStatus
from sandbox.backends.host_memory import busy_bytes, room_for
from sandbox.containers.disk_quota import QuotaDisk, SandboxDisk
from sandbox.errors import (
    DockerUnavailable,
    SandboxCapacity,
    SandboxConfigError,
    SandboxError,
    SandboxLost,
    SandboxNotFound,
    SandboxUnavailable,
)
from sandbox.execution.app_env import AppEnvironment, write_app_env
from sandbox.execution.exec_stream import ExecResult, OutputSink
from sandbox.execution.install_queue import InstallQueue, InstallResult
from sandbox.execution.workspace_files import WorkspaceFile
from sandbox.handle import Sandbox
from sandbox.images.templates import DEFAULT_TEMPLATE, Template, get_template
from sandbox.lifecycle import parking, reaper
from sandbox.lifecycle.fair_share import RoomFacts, sandboxes_to_give_up
from sandbox.lifecycle.operations import SandboxOperations
from sandbox.lifecycle.outage import EngineWatch
from sandbox.lifecycle.pool_report import publish_target
from sandbox.lifecycle.pool_sizing import PoolTarget
from sandbox.lifecycle.provisioner import Provisioner
from sandbox.lifecycle.registry import SandboxRecord, SandboxRegistry
from sandbox.lifecycle.warm_pool import WarmPool
from sandbox.settings import SandboxSettings

__all__ = ["AppEnvLookup", "Sandbox", "SandboxManager"]
log = logging.getLogger(__name__)
# After a take, the pool's refill waits this long, and while installs run up to the longest:
# the restore of the sandbox just handed out (npm install, Vite's pre-bundling) is what a person
# waits for (kiln issue 24).
POOL_REFILL_PAUSE_SECONDS, POOL_REFILL_LONGEST_PAUSE_SECONDS = 3.0, 30.0
# A chat's app environment, by chat id (the app's store: set as ``SandboxManager.app_env``).
AppEnvLookup = Callable[[str], Awaitable[AppEnvironment]]
NO_APP_ENV = AppEnvironment()


class SandboxManager:
    """Owns the sandboxes of one kiln instance (see the module docstring for the API)."""

    def __init__(
        self,
        backend: EngineBackend,
        registry: SandboxRegistry,
        settings: SandboxSettings,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        for name in settings.warm_pool_templates:
            get_template(name)  # fail at start-up on a misspelt template, not in the pool loop
        self.backend = backend
        self.registry = registry
        self._clock = clock
        self.provisioner = Provisioner(backend, registry, settings, clock)
        self.operations = SandboxOperations(self.provisioner, self.container_for, self.app_env_of)
        # Where a chat's app environment comes from; none until the wiring sets it.
        self.app_env: AppEnvLookup | None = None
        self._locks: dict[str, anyio.Lock] = {}
        self._held: set[str] = set()  # sandboxes this process acquired and has not released
        # Whether Docker is known away: acquires fail at once while it is (issue 15).
        self.engine = EngineWatch(backend.ping)
        self._group: anyio.abc.TaskGroup | None = None
        self.pool: WarmPool[Sandbox] = WarmPool(
            bounds=settings.warm_pool_bounds,
            templates=settings.warm_pool_templates,
            provision=self._provision_warm,
            is_alive=lambda sandbox: self._running(sandbox.container_id),
            touch=lambda sandbox: self._touch(sandbox.id),
            discard=lambda sandbox: self.destroy(sandbox.id),
            touch_interval=min(settings.idle_ttl_seconds / 3, 60.0),
            free_slots=self._free_slots,
            window=settings.warm_pool_window_seconds,
            refills=settings.warm_pool_refills,
            clock=clock,
            on_target=self._report_pool,
            refill_pause=POOL_REFILL_PAUSE_SECONDS,
            longest_pause=POOL_REFILL_LONGEST_PAUSE_SECONDS,
            busy=self.operations.installing,
        )

    @property
    def client(self) -> Any:
        """The backend's Docker client (for the modules that still speak docker-py)."""
        return self.backend.client

    @property
    def disk(self) -> QuotaDisk | None:
        """Each sandbox's quota-limited writable space (None: the settings give it none)."""
        return self.backend.disk

    @property
    def settings(self) -> SandboxSettings:
        """The instance's settings, with the npm proxy's address once it runs
        (:meth:`ensure_network`)."""
        return self.provisioner.settings

    @classmethod
    async def open(cls, settings: SandboxSettings) -> SandboxManager:
        """A manager on the backend ``settings.backend`` names (opened: for Docker, its own
        client, the settings' call deadlines and quotas) with its own Redis connection."""
        backend = await open_backend(settings)
        if not isinstance(backend, EngineBackend):  # every backend kiln has is one today
            await backend.aclose()
            raise SandboxConfigError(
                f"KILN_SANDBOX_BACKEND={backend.name!r}: this backend reaches no Docker engine, "
                "which the execution path still needs (docs/architecture.md, Sandbox backends)"
            )
        return cls(
            backend, SandboxRegistry.from_url(settings.redis_url, settings.instance), settings
        )

    async def aclose(self) -> None:
        """Remove the shared sandbox network and the npm proxy on it (with its cache) if no
        sandbox is left (a process that gave all its sandboxes up leaves nothing behind; one
        of the instance provisioning just now recreates it, or fails in words); close Redis
        and Docker."""
        await self.provisioner.remove_network_if_unused()
        await self.registry.aclose()
        await self.backend.aclose()

    async def ping(self) -> None:
        """Raise ``DockerUnavailable`` unless the engine answers a short ping (at once while
        it is known away, ``self.engine``, where the answer is recorded: a green health check
        lets acquires through again)."""
        await self.engine.check()

    async def __aenter__(self) -> SandboxManager:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        try:
            await self.ensure_network()
        except SandboxError as exc:  # Docker away or no proxy image: the first install says so
            log.warning("sandbox network or npm proxy not ready at start: %s", exc)
        self._group.start_soon(self.pool.run)
        self._group.start_soon(self._reap_loop)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._group is not None
        self._group.cancel_scope.cancel()
        try:
            return await self._group.__aexit__(exc_type, exc, tb)
        finally:
            self._group = None
            with anyio.CancelScope(shield=True):
                await self.pool.drain()

    async def acquire(self, chat: str, owner: str, template: str = DEFAULT_TEMPLATE) -> Sandbox:
        """The chat's sandbox: its existing one, a warm one, or a new one (see module doc);
        ``DockerUnavailable`` within seconds when the engine does not answer a short ping, and
        at once while it is known away (:class:`EngineWatch`), instead of a run waiting for
        the client's long timeout before its user hears anything (issue 15)."""
        get_template(template)
        await self.engine.check()
        try:
            return await self._acquire(chat, owner, template)
        except DockerUnavailable as exc:
            self.engine.mark_down(exc)  # a call past its deadline: the next acquires fail fast
            raise

    async def _acquire(self, chat: str, owner: str, template: str) -> Sandbox:
        """:meth:`acquire` once the engine answered."""
        async with self._locked(f"chat:{chat}"):
            existing = await self._chat_sandbox(chat, owner, template)
            if existing is not None:
                return existing
            await self._make_room(owner, template)
            sandbox = await self.pool.take(template)
            if sandbox is None:
                sandbox = await self._provision_making_room(template, owner=owner, chat=chat)
            winner = await self.registry.bind_chat(chat, sandbox.id)
            if winner != sandbox.id:  # another process bound this chat first
                await self.destroy(sandbox.id)
                existing = await self._chat_sandbox(chat, owner, template)
                if existing is None:
                    raise SandboxUnavailable(f"chat {chat!r} lost its sandbox while acquiring")
                return existing
            await self.registry.update(
                sandbox.id, owner=owner, chat=chat, state="in_use", last_used=self._clock()
            )
            self._held.add(sandbox.id)
            # A warm or new container served no chat yet: it gets this one's environment.
            await self._write_app_env(chat, sandbox.container_id, fresh=True)
            return replace(sandbox, owner=owner, chat=chat)

    async def provision(
        self, template: str, *, owner: str = "", chat: str = "", state: str = "in_use"
    ) -> Sandbox:
        """Create and start a new sandbox (volume, hardened container on the shared network);
        ``SandboxCapacity`` when the host holds ``settings.sandbox_limit`` sandboxes already."""
        return await self.provisioner.provision(template, owner=owner, chat=chat, state=state)

    async def release(self, sandbox_id: str) -> None:
        """The caller is done for now; the chat keeps the sandbox until it idles out."""
        await self.registry.update(sandbox_id, state="idle", last_used=self._clock())
        self._held.discard(sandbox_id)

    async def park(self, *, shared: bool = False) -> parking.ParkReport:
        """Stop-time clean-up of ``kiln serve``: remove the containers of the sandboxes no other
        process holds (only those this one holds when other hosts share the instance:
        ``shared``) and the instance's networks, keep their volumes and records
        (:mod:`sandbox.lifecycle.parking` says why)."""
        report = await parking.park(
            self.backend,
            self.registry,
            self.settings,
            set(self._held),
            self.provisioner.claim_for,
            shared=shared,
        )
        self._held.clear()
        return report

    async def destroy(self, sandbox_id: str) -> None:
        """Remove a sandbox completely: container, network, volume and record."""
        await self._forget(await self.provisioner.record_for_removal(sandbox_id))

    async def capacity(self) -> tuple[int, int]:
        """``(sandboxes held, warm ones included; the limit)``."""
        return len(await self.registry.all()), self.settings.sandbox_limit

    async def get(self, sandbox_id: str) -> Sandbox:
        """The sandbox's current handle; ``SandboxNotFound`` if it is unknown."""
        return (await self._record(sandbox_id)).handle()

    async def list(self) -> list[SandboxRecord]:
        """Every sandbox of this instance, as recorded."""
        return await self.registry.all()

    async def container_for(self, sandbox_id: str) -> Any:
        """A running container of the sandbox, started anew on its volume if it died."""
        async with self._locked(sandbox_id):
            record = await self._record(sandbox_id)
            container = await self.backend.container(record.container_id)
            if container is None or container.status != "running":
                container = await self.provisioner.revive(record)
                await self._write_app_env(record.chat, container.id, fresh=True)
            await self._touch(sandbox_id)
            return container

    async def engine_beside(self, container_id: str, image: str) -> Any:
        """The docker client of the engine the sandbox container runs on, with ``image`` there,
        for a helper container in its network namespace (the render check's browser); a swarm
        node's engine on a cluster (:meth:`EngineBackend.engine_beside`)."""
        return await self.backend.engine_beside(container_id, image)

    async def app_env_of(self, sandbox_id: str) -> AppEnvironment:
        """The app environment of the sandbox's chat (none for a sandbox of no chat)."""
        record = await self.registry.get(sandbox_id)
        if record is None or not record.chat or self.app_env is None:
            return NO_APP_ENV
        return await self.app_env(record.chat)

    async def apply_app_env(self, sandbox_id: str) -> bool:
        """Write the chat's current environment into the sandbox's running container (the
        dev server starts over with it); ``False`` when no container runs (the next one gets
        it as it starts)."""
        async with self._locked(sandbox_id):
            record = await self._record(sandbox_id)
            if not record.container_id or not await self._running(record.container_id):
                return False
            await self._write_app_env(record.chat, record.container_id, fresh=False)
            return True

    async def _write_app_env(self, chat: str, container_id: str, *, fresh: bool) -> None:
        """Write the chat's environment into the container; a ``fresh`` one (just made or
        taken from the pool) has none, so an empty environment costs it no exec."""
        if self.app_env is None or not chat:
            return
        env = await self.app_env(chat)
        if env.values or not fresh:
            # Through the container's own engine (a swarm node's, on a cluster).
            container = await self.backend.container(container_id)
            client = self.client if container is None else container.client
            await write_app_env(client, container_id, env)

    async def wait_ready(self, sandbox_id: str, timeout: float | None = None) -> Sandbox:
        """Wait until the sandbox's dev server accepts connections; the current handle."""
        sandbox = await self.get(sandbox_id)
        limit = self.settings.dev_ready_timeout_seconds if timeout is None else timeout
        running = SandboxStatus(sandbox.id, sandbox.container_id, sandbox.ip)
        await self.backend.wait_port(running, sandbox.dev_port, limit)
        return sandbox

    async def reap(self, now: float | None = None) -> reaper.ReapReport:
        """One reaper pass over this instance (idle, expired, orphans)."""
        when = self._clock() if now is None else now
        host_disk = self.disk if isinstance(self.disk, SandboxDisk) else None
        report = await reaper.reap(
            self.client, self.registry, self.settings, self.destroy, now=when, disk=host_disk
        )
        report.elsewhere = await self.backend.reap_elsewhere(self._known_ids)
        return report

    async def _known_ids(self) -> set[str]:
        return {record.id for record in await self.registry.all()}

    async def ensure_network(self) -> str:
        """The instance's sandbox network and npm proxy, made or adopted; the registry URL
        sandboxes use (new containers get it in their environment, installs on their argv)."""
        return await self.provisioner.ensure_network()

    def install_queue(self, sandbox_id: str) -> InstallQueue:
        """The sandbox's install queue (created on first use, per process)."""
        return self.operations.install_queue(sandbox_id)

    async def install(
        self, sandbox_id: str, specs: Sequence[str], on_output: OutputSink | None = None
    ) -> InstallResult:
        """Install and save packages in queue order; invalid specs raise ``InstallRefused``."""
        return await self.operations.install(sandbox_id, specs, on_output)

    async def run_command(
        self, sandbox_id: str, argv: Sequence[str], on_output: OutputSink | None = None
    ) -> ExecResult:
        """Run an allowed command (``CommandRefused`` otherwise) once installs are done."""
        return await self.operations.run_command(sandbox_id, argv, on_output)

    async def run_builder(
        self,
        sandbox_id: str,
        template: Template,
        *,
        warm: bool,
        on_output: OutputSink | None = None,
    ) -> ExecResult:
        """Ask ``template``'s resident builder in the sandbox to build (its output and exit
        code are the build's) or to warm up, once installs are done."""
        return await self.operations.run_builder(
            sandbox_id, template, warm=warm, on_output=on_output
        )

    async def list_files(self, sandbox_id: str) -> Sequence[WorkspaceFile]:
        """The workspace's regular files (dependency and build folders left out)."""
        return await self.operations.list_files(sandbox_id)

    async def read_file(self, sandbox_id: str, path: str) -> str | None:
        """Workspace file ``path`` as text, ``None`` if it is no regular file (or a symlink).

        Read as the sandbox user; ``FileTooLarge`` past the read limit, ``UnsafePathError``
        for a path that leaves the workspace.
        """
        return await self.operations.read_file(sandbox_id, path)

    @asynccontextmanager
    async def _locked(self, key: str) -> AsyncIterator[None]:
        """Hold the in-process lock of ``key``; forget it when nobody else wants it."""
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            yield
        # A waiter is handed the lock on release, so an unlocked lock has no one queued.
        if not lock.locked() and self._locks.get(key) is lock:
            del self._locks[key]

    async def _record(self, sandbox_id: str) -> SandboxRecord:
        record = await self.registry.get(sandbox_id)
        if record is None:
            raise SandboxNotFound(
                f"no sandbox {sandbox_id!r} in instance {self.settings.instance!r}"
            )
        return record

    async def _touch(self, sandbox_id: str) -> None:
        await self.registry.update(sandbox_id, last_used=self._clock())

    async def _provision_making_room(self, template: str, *, owner: str, chat: str) -> Sandbox:
        """Provision; at the limit, give up one warm sandbox (of any template) and try again."""
        try:
            return await self.provision(template, owner=owner, chat=chat)
        except SandboxCapacity:
            for name in self.pool.templates:
                spare = await self.pool.take(name, demand=False)  # room, not a wish for more
                if spare is not None:
                    await self.destroy(spare.id)
                    return await self.provision(template, owner=owner, chat=chat)
            raise

    async def _free_slots(self) -> int:
        """How many more sandboxes the host may hold now, by count and by memory (each busy,
        :mod:`sandbox.backends.host_memory`); the warm pool grows only into them."""
        held, limit = await self.capacity()
        return max(min(limit - held, room_for(await self._headroom(), DEFAULT_TEMPLATE)), 0)

    async def _make_room(self, owner: str, template: str) -> None:
        """Before ``owner``'s chat gets a new sandbox, give up the idle ones
        :mod:`sandbox.lifecycle.fair_share` names (``SandboxCapacity`` when the owner's are
        all in use at their limit)."""
        settings = self.settings
        facts = RoomFacts(
            owner,
            settings.max_sandboxes_per_user,
            await self._host_full(template),
            self._clock() - settings.idle_ttl_full_seconds,
            frozenset(self._held),
        )
        for record in sandboxes_to_give_up(await self.registry.all(), facts):
            log.info("giving up idle sandbox %r of %r for a new one", record.id, record.owner)
            await self.destroy(record.id)

    async def _host_full(self, template: str) -> bool:
        """Whether a new sandbox of ``template`` is past the count or the memory reserve."""
        held, limit = await self.capacity()
        return held >= limit or await self._headroom() < busy_bytes(template)

    async def _headroom(self) -> int:
        return (await self.memory_room()).headroom

    async def memory_room(self) -> HostCapacity:
        """The node with the most memory a new sandbox may take (above the reserve admission
        keeps; :meth:`SandboxBackend.capacity`: the one host on Docker); none with room
        without nodes."""
        nodes = await self.backend.capacity()
        return max(nodes, key=attrgetter("headroom"), default=HostCapacity(0))

    async def _running(self, container_id: str) -> bool:
        """Whether the sandbox's workload exists and runs."""
        status = await self.backend.status(container_id)
        return status is not None and status.running

    async def _report_pool(self, template: str, ready: int, target: PoolTarget) -> None:
        """Publish a pool decision for ``kiln doctor`` (:mod:`sandbox.lifecycle.pool_report`)."""
        redis, instance = self.registry.redis, self.settings.instance
        await publish_target(redis, instance, template, ready, target, now=self._clock())

    async def _forget(self, record: SandboxRecord) -> None:
        """Remove the sandbox (:meth:`Provisioner.forget`) and this process's state of it."""
        await self.provisioner.forget(record)
        self.operations.forget(record.id)
        self._locks.pop(record.id, None)
        self._held.discard(record.id)

    async def _chat_sandbox(self, chat: str, owner: str, template: str) -> Sandbox | None:
        sandbox_id = await self.registry.chat_sandbox(chat)
        if sandbox_id is None:
            return None
        record = await self.registry.get(sandbox_id)
        if record is None:
            await self.registry.unbind_chat(chat, sandbox_id)
            return None
        if record.owner and record.owner != owner:
            raise SandboxError(f"chat {chat!r} has a sandbox of another owner")
        if record.template != template:
            await self.destroy(sandbox_id)
            return None
        try:
            await self.container_for(sandbox_id)
        except SandboxLost as exc:  # its node is gone (a cluster): start over on another one
            log.warning("chat %r: %s; a new sandbox takes its place", chat, str(exc))
            await self.destroy(sandbox_id)
            return None
        await self.registry.update(sandbox_id, state="in_use", last_used=self._clock())
        self._held.add(sandbox_id)
        return await self.get(sandbox_id)

    async def _provision_warm(self, template: str) -> Sandbox:
        sandbox = await self.provision(template, state="warm")
        try:
            await self.wait_ready(sandbox.id)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.destroy(sandbox.id)
            raise
        return sandbox

    async def _reap_loop(self) -> None:
        while True:
            await anyio.sleep(self.settings.reap_interval_seconds)
            try:
                await self.reap()
            except SandboxError as exc:
                # Docker or Redis briefly away: the next pass catches up.
                log.warning("reaper pass failed: %s", exc)
