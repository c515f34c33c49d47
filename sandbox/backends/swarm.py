"""The Swarm backend: each sandbox a one-replica service that Docker Swarm places on a node
(``KILN_SANDBOX_BACKEND=swarm``, ``DOCKER_HOST`` a swarm manager). docs/cluster.md describes the
deployment; this module joins the primitives of :mod:`sandbox.cluster` behind the contract:

- **placement**: the service carries the ``docker run`` hardening table, its memory limit as the
  reservation (the scheduler's per-node capacity) and the scheduler's spread
  (:mod:`~sandbox.cluster.service_spec`); a full cluster is ``SandboxCapacity`` at once; right
  after placement the node-side limits apply (swap = memory, :mod:`~sandbox.cluster.placement`);
- **images** reach every node before the first sandbox of a template (digest-checked, from
  kiln's own engine ``KILN_SWARM_IMAGE_SOURCE``: :mod:`~sandbox.cluster.image_distribution`);
- **exec and archives** go through the node's own engine (its ``kiln.engine`` label); the
  workload is the task's container ID, mapped to its node once and remembered;
- **network**: the per-node icc-off internal bridge on one fixed subnet
  (:mod:`~sandbox.cluster.networks`), so every node's npm proxy has the same address
  (:mod:`~sandbox.cluster.node_proxy`, ensured on a node when a sandbox first lands there);
- **preview**: a relay per node on the node's address (:mod:`~sandbox.cluster.preview_relay`);
- **park / revive**: park removes the service, the workspace volume stays on its node; revive
  places the sandbox on that node again (``node.id==`` constraint). A workspace whose node is
  gone cannot be revived: :class:`~sandbox.errors.SandboxLost`, and the caller starts over on
  another node (the project store restores it); a node whose engine fails a call is avoided
  until it answers again (:mod:`~sandbox.cluster.node_reach`);
- **capacity**: each node's unreserved memory (:mod:`~sandbox.cluster.capacity`);
- **disk quota** (``KILN_SWARM_DISK_ROOT``, a btrfs filesystem at that path on every node):
  a keeper per node makes each sandbox's subvolume and limit there
  (:mod:`~sandbox.cluster.node_disk`); the subvolume must exist before the task starts, so
  kiln picks the roomiest node, makes it and the volume bound to it there, and places the
  service on that node. Without the setting sandboxes run without a quota.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import anyio
import docker
import docker.errors

from sandbox.backends.contract import HostCapacity, PreviewAddress, SandboxClaim, SandboxStatus
from sandbox.backends.engine_probe import PING_TIMEOUT_SECONDS
from sandbox.cluster.capacity import cluster_capacity, roomiest_node
from sandbox.cluster.image_distribution import NodeImages, swarm_node_engines
from sandbox.cluster.networks import (
    ensure_isolated_network,
    ensure_node_config,
    remove_isolated_network,
)
from sandbox.cluster.node_disk import SwarmDisk
from sandbox.cluster.node_proxy import ensure_node_proxy, node_registry_url
from sandbox.cluster.node_reach import NodeReach
from sandbox.cluster.node_sweep import sweep_node
from sandbox.cluster.placement import (
    Placement,
    apply_node_limits,
    create_sandbox_service,
    remove_sandbox_service,
    remove_workspace_volume,
    service_placements,
    wait_for_placement,
    wait_port_inside,
)
from sandbox.cluster.preview_relay import ensure_preview_relay, relay_port, remove_preview_relay
from sandbox.cluster.service_spec import sandbox_service_kwargs
from sandbox.cluster.swarm_settings import SwarmSettings
from sandbox.containers.archives import read_archive, write_archive
from sandbox.containers.disk_quota import QuotaDisk, sandbox_disk
from sandbox.containers.labels import (
    CHAT_LABEL,
    CREATED_LABEL,
    INSTANCE_LABEL,
    OWNER_LABEL,
    container_name,
    instance_filter,
)
from sandbox.containers.npm_proxy import remove_proxy
from sandbox.docker_boundary import CLIENT_TIMEOUT_SECONDS, CallTimeouts, call, set_call_timeouts
from sandbox.env_settings import size_bytes
from sandbox.errors import (
    DockerUnavailable,
    SandboxError,
    SandboxLost,
    SandboxNotFound,
    SandboxUnavailable,
)
from sandbox.execution.app_env import Redaction
from sandbox.execution.exec_stream import NO_SECRETS, ExecResult, OutputSink, exec_streaming
from sandbox.images.builder import PROXY_IMAGE
from sandbox.images.templates import get_template
from sandbox.settings import LABEL, SandboxSettings

__all__ = ["SwarmBackend", "open_backend"]


def engine_client(environment: Mapping[str, str], url: str, timeout: float) -> docker.DockerClient:
    """A client of the engine at ``url`` with the TLS variables of ``environment``."""
    try:
        return docker.from_env(environment={**environment, "DOCKER_HOST": url}, timeout=timeout)
    except docker.errors.DockerException as exc:
        raise DockerUnavailable(f"docker engine {url!r}: {exc!s}") from exc


async def open_backend(settings: SandboxSettings) -> SwarmBackend:
    """The swarm backend of ``settings`` (``DOCKER_HOST`` the manager); the manager must answer
    and be a swarm manager."""
    set_call_timeouts(
        CallTimeouts(
            quick=settings.docker_quick_timeout_seconds,
            change=settings.docker_change_timeout_seconds,
        )
    )
    swarm = SwarmSettings.from_env()
    environment = dict(os.environ)
    manager_url = environment.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    manager = engine_client(environment, manager_url, CLIENT_TIMEOUT_SECONDS)
    info = await call(manager.info)
    if not (info.get("Swarm") or {}).get("ControlAvailable"):
        manager.close()
        raise DockerUnavailable(
            f"DOCKER_HOST={manager_url!r} is not a swarm manager (KILN_SANDBOX_BACKEND=swarm "
            "needs one: docs/cluster.md)"
        )
    source = engine_client(environment, swarm.image_source, CLIENT_TIMEOUT_SECONDS)
    return SwarmBackend(manager, source, settings, swarm, environment)


class SwarmBackend:
    """Sandboxes as swarm services on the nodes of one swarm (see the module docstring)."""

    name = "swarm"

    def __init__(
        self,
        manager: docker.DockerClient,
        source: docker.DockerClient,
        settings: SandboxSettings,
        swarm: SwarmSettings,
        environment: Mapping[str, str],
    ) -> None:
        """A backend on the swarm ``manager`` manages; ``source`` is kiln's own engine (images
        are built there and copied to the nodes; the modules still on docker-py get it as
        ``client``)."""
        self.manager = manager
        self.client = source
        self.swarm = swarm
        registry = node_registry_url(swarm.subnet, settings.npm_proxy_port)
        # The disk root is the nodes' (KILN_SWARM_DISK_ROOT), never kiln's own host's.
        self.settings = replace(settings, sandbox_registry=registry, disk_root=swarm.disk_root)
        layout = sandbox_disk(self.settings)
        self.disk = None if layout is None else SwarmDisk(layout, self._volume_engine)
        self._placing: dict[str, int] = {}  # node ID -> bytes of sandboxes kiln places there now
        self._environment = dict(environment)
        self._engines: dict[str, docker.DockerClient] = {}  # node engine URL -> client
        self._placed: dict[str, Placement] = {}  # workload (container ID) -> its placement
        self._workloads: dict[str, str] = {}  # sandbox ID -> its workload, as placed here
        self._ready_nodes: set[str] = set()  # nodes whose proxy and relay run
        self._configured: set[str] = set()  # nodes with the network's config-only half
        self._reach = NodeReach(
            lambda url: engine_client(environment, url, PING_TIMEOUT_SECONDS), self._node_back
        )
        self._images = NodeImages(source, manager)
        self._lock = anyio.Lock()
        self._probe: docker.DockerClient | None = None

    def _node_back(self, node_id: str) -> None:
        """A node that failed answers again: its network half, proxy and relay are checked
        anew before its next sandbox (a restarted engine may have lost them)."""
        self._ready_nodes.discard(node_id)
        self._configured.discard(node_id)

    async def ping(self) -> None:
        """``DockerUnavailable`` unless the manager answers within a short timeout."""
        if self._probe is None:
            url = str(self._environment.get("DOCKER_HOST", "unix:///var/run/docker.sock"))
            self._probe = engine_client(self._environment, url, PING_TIMEOUT_SECONDS)
        await call(self._probe.ping)

    async def aclose(self) -> None:
        """Close the manager's, the source's and every node's client."""
        for client in [self.manager, self.client, *self._engines.values(), self._probe]:
            if client is not None:
                await call(client.close)
        self._engines.clear()

    def engine(self, url: str) -> docker.DockerClient:
        """The (kept) client of the node engine at ``url``."""
        if url not in self._engines:
            self._engines[url] = engine_client(self._environment, url, CLIENT_TIMEOUT_SECONDS)
        return self._engines[url]

    async def _node_engines(self) -> dict[str, docker.DockerClient]:
        """Swarm node ID -> its engine's client, for every labelled node whose engine answers
        as far as kiln has seen (:class:`~sandbox.cluster.node_reach.NodeReach`)."""
        found = {}
        for node in await swarm_node_engines(self.manager):
            if await self._reach.answers(node.node_id, node.engine):
                found[node.node_id] = self.engine(node.engine)
        return found

    async def create(self, claim: SandboxClaim) -> SandboxStatus:
        """The template's images on every node, then the service on the roomiest reachable
        node kiln picked (its quota-limited volume made there first, with a disk quota),
        pinned to it: the swarm never moves a sandbox away from its workspace by itself (a
        drained node's sandboxes move as their chats are next used: :meth:`revive`)."""
        await self._images.everywhere([claim.template.image, PROXY_IMAGE])
        await self.npm_registry()
        memory = size_bytes(claim.template.resources.memory)
        engines = await self._node_engines()
        report = await cluster_capacity(self.manager, self.settings.instance)
        node_id = roomiest_node(report, memory, set(engines), self._placing).node_id
        self._placing[node_id] = self._placing.get(node_id, 0) + memory
        try:
            disk = await self._quota_volume(node_id, engines[node_id], claim)
            return await self._place(claim, constraints=(f"node.id=={node_id}",), disk=disk)
        finally:  # placed, its reservation is among the node's tasks; or not placed at all
            self._placing[node_id] -= memory

    async def _engine_of(self, node_id: str) -> docker.DockerClient:
        engines = await self._node_engines()
        if node_id not in engines:
            raise SandboxLost(f"swarm node {node_id!r} does not answer")
        return engines[node_id]

    async def _volume_engine(self, volume: str) -> tuple[str, docker.DockerClient] | None:
        """The reachable node holding ``volume`` and its engine; ``None`` if none."""
        node_id = await self._volume_node(volume)
        return None if node_id is None else (node_id, await self._engine_of(node_id))

    async def revive(self, claim: SandboxClaim) -> SandboxStatus:
        """A new service on the node holding the workspace (``SandboxLost`` when that node
        is gone, unreachable, drained or paused: the chat then starts over elsewhere)."""
        await self.park(claim)
        node_id = await self._volume_node(claim.volume)
        if node_id is None:
            raise SandboxLost(
                f"sandbox {claim.sandbox_id!r}: its workspace {claim.volume!r} is on no "
                "reachable swarm node (the node was lost)"
            )
        availability = (await call(self.manager.nodes.get, node_id)).attrs["Spec"]["Availability"]
        if availability != "active":  # drained or paused: it takes no sandbox, not even back
            raise SandboxLost(
                f"sandbox {claim.sandbox_id!r}: its swarm node {node_id[:12]!r} is "
                f"{availability!r} (taken out of service)"
            )
        await self.npm_registry()
        disk = await self._quota_volume(node_id, await self._engine_of(node_id), claim)
        return await self._place(claim, constraints=(f"node.id=={node_id}",), disk=disk)

    async def _quota_volume(
        self, node_id: str, engine: docker.DockerClient, claim: SandboxClaim
    ) -> QuotaDisk | None:
        """With a disk quota, the claim's workspace volume bound to its subvolume on the node
        (made there before the task is placed); ``None`` without one."""
        if self.disk is None:
            return None
        labels = dict(claim.labels)
        return await self.disk.workspace_volume(node_id, engine, claim.volume, labels)

    async def _place(
        self, claim: SandboxClaim, constraints: Sequence[str], disk: QuotaDisk | None = None
    ) -> SandboxStatus:
        """Create the sandbox's service and wait for its task; the node's limits, proxy and
        relay in place before it is handed out. ``disk``: the node's disk the workspace volume
        is on (made there already)."""
        labels = dict(claim.labels)
        kwargs = sandbox_service_kwargs(
            self.settings,
            get_template(claim.template.name),
            claim.sandbox_id,
            network=self.settings.network,
            created=float(labels.get(CREATED_LABEL) or 0),
            owner=labels.get(OWNER_LABEL, ""),
            chat=labels.get(CHAT_LABEL, ""),
            constraints=[*constraints, *self._reach.constraints()],
            disk=disk,
        )
        kwargs["labels"] = kwargs["container_labels"] = {**kwargs["labels"], **labels}
        service_id = await create_sandbox_service(self.manager, kwargs)
        try:
            timeout = self.settings.docker_change_timeout_seconds
            placement = await wait_for_placement(self.manager, service_id, timeout)
            node = self.engine(placement.engine_url)
            memory = size_bytes(claim.template.resources.memory)
            await apply_node_limits(node, placement, memory)
            await self._ensure_node(placement, node)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await remove_sandbox_service(self.manager, service_id)
            raise
        self._placed[placement.container_id] = placement
        self._workloads[claim.sandbox_id] = placement.container_id
        return await self._status_on_node(placement, labels)

    async def _ensure_node(self, placement: Placement, node: docker.DockerClient) -> None:
        """The instance's npm proxy and preview relay on the placement's node (once per node
        per process: a running pair is adopted)."""
        if placement.node_id in self._ready_nodes:
            return
        async with self._lock:
            if placement.node_id in self._ready_nodes:
                return
            await ensure_node_proxy(node, self.settings)
            swarm = self.swarm
            instance = self.settings.instance
            await ensure_preview_relay(
                node, instance, placement.node_address, swarm.relay_port, swarm.subnet
            )
            self._ready_nodes.add(placement.node_id)

    async def _volume_node(self, volume: str) -> str | None:
        """The reachable, ready node holding the workspace ``volume``; ``None`` if none."""
        ready = {
            str(node.id)
            for node in await call(self.manager.nodes.list)
            if node.attrs["Status"]["State"] == "ready"
        }
        for node_id, engine in (await self._node_engines()).items():
            if node_id not in ready:
                continue
            try:
                await call(engine.volumes.get, volume)
            except SandboxNotFound:
                continue
            except SandboxUnavailable as exc:
                self._reach.failed(node_id, exc)
                continue
            return node_id
        return None

    async def park(self, claim: SandboxClaim) -> bool:
        """Remove the sandbox's service; its workspace volume stays on its node."""
        self._forget(claim.sandbox_id)
        return await remove_sandbox_service(self.manager, container_name(claim.sandbox_id))

    def _forget(self, sandbox_id: str) -> None:
        self._placed.pop(self._workloads.pop(sandbox_id, ""), None)

    async def destroy(self, claim: SandboxClaim) -> None:
        """The service, then the workspace volume (and its subvolume) on every reachable node
        that has it."""
        await self.park(claim)
        for node_id, engine in (await self._node_engines()).items():
            try:
                if await remove_workspace_volume(engine, claim.volume) and self.disk is not None:
                    await self._remove_subvolume(node_id, engine, claim.volume)
            except SandboxUnavailable as exc:
                self._reach.failed(node_id, exc)

    async def reap_elsewhere(self, known: Callable[[], Awaitable[set[str]]]) -> list[str]:
        """The instance's services of sandboxes ``known()`` does not name (a crash between
        the record's removal and the service's), then what each reachable node kept of such
        sandboxes (:func:`~sandbox.cluster.node_sweep.sweep_node`)."""
        wanted = instance_filter(self.settings.instance)
        services = await call(self.manager.services.list, filters=wanted)
        ids = await known()  # after the listing: a record is written before its service
        removed = []
        for service in services:
            sandbox_id = (service.attrs["Spec"].get("Labels") or {}).get(LABEL, "")
            if sandbox_id not in ids and await remove_sandbox_service(self.manager, service.id):
                removed.append(f"service {service.name}")
        for node_id, engine in (await self._node_engines()).items():
            remove_subvolume = None
            if self.disk is not None:
                remove_subvolume = functools.partial(self._remove_subvolume, node_id, engine)
            try:
                removed += await sweep_node(engine, self.settings.instance, known, remove_subvolume)
            except SandboxUnavailable as exc:
                self._reach.failed(node_id, exc)
        return removed

    async def _remove_subvolume(
        self, node_id: str, engine: docker.DockerClient, volume: str
    ) -> bool:
        assert self.disk is not None  # (only called with a disk)
        return await (await self.disk.on_node(node_id, engine)).remove(volume)

    async def status(self, workload: str) -> SandboxStatus | None:
        """The workload on its node now; ``None`` when it or its node is gone."""
        placement = await self._placement(workload)
        if placement is None:
            return None
        try:
            return await self._status_on_node(placement, None)
        except SandboxNotFound:
            self._placed.pop(workload, None)
            return None
        except SandboxUnavailable as exc:  # the node's engine does not answer: a lost node
            self._reach.failed(placement.node_id, exc)
            return None

    async def _status_on_node(
        self, placement: Placement, labels: Mapping[str, str] | None
    ) -> SandboxStatus:
        node = self.engine(placement.engine_url)
        container = await call(node.containers.get, placement.container_id)
        networks = container.attrs.get("NetworkSettings", {}).get("Networks", {})
        found = dict(container.labels or {}) if labels is None else dict(labels)
        return SandboxStatus(
            sandbox_id=found.get(LABEL, ""),
            workload=placement.container_id,
            address=str(networks.get(self.settings.network, {}).get("IPAddress") or ""),
            node=placement.node_id,
            running=container.status == "running",
            labels=found,
        )

    async def _placement(self, workload: str) -> Placement | None:
        """Where ``workload`` runs: remembered, else found among the instance's tasks."""
        if not workload:
            return None
        if workload in self._placed:
            return self._placed[workload]
        for placement, _labels in await self._instance_placements({}):
            self._placed.setdefault(placement.container_id, placement)
        return self._placed.get(workload)

    async def _instance_placements(
        self, labels: Mapping[str, str]
    ) -> list[tuple[Placement, dict[str, str]]]:
        """Each service of the instance carrying ``labels``: its task's placement, its labels."""
        wanted = [LABEL, f"{INSTANCE_LABEL}={self.settings.instance}"]
        wanted += [f"{key}={value}" for key, value in labels.items()]
        return await call(service_placements, self.manager, wanted)

    async def list_by_labels(self, labels: Mapping[str, str]) -> list[SandboxStatus]:
        """The instance's sandbox services carrying all of ``labels``, each as its task runs
        (a task on a lost node: not running, no address)."""
        found = []
        for placement, service_labels in await self._instance_placements(labels):
            self._placed.setdefault(placement.container_id, placement)
            try:
                found.append(await self._status_on_node(placement, service_labels))
            except SandboxError:
                sandbox_id = service_labels.get(LABEL, "")
                workload, node = placement.container_id, placement.node_id
                found.append(SandboxStatus(sandbox_id, workload, "", node, False, service_labels))
        return found

    async def container(self, workload: str) -> Any:
        """The docker ``Container`` of ``workload`` on its node's engine; ``None`` if gone."""
        placement = await self._placement(workload)
        if placement is None:
            return None
        try:
            return await call(self.engine(placement.engine_url).containers.get, workload)
        except SandboxNotFound:
            return None
        except SandboxUnavailable as exc:  # its node's engine does not answer: a lost node
            self._reach.failed(placement.node_id, exc)
            return None

    async def engine_beside(self, workload: str, image: str) -> Any:
        """The engine of the node ``workload`` runs on, ``image`` copied there first."""
        placement = await self._placed_somewhere(workload)
        await self._images.on_node(placement.node_id, image)
        return self.engine(placement.engine_url)

    @contextlib.asynccontextmanager
    async def _on_node(self, workload: str) -> AsyncIterator[docker.DockerClient]:
        """The engine of ``workload``'s node, for calls that need the sandbox itself: one that
        does not answer (while the manager does) has lost the sandbox with it."""
        placement = await self._placed_somewhere(workload)
        try:
            yield self.engine(placement.engine_url)
        except DockerUnavailable as exc:
            self._reach.failed(placement.node_id, exc)
            raise SandboxLost(
                f"sandbox container {workload[:12]!r} was lost with its swarm node "
                f"{placement.node_id[:12]!r}, whose engine does not answer"
            ) from exc

    async def _placed_somewhere(self, workload: str) -> Placement:
        placement = await self._placement(workload)
        if placement is None:
            raise SandboxLost(f"sandbox container {workload[:12]!r} runs on no swarm node")
        return placement

    async def exec(
        self,
        sandbox: SandboxStatus,
        argv: Sequence[str],
        *,
        timeout: float,
        output_cap: int,
        on_output: OutputSink | None = None,
        redaction: Redaction | None = None,
    ) -> ExecResult:
        """``docker exec`` on the sandbox's node as the sandbox user (:func:`exec_streaming`)."""
        async with self._on_node(sandbox.workload) as node:
            return await exec_streaming(
                node,
                sandbox.workload,
                argv,
                timeout=timeout,
                output_cap=output_cap,
                on_output=on_output,
                redaction=NO_SECRETS if redaction is None else redaction,
            )

    async def put_archive(self, sandbox: SandboxStatus, path: str, archive: bytes) -> None:
        """Unpack ``archive`` at ``path`` through the node's engine."""
        async with self._on_node(sandbox.workload) as node:
            container = await call(node.containers.get, sandbox.workload)
            await write_archive(container, path, archive)

    async def get_archive(self, sandbox: SandboxStatus, path: str) -> bytes:
        """``path`` of the sandbox as a tar, through the node's engine."""
        async with self._on_node(sandbox.workload) as node:
            container = await call(node.containers.get, sandbox.workload)
            return await read_archive(container, path)

    async def preview_address(self, sandbox: SandboxStatus, port: int) -> PreviewAddress:
        """The node's relay port for the sandbox's bridge address and ``port``."""
        placement = await self._placement(sandbox.workload)
        if placement is None:
            raise SandboxLost(f"sandbox container {sandbox.workload[:12]!r} runs on no node")
        address = sandbox.address or (await self._status_on_node(placement, None)).address
        return PreviewAddress(
            placement.node_address,
            relay_port(self.swarm.relay_port, self.swarm.subnet, address, port),
        )

    async def wait_port(self, sandbox: SandboxStatus, port: int, timeout: float) -> None:
        """Poll the port from inside the sandbox (kiln reaches it only through the relay,
        which accepts before its far end does); ``SandboxUnavailable`` when the sandbox stops
        first or ``timeout`` seconds pass."""
        async with self._on_node(sandbox.workload) as node:
            await wait_port_inside(node, sandbox.workload, port, timeout)

    async def npm_registry(self) -> str:
        """The isolated network (the config-only half on each answering node once, then the
        swarm network) made or adopted; the registry address every node's proxy has."""
        settings, subnet = self.settings, self.swarm.subnet
        for node_id, node in (await self._node_engines()).items():
            if node_id in self._configured:
                continue
            try:
                await ensure_node_config(node, settings.network, settings.instance, subnet)
            except SandboxUnavailable as exc:
                self._reach.failed(node_id, exc)
                continue
            self._configured.add(node_id)
        await ensure_isolated_network(self.manager, [], settings.network, settings.instance, subnet)
        return str(settings.sandbox_registry)

    async def release_shared(self) -> None:
        """Every node's relay and proxy (with its cache), then the network; Docker refuses
        (raises) while a sandbox still uses it."""
        nodes = list((await self._node_engines()).values())
        for node in nodes:
            await remove_preview_relay(node, self.settings.instance)
            await remove_proxy(node, self.settings.instance, with_cache=True)
            if self.disk is not None:
                await self.disk.release(node)
        await remove_isolated_network(self.manager, nodes, self.settings.network)
        self._ready_nodes.clear()
        self._configured.clear()

    async def park_shared(self) -> tuple[bool, bool]:
        """kiln stopping: with no sandbox service of the instance left, every node's relay and
        proxy (caches kept) and the network go."""
        if await self._instance_placements({}):
            return False, False
        nodes = list((await self._node_engines()).values())
        removed = False
        for node in nodes:
            await remove_preview_relay(node, self.settings.instance)
            removed = await remove_proxy(node, self.settings.instance) or removed
            if self.disk is not None:
                await self.disk.release(node)
        await remove_isolated_network(self.manager, nodes, self.settings.network)
        self._ready_nodes.clear()
        self._configured.clear()
        return True, removed

    async def capacity(self) -> list[HostCapacity]:
        """Each node's unreserved memory (0 on a node that cannot take sandboxes)."""
        report = await cluster_capacity(self.manager, self.settings.instance)
        return [
            HostCapacity(
                max(node.memory_bytes - node.reserved_bytes, 0) if node.usable else 0,
                node.node_id,
            )
            for node in report
        ]

    async def quota_used_up(self, claim: SandboxClaim) -> bool | None:
        """Whether the sandbox's quota on its node is (nearly) full; ``None`` without quotas."""
        if self.disk is None:
            return None
        return await self.disk.used_up(claim.volume)
