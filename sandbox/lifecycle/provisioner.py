"""A recorded sandbox's backend objects, kept in step with the registry: make, revive, remove.

:class:`SandboxManager <sandbox.lifecycle.manager.SandboxManager>` decides *which* sandbox a chat
gets; this module does what every such decision comes down to, for one sandbox at a time:

- ``provision``: save the record first (counted against ``settings.sandbox_limit`` in one step,
  so the reaper never sees an orphan), then the sandbox from its template through the backend
  (:mod:`sandbox.backends.contract`: volume, network and hardened container on Docker); a
  failure on the way removes whatever was made;
- ``revive``: a new container on the volume of a sandbox whose container died or vanished,
  always on the shared network (a sandbox made before sharing moves over; its network goes);
- ``forget``: remove container, volume (with its quota) and network, then the record and the
  sandbox's buffered writes;
- ``ensure_network``: the instance's one sandbox network and its npm proxy, made or adopted.
  The proxy's address is only known once it runs, so :attr:`Provisioner.settings` is replaced
  with one that carries it (``sandbox_registry``); new containers get it in their environment.

It holds no per-process state of sandboxes (locks, install queues, held ones): the manager does,
and no engine of its own: every object goes through the backend.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio

from sandbox.backends.contract import (
    EngineBackend,
    SandboxClaim,
    SandboxStatus,
    sandbox_template,
)
from sandbox.containers.disk_quota import QuotaDisk
from sandbox.containers.hardening import object_labels
from sandbox.containers.labels import network_name, volume_name
from sandbox.errors import SandboxCapacity, SandboxError, SandboxUnavailable
from sandbox.handle import Sandbox
from sandbox.images.templates import DEFAULT_TEMPLATE, TEMPLATES, get_template
from sandbox.lifecycle.registry import SandboxRecord, SandboxRegistry
from sandbox.settings import SandboxSettings
from sandbox.writes.write_buffer import discard_sandbox_writes

__all__ = ["Provisioner"]
log = logging.getLogger(__name__)


class Provisioner:
    """Makes, revives and removes the sandboxes and records of one instance, through its
    backend."""

    def __init__(
        self,
        backend: EngineBackend,
        registry: SandboxRegistry,
        settings: SandboxSettings,
        clock: Callable[[], float],
    ) -> None:
        self.backend = backend
        self.registry = registry
        self.settings = settings
        self._clock = clock

    @property
    def client(self) -> Any:
        """The backend's engine client (what the execution path still speaks to)."""
        return self.backend.client

    @property
    def disk(self) -> QuotaDisk | None:
        """Each sandbox's quota-limited writable space (None: no quotas)."""
        return self.backend.disk

    async def ensure_network(self) -> str:
        """The instance's sandbox network and npm proxy, made or adopted; the registry URL
        sandboxes use (new containers get it in their environment, installs on their argv)."""
        url = await self.backend.npm_registry()
        if url != self.settings.sandbox_registry:
            self.settings = replace(self.settings, sandbox_registry=url)
        return url

    async def provision(self, template: str, *, owner: str, chat: str, state: str) -> Sandbox:
        """Record and start a new sandbox (volume, hardened container on the shared network);
        ``SandboxCapacity`` when the host holds ``settings.sandbox_limit`` sandboxes already."""
        get_template(template)  # an unknown one fails here, before anything is saved
        record = self._new_record(template, owner=owner, chat=chat)
        claim = self.claim_for(record)
        # First, so the reaper never sees it as an orphan; counted and saved in one step.
        limit = self.settings.sandbox_limit
        held = await self.registry.save_within(record, limit)
        if held is not None:
            raise SandboxCapacity(
                f"this host holds {held} sandboxes, the limit is {limit} "
                "(KILN_MAX_SANDBOXES); try again when one is released"
            )
        try:
            await self.ensure_network()  # the backend's settings gain the proxy's address
            started = await self.backend.create(claim)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.forget(record)
            raise
        preview = await self._preview(started, record.template)
        record = record.with_changes(
            container_id=started.workload, ip=started.address, preview=preview, state=state
        )
        await self.registry.save(record)
        return record.handle()

    async def revive(self, record: SandboxRecord) -> Any:
        """A new container on the sandbox's volume, on the shared network (a sandbox that had
        its own network moves over, and its network goes); the live docker Container."""
        get_template(record.template)  # a template this kiln no longer has: no new container
        await self.ensure_network()
        started: SandboxStatus = await self.backend.revive(self.claim_for(record))
        await self.registry.update(
            record.id,
            container_id=started.workload,
            ip=started.address,
            preview=await self._preview(started, record.template),
            network=self.settings.network,
        )
        container = await self.backend.container(started.workload)
        if container is None:  # removed again at once: by hand, or the engine lost it
            raise SandboxUnavailable(f"sandbox {record.id!r} vanished as it was revived")
        return container

    async def _preview(self, started: SandboxStatus, template: str) -> str:
        """``host:port`` where kiln reaches the started sandbox's dev port."""
        address = await self.backend.preview_address(started, get_template(template).dev_port)
        return f"{address.host}:{address.port}"

    async def forget(self, record: SandboxRecord) -> None:
        """Remove the sandbox's container, volume and own network, its record and its buffered
        writes (each step idempotent: a half-made sandbox goes the same way)."""
        await self.backend.destroy(self.claim_for(record))
        await self.registry.delete(record)
        await discard_sandbox_writes(self.registry.redis, record.id)

    async def record_for_removal(self, sandbox_id: str) -> SandboxRecord:
        """The sandbox's record; for an unknown id one naming the objects it would have (volume,
        own network), so a half-recorded sandbox is removed all the same."""
        record = await self.registry.get(sandbox_id)
        if record is not None:
            return record
        return SandboxRecord(
            id=sandbox_id,
            template="",
            volume=volume_name(sandbox_id),
            network=network_name(sandbox_id),
        )

    async def remove_network_if_unused(self) -> None:
        """Remove the shared sandbox network and the npm proxy on it (with its cache) if the
        registry holds no sandbox; keep them (logged) while Docker refuses."""
        try:
            if not await self.registry.all():
                await self.backend.release_shared()  # raises while the network is in use
        except SandboxError as exc:
            # Docker refuses while a container still uses it (another process's new sandbox).
            log.info("sandbox network %r kept: %s", self.settings.network, exc)

    def _new_record(self, template: str, *, owner: str, chat: str) -> SandboxRecord:
        """The record of a sandbox about to be made, with a fresh id, on the shared network."""
        sandbox_id = secrets.token_hex(6)
        now = self._clock()
        return SandboxRecord(
            id=sandbox_id,
            template=template,
            volume=volume_name(sandbox_id),
            network=self.settings.network,
            owner=owner,
            chat=chat,
            created=now,
            last_used=now,
        )

    def claim_for(self, record: SandboxRecord) -> SandboxClaim:
        """The backend's claim of a recorded sandbox. A record of no template (one only named
        for removal) or of one this kiln no longer has gets the default template's: removing
        or parking needs names, not an image."""
        name = record.template if record.template in TEMPLATES else DEFAULT_TEMPLATE
        return SandboxClaim(
            sandbox_id=record.id,
            template=sandbox_template(self.settings, name),
            volume=record.volume,
            network=record.network,
            labels=self._labels(record),
        )

    def _labels(self, record: SandboxRecord) -> dict[str, str]:
        """The labels of the sandbox's Docker objects (the reaper and sweeps read them)."""
        return object_labels(
            self.settings,
            record.template,
            record.id,
            created=record.created,
            owner=record.owner,
            chat=record.chat,
        )
