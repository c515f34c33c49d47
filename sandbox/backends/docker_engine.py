"""The single-engine Docker backend: every sandbox of an instance on the one Docker engine kiln
runs beside (``DOCKER_HOST`` or the local socket). kiln's embedded default.

It owns everything that assumes one engine on one host, and speaks to it through the building
blocks it is made of:

- the one Docker client and its deadlines (:mod:`sandbox.docker_boundary`), and the short-timeout
  probe that says the engine is away (:class:`~sandbox.backends.engine_probe.EngineProbe`);
- volumes and hardened containers (:mod:`sandbox.containers.provisioning`,
  :mod:`~sandbox.containers.hardening`), the instance's one internal bridge and reaching a dev
  server by the container's address on it (:mod:`sandbox.containers.networks`);
- the npm proxy on that bridge's gateway (:mod:`sandbox.containers.npm_proxy`);
- the btrfs disk quota of each workspace (:mod:`sandbox.containers.disk_quota`);
- exec with OOM and leftover-process checks read from the host's cgroups
  (:mod:`sandbox.execution.exec_stream`, :mod:`~sandbox.execution.host_cgroup`);
- capacity: the host's ``MemAvailable`` above the reserve (:mod:`sandbox.backends.host_memory`).

``client`` stays public for the modules that still speak docker-py directly (docs/architecture.md,
"Sandbox backends", lists them and why).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import anyio
import anyio.to_thread
import docker

from sandbox.backends.contract import (
    HostCapacity,
    PreviewAddress,
    SandboxClaim,
    SandboxStatus,
)
from sandbox.backends.engine_probe import EngineProbe
from sandbox.backends.host_memory import HostMemory
from sandbox.containers.archives import read_archive, write_archive
from sandbox.containers.disk_quota import SandboxDisk, enable_quotas, sandbox_disk
from sandbox.containers.labels import INSTANCE_LABEL, container_name
from sandbox.containers.networks import (
    container_ip,
    ensure_sandbox_network,
    is_own_network,
    remove_network,
)
from sandbox.containers.npm_proxy import ensure_proxy, remove_proxy
from sandbox.containers.provisioning import (
    create_volume,
    remove_container,
    remove_sandbox_objects,
    replace_container,
    start_container,
    wait_port_open,
)
from sandbox.docker_boundary import CallTimeouts, call, connect, set_call_timeouts
from sandbox.errors import SandboxError, SandboxNotFound
from sandbox.execution.app_env import Redaction
from sandbox.execution.exec_stream import NO_SECRETS, ExecResult, OutputSink, exec_streaming
from sandbox.images.templates import get_template
from sandbox.settings import LABEL, SandboxSettings

__all__ = ["DockerBackend", "open_backend"]
log = logging.getLogger(__name__)


async def open_backend(settings: SandboxSettings) -> DockerBackend:
    """The Docker backend of ``settings``: the process's Docker calls get the settings'
    deadlines, quotas are switched on where a disk root is set, and the engine must answer."""
    set_call_timeouts(
        CallTimeouts(
            quick=settings.docker_quick_timeout_seconds,
            change=settings.docker_change_timeout_seconds,
        )
    )
    if settings.disk_root is not None:
        await enable_quotas(settings.disk_root)
    return DockerBackend(await anyio.to_thread.run_sync(connect), settings)


class DockerBackend:
    """Sandboxes as hardened containers on one Docker engine (see the module docstring)."""

    name = "docker"

    def __init__(self, client: docker.DockerClient, settings: SandboxSettings) -> None:
        """A backend on the engine ``client`` talks to, for the instance of ``settings``."""
        self.client = client
        self.settings = settings
        # Each sandbox's quota-limited writable space (None: the settings give it none).
        self.disk: SandboxDisk | None = sandbox_disk(settings)
        self._probe = EngineProbe(client)

    async def ping(self) -> None:
        """``DockerUnavailable`` unless the engine answers a short ping."""
        await self._probe.ping()

    async def aclose(self) -> None:
        """Close the client and the probe's own."""
        await call(self.client.close)
        await self._probe.aclose()

    async def create(self, claim: SandboxClaim) -> SandboxStatus:
        """Volume (on its quota), then the started container on the instance's network."""
        labels = dict(claim.labels)
        disk = await create_volume(self.client, claim.volume, labels, self.disk)
        started = await start_container(
            self.client,
            self.settings,
            get_template(claim.template.name),
            claim.sandbox_id,
            volume=claim.volume,
            network=claim.network,
            labels=labels,
            disk=disk,
        )
        return SandboxStatus(claim.sandbox_id, started.container_id, started.ip, labels=labels)

    async def revive(self, claim: SandboxClaim) -> SandboxStatus:
        """A fresh container on the sandbox's volume, always on the instance's shared network
        (a sandbox that had a network of its own moves over, and that network goes)."""
        network = self.settings.network
        started = await replace_container(
            self.client,
            self.settings,
            get_template(claim.template.name),
            claim.sandbox_id,
            volume=claim.volume,
            network=network,
            labels=dict(claim.labels),
        )
        if is_own_network(claim.sandbox_id, claim.network):
            await remove_network(self.client, claim.network)
        return SandboxStatus(
            claim.sandbox_id, started.container_id, started.ip, labels=dict(claim.labels)
        )

    async def park(self, claim: SandboxClaim) -> bool:
        """Remove the container by name (a revived one has a new id), keep the volume."""
        return await remove_container(self.client, container_name(claim.sandbox_id))

    async def destroy(self, claim: SandboxClaim) -> None:
        """Container, volume with its quota, and the sandbox's own network if it has one."""
        await remove_sandbox_objects(
            self.client,
            claim.sandbox_id,
            volume=claim.volume,
            network=claim.network,
            disk=self.disk,
        )

    async def status(self, workload: str) -> SandboxStatus | None:
        """The container as it is now (its address on the instance's network, if any)."""
        container = await self.container(workload)
        return None if container is None else _status(container, self.settings.network)

    async def container(self, workload: str) -> Any:
        """The docker ``Container`` of ``workload``; ``None`` when it is gone."""
        try:
            return await call(self.client.containers.get, workload or "-")
        except SandboxNotFound:
            return None

    async def reap_elsewhere(self, known: Callable[[], Awaitable[set[str]]]) -> list[str]:
        """Nothing: every object is on this engine, which the reaper sweeps by label."""
        return []

    async def engine_beside(self, workload: str, image: str) -> Any:
        """This engine: every sandbox and image of it is here (a missing image is the
        helper's create's ``ImageMissing``)."""
        return self.client

    async def list_by_labels(self, labels: Mapping[str, str]) -> list[SandboxStatus]:
        """The sandbox containers (running or not) carrying all of ``labels``."""
        wanted = [LABEL, *(f"{key}={value}" for key, value in labels.items())]
        found = await call(
            self.client.containers.list, all=True, filters={"label": wanted}, ignore_removed=True
        )
        return [_status(container, self.settings.network) for container in found]

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
        """``docker exec`` as the sandbox user (:func:`exec_streaming`)."""
        return await exec_streaming(
            self.client,
            sandbox.workload,
            argv,
            timeout=timeout,
            output_cap=output_cap,
            on_output=on_output,
            redaction=NO_SECRETS if redaction is None else redaction,
        )

    async def put_archive(self, sandbox: SandboxStatus, path: str, archive: bytes) -> None:
        """Unpack ``archive`` at ``path`` in the container."""
        container = await call(self.client.containers.get, sandbox.workload)
        await write_archive(container, path, archive)

    async def get_archive(self, sandbox: SandboxStatus, path: str) -> bytes:
        """``path`` of the container as a tar."""
        container = await call(self.client.containers.get, sandbox.workload)
        return await read_archive(container, path)

    async def preview_address(self, sandbox: SandboxStatus, port: int) -> PreviewAddress:
        """The container's address on the instance's bridge: the host reaches it directly."""
        address = sandbox.address or await container_ip(
            self.client, sandbox.workload, self.settings.network
        )
        return PreviewAddress(address, port)

    async def wait_port(self, sandbox: SandboxStatus, port: int, timeout: float) -> None:
        """Poll the port; fail early when the container stops (:func:`wait_port_open`)."""
        address = await self.preview_address(sandbox, port)
        await wait_port_open(self.client, sandbox.workload, address.host, port, timeout)

    async def npm_registry(self) -> str:
        """The instance's network and the npm proxy on its gateway, made or adopted; the
        registry URL (new containers get it in their environment)."""
        settings = self.settings
        await ensure_sandbox_network(self.client, settings.network, settings.instance)
        url = await ensure_proxy(self.client, settings)
        if url != settings.sandbox_registry:
            self.settings = replace(settings, sandbox_registry=url)
        return url

    async def release_shared(self) -> None:
        """The shared network, then the npm proxy with its cache; Docker refuses (raises) while
        a container is still on the network."""
        await remove_network(self.client, self.settings.network)
        await remove_proxy(self.client, self.settings.instance, with_cache=True)

    async def park_shared(self) -> tuple[bool, bool]:
        """The instance's network if unused and labelled as this instance's (a network named by
        ``KILN_SANDBOX_NETWORK`` may be another's), then the npm proxy on it, its cache kept."""
        settings = self.settings
        if not await _remove_if_unused(self.client, settings.network, settings.instance):
            return False, False
        return True, await remove_proxy(self.client, settings.instance)

    async def capacity(self) -> list[HostCapacity]:
        """This host's ``MemAvailable`` above the reserve (one node)."""
        memory = HostMemory.read()
        return [HostCapacity(memory.headroom(self.settings.memory_reserve_percent))]

    async def quota_used_up(self, claim: SandboxClaim) -> bool | None:
        """Whether the workspace's btrfs quota is (nearly) full; ``None`` without quotas."""
        if self.disk is None:
            return None
        return await self.disk.used_up(claim.volume)


def _status(container: Any, network: str) -> SandboxStatus:
    """A container as the contract's status."""
    networks = container.attrs.get("NetworkSettings", {}).get("Networks", {})
    labels = dict(container.labels or {})
    return SandboxStatus(
        sandbox_id=labels.get(LABEL, ""),
        workload=str(container.id),
        address=str(networks.get(network, {}).get("IPAddress") or ""),
        running=container.status == "running",
        labels=labels,
    )


async def _remove_if_unused(client: docker.DockerClient, name: str, instance: str) -> bool:
    """Remove a shared network of ``instance``; ``False`` if it was gone, still has containers
    on it, or is another instance's."""
    try:
        network = await call(client.networks.get, name)
        if (network.attrs.get("Labels") or {}).get(INSTANCE_LABEL) != instance:
            return False
        return await remove_network(client, name)
    except SandboxNotFound:
        return False
    except SandboxError as exc:
        log.info("network %r kept: %s", name, exc)
        return False
