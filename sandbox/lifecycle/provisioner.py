"""A recorded sandbox's Docker objects, kept in step with the registry: make, revive, remove.

:class:`SandboxManager <sandbox.lifecycle.manager.SandboxManager>` decides *which* sandbox a chat
gets; this module does what every such decision comes down to, for one sandbox at a time:

- ``provision``: save the record first (counted against ``settings.sandbox_limit`` in one step,
  so the reaper never sees an orphan), then the volume, the network and the hardened container;
  a failure on the way removes whatever was made;
- ``revive``: a new container on the volume of a sandbox whose container died or vanished,
  always on the shared network (a sandbox made before sharing moves over; its network goes);
- ``forget``: remove container, volume (with its quota) and network, then the record and the
  sandbox's buffered writes;
- ``ensure_network``: the instance's one sandbox network and its npm proxy, made or adopted.
  The proxy's address is only known once it runs, so :attr:`Provisioner.settings` is replaced
  with one that carries it (``sandbox_registry``); new containers get it in their environment.

It holds no per-process state of sandboxes (locks, install queues, held ones): the manager does.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio
import docker

from sandbox.containers.disk_quota import SandboxDisk
from sandbox.containers.hardening import object_labels
from sandbox.containers.labels import network_name, volume_name
from sandbox.containers.networks import ensure_sandbox_network, is_own_network, remove_network
from sandbox.containers.npm_proxy import ensure_proxy, remove_proxy
from sandbox.containers.provisioning import (
    StartedContainer,
    create_volume,
    remove_sandbox_objects,
    replace_container,
    start_container,
)
from sandbox.docker_boundary import call
from sandbox.errors import SandboxCapacity, SandboxError
from sandbox.handle import Sandbox
from sandbox.images.templates import Template, get_template
from sandbox.lifecycle.registry import SandboxRecord, SandboxRegistry
from sandbox.settings import SandboxSettings
from sandbox.writes.write_buffer import discard_sandbox_writes

__all__ = ["Provisioner"]
log = logging.getLogger(__name__)


class Provisioner:
    """Makes, revives and removes the Docker objects and records of one instance's sandboxes."""

    def __init__(
        self,
        client: docker.DockerClient,
        registry: SandboxRegistry,
        settings: SandboxSettings,
        disk: SandboxDisk | None,
        clock: Callable[[], float],
    ) -> None:
        self.client = client
        self.registry = registry
        self.settings = settings
        self.disk = disk  # each sandbox's quota-limited writable space (None: no quotas)
        self._clock = clock

    async def ensure_network(self) -> str:
        """The instance's sandbox network and npm proxy, made or adopted; the registry URL
        sandboxes use (new containers get it in their environment, installs on their argv)."""
        settings = self.settings
        await ensure_sandbox_network(self.client, settings.network, settings.instance)
        url = await ensure_proxy(self.client, settings)
        if url != settings.sandbox_registry:
            self.settings = replace(settings, sandbox_registry=url)
        return url

    async def provision(self, template: str, *, owner: str, chat: str, state: str) -> Sandbox:
        """Record and start a new sandbox (volume, hardened container on the shared network);
        ``SandboxCapacity`` when the host holds ``settings.sandbox_limit`` sandboxes already."""
        spec = get_template(template)
        record = self._new_record(template, owner=owner, chat=chat)
        # First, so the reaper never sees it as an orphan; counted and saved in one step.
        limit = self.settings.sandbox_limit
        held = await self.registry.save_within(record, limit)
        if held is not None:
            raise SandboxCapacity(
                f"this host holds {held} sandboxes, the limit is {limit} "
                "(KILN_MAX_SANDBOXES); try again when one is released"
            )
        try:
            started = await self._create_objects(spec, record)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.forget(record)
            raise
        record = record.with_changes(container_id=started.container_id, ip=started.ip, state=state)
        await self.registry.save(record)
        return record.handle()

    async def revive(self, record: SandboxRecord) -> Any:
        """A new container on the sandbox's volume, on the shared network (a sandbox that had
        its own network moves over, and its network goes); the live docker Container."""
        network = self.settings.network
        await self.ensure_network()
        started = await replace_container(
            self.client,
            self.settings,
            get_template(record.template),
            record.id,
            volume=record.volume,
            network=network,
            labels=self._labels(record),
        )
        await self.registry.update(
            record.id, container_id=started.container_id, ip=started.ip, network=network
        )
        if is_own_network(record.id, record.network):
            await remove_network(self.client, record.network)
        return await call(self.client.containers.get, started.container_id)

    async def forget(self, record: SandboxRecord) -> None:
        """Remove the sandbox's container, volume and own network, its record and its buffered
        writes (each step idempotent: a half-made sandbox goes the same way)."""
        await remove_sandbox_objects(
            self.client,
            record.id,
            volume=record.volume,
            network=record.network,
            disk=self.disk,
        )
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
                await remove_network(self.client, self.settings.network)  # raises while in use
                await remove_proxy(self.client, self.settings.instance, with_cache=True)
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

    async def _create_objects(self, template: Template, record: SandboxRecord) -> StartedContainer:
        """Volume, network and started container of a just-recorded sandbox."""
        labels = self._labels(record)
        disk = await create_volume(self.client, record.volume, labels, self.disk)
        await self.ensure_network()  # a new record is always on the shared network
        return await start_container(
            self.client,
            self.settings,
            template,
            record.id,
            volume=record.volume,
            network=record.network,
            labels=labels,
            disk=disk,
        )
