"""The reaper: removes idle sandboxes, expired ones and orphaned Docker objects of one instance.

Three rules, each a pure function below, applied by :func:`reap`:

- **idle**: a registry record whose ``last_used`` is older than the idle TTL (every use of a
  sandbox touches it; the warm pool touches its own);
- **expired**: an object whose ``kiln.expiry`` label has passed, whatever the registry says (the
  fallback when Redis lost its state or a process died holding a sandbox);
- **orphan**: a container, network or volume labelled with this instance whose sandbox id the
  registry does not know (a crash between creating objects and recording them; records are
  written before objects are created, so a sandbox being provisioned is never an orphan), and
  a quota subvolume (:mod:`sandbox.containers.disk_quota`) of an unknown sandbox whose volume
  is gone (a crash between removing the one and the other).

Objects shared by all sandboxes (``kiln.sandbox=shared``: the sandbox network, the npm proxy's
container and cache volume) are kept; :func:`sweep_instance` removes everything of an instance,
shared objects included (the test suite's final sweep, ``kiln sandbox reap --all``). Only
objects carrying the instance's label are ever touched, so test sessions, and servers with
different data dirs (the default instance is named after the data dir), reap only their own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import docker

from sandbox.containers.disk_quota import QuotaDisk, SandboxDisk
from sandbox.containers.labels import (
    EXPIRY_LABEL,
    INSTANCE_LABEL,
    SHARED,
    instance_filter,
    volume_name,
)
from sandbox.containers.networks import remove_network
from sandbox.containers.provisioning import remove_container, remove_volume
from sandbox.docker_boundary import call
from sandbox.errors import SandboxNotFound
from sandbox.lifecycle.registry import SandboxRecord, SandboxRegistry
from sandbox.settings import LABEL, SandboxSettings

Destroy = Callable[[str], Awaitable[None]]


@dataclass
class ReapReport:
    """What one reaper pass removed, by rule."""

    idle: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    orphan_containers: list[str] = field(default_factory=list)
    orphan_networks: list[str] = field(default_factory=list)
    orphan_volumes: list[str] = field(default_factory=list)
    orphan_disks: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)  # on a cluster's nodes (the backend's)

    @property
    def total(self) -> int:
        """How many sandboxes and objects were removed."""
        groups = (self.idle, self.expired, self.orphan_containers, self.orphan_networks)
        others = (self.orphan_volumes, self.orphan_disks, self.elsewhere)
        return sum(len(items) for items in (*groups, *others))


@dataclass(frozen=True, slots=True)
class LabelledObject:
    """A container, network or volume as the reaper sees it: kind, name and labels."""

    kind: str  # container | network | volume
    name: str
    labels: Mapping[str, str]

    @property
    def sandbox_id(self) -> str:
        """The sandbox it belongs to (``shared`` for shared objects)."""
        return self.labels.get(LABEL, "")

    def belongs_to(self, instance: str) -> bool:
        """Whether it carries ``instance``'s label (the one test before removing anything)."""
        return self.labels.get(INSTANCE_LABEL) == instance


def idle_records(records: Iterable[SandboxRecord], now: float, ttl: float) -> list[SandboxRecord]:
    """Records not used for longer than ``ttl`` seconds."""
    return [record for record in records if now - record.last_used > ttl]


def label_expired(labels: Mapping[str, str], now: float) -> bool:
    """Whether an object's ``kiln.expiry`` label lies in the past (a missing one never does)."""
    try:
        expiry = float(labels.get(EXPIRY_LABEL, ""))
    except ValueError:
        return False
    return 0 < expiry < now


def orphans(
    objects: Iterable[LabelledObject], known_ids: set[str], instance: str
) -> list[LabelledObject]:
    """Objects of ``instance`` whose sandbox its registry does not know. Shared objects are
    never orphans, nor is anything of another instance: its sandboxes live in another registry
    (another server's Redis), so "unknown here" says nothing about them."""
    return [
        o
        for o in objects
        if o.belongs_to(instance)
        and o.sandbox_id not in (SHARED, "")
        and o.sandbox_id not in known_ids
    ]


async def reap(
    client: docker.DockerClient,
    registry: SandboxRegistry,
    settings: SandboxSettings,
    destroy: Destroy,
    *,
    now: float,
    disk: SandboxDisk | None,
) -> ReapReport:
    """One reaper pass over ``settings.instance``; ``destroy`` removes a known sandbox;
    ``disk`` the subvolumes on kiln's own host whose orphans go too (a swarm's are on its
    nodes, with the volumes the swarm backend removes)."""
    report = ReapReport()
    # Objects first, records after: a record is written before its sandbox's objects, so a
    # sandbox provisioned meanwhile is known by then and never taken for an orphan.
    disks = disk.volumes() if disk is not None else []
    objects = await labelled_objects(client, settings.instance)
    records = await registry.all()
    for record in idle_records(records, now, settings.idle_ttl_seconds):
        await destroy(record.id)
        report.idle.append(record.id)
    known = {record.id for record in records} - set(report.idle)
    for sandbox_id in sorted({o.sandbox_id for o in objects if label_expired(o.labels, now)}):
        if sandbox_id in known:
            await destroy(sandbox_id)
            known.discard(sandbox_id)
            report.expired.append(sandbox_id)
    for obj in orphans(objects, known, settings.instance):
        if await remove_object(client, obj, disk):
            getattr(report, f"orphan_{obj.kind}s").append(obj.name)
    if disk is not None:
        volumes = {o.name for o in objects if o.kind == "volume"}
        for name in orphan_disks(disks, volumes, known):
            if await disk.remove(name):
                report.orphan_disks.append(name)
    return report


def orphan_disks(disks: Iterable[str], volumes: set[str], known_ids: set[str]) -> list[str]:
    """Subvolumes whose workspace volume is gone and whose sandbox the registry does not know
    (one being provisioned is known before its subvolume is made)."""
    known_volumes = {volume_name(sandbox_id) for sandbox_id in known_ids}
    return [name for name in disks if name not in volumes and name not in known_volumes]


async def labelled_objects(client: docker.DockerClient, instance: str) -> list[LabelledObject]:
    """Every container, network and volume carrying ``instance``'s label; containers first.

    Docker's label filter selects them; the labels are checked again (by :func:`orphans`), so
    an engine or proxy that ignored the filter still never costs another instance anything."""
    filters = instance_filter(instance)
    # Sparse: no inspect per container, which fails for one removed meanwhile.
    containers = await call(client.containers.list, all=True, sparse=True, filters=filters)
    networks = await call(client.networks.list, filters=filters)
    volumes = await call(client.volumes.list, filters=filters)
    return (
        [
            LabelledObject("container", _container_name(c.attrs), _labels(c.attrs))
            for c in containers
        ]
        + [LabelledObject("network", n.name, _labels(n.attrs)) for n in networks]
        + [LabelledObject("volume", v.name, _labels(v.attrs)) for v in volumes]
    )


async def remove_object(
    client: docker.DockerClient, obj: LabelledObject, disk: QuotaDisk | None = None
) -> bool:
    """Remove one labelled object (a volume's subvolume on ``disk`` too); ``False`` when it
    was already gone."""
    try:
        if obj.kind == "container":
            return await remove_container(client, obj.name)
        if obj.kind == "network":
            return await remove_network(client, obj.name)
        return await remove_volume(client, obj.name, disk)
    except SandboxNotFound:
        return False


async def sweep_instance(
    client: docker.DockerClient,
    instance: str,
    registry: SandboxRegistry | None = None,
    disk: QuotaDisk | None = None,
) -> list[LabelledObject]:
    """Remove every object of ``instance`` (shared ones too), its subvolumes on ``disk`` and
    its registry; what was removed."""
    objects = [obj for obj in await labelled_objects(client, instance) if obj.belongs_to(instance)]
    removed = [obj for obj in objects if await remove_object(client, obj, disk)]
    if isinstance(disk, SandboxDisk):  # kiln's own host: subvolumes left by no volume go too
        await disk.remove_all()
    if registry is not None:
        await registry.clear()
    return removed


def _container_name(attrs: Mapping[str, Any]) -> str:
    """A container's name from the list API's attributes (``Names``: ``["/kiln-sb-…"]``)."""
    names = attrs.get("Names") or [attrs.get("Id", "")]
    return str(names[0]).lstrip("/")


def _labels(attrs: Mapping[str, Any]) -> dict[str, str]:
    return dict(attrs.get("Labels") or {})
