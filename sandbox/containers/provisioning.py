"""Creating and removing the Docker objects of one sandbox: volume and container (and the own
network of a sandbox made before all sandboxes shared one: :mod:`sandbox.containers.networks`).

These are the building blocks of :mod:`sandbox.lifecycle.provisioner` and
:mod:`sandbox.lifecycle.reaper`; they know names and labels but nothing about chats, pools or
Redis. Removal is by name and idempotent, so a half-created sandbox, a reaped one and a destroyed
one are cleaned up by the same call.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio
import docker

from sandbox.containers.disk_quota import QuotaDisk, sandbox_disk
from sandbox.containers.hardening import container_run_kwargs
from sandbox.containers.labels import (
    CHAT_LABEL,
    CREATED_LABEL,
    OWNER_LABEL,
    container_name,
)
from sandbox.containers.networks import container_ip, is_own_network, remove_network
from sandbox.docker_boundary import call
from sandbox.errors import ImageMissing, SandboxError, SandboxNotFound, SandboxUnavailable
from sandbox.images.templates import Template
from sandbox.settings import SandboxSettings

PORT_POLL_SECONDS = 0.1
CONNECT_TIMEOUT_SECONDS = 1.0
CONTAINER_CHECK_SECONDS = 1.0
VOLUME_IN_USE = "volume is in use"  # Docker's words when a container still has the volume
VOLUME_IN_USE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class StartedContainer:
    """A running sandbox container and its address on the sandbox network."""

    container_id: str
    ip: str


async def create_volume(
    client: docker.DockerClient,
    name: str,
    labels: dict[str, str],
    disk: QuotaDisk | None = None,
) -> QuotaDisk | None:
    """Create a named volume (a no-op when it exists); with a ``disk``, one bound to the
    sandbox's quota-limited subvolume (made first). The disk the volume is on: ``None`` for a
    plain volume, also one made before the instance had a disk (it keeps working, unlimited).

    A subvolume whose volume is gone (removed by hand, or a crash between removing the one and
    the other) is stale: it goes, and the workspace starts from the template like any lost one
    (the project store restores it), never from files Docker no longer knows."""
    if disk is None:
        await call(client.volumes.create, name=name, labels=labels)
        return None
    try:
        existing = await call(client.volumes.get, name)
    except SandboxNotFound:
        await disk.remove(name)
        folder = await disk.create(name)
        options = {"type": "none", "o": "bind", "device": str(folder)}
        await call(client.volumes.create, name=name, labels=labels, driver_opts=options)
        return disk
    device = (existing.attrs.get("Options") or {}).get("device")
    return disk if device == str(disk.workspace(name)) else None


async def start_container(
    client: docker.DockerClient,
    settings: SandboxSettings,
    template: Template,
    sandbox_id: str,
    *,
    volume: str,
    network: str,
    labels: dict[str, str],
    disk: QuotaDisk | None = None,
) -> StartedContainer:
    """Create and start the hardened container of a sandbox whose volume and network exist;
    ``disk`` is the quota-limited disk its volume is on (:func:`create_volume`).

    ``ImageMissing`` when the template's image is not built. The sandbox's temporary folders
    start empty (:meth:`SandboxDisk.clear_temporary`).

    ``labels`` are the sandbox's (:func:`sandbox.containers.hardening.object_labels`); the
    container's owner, chat, creation and expiry labels are taken from them.
    """
    kwargs = container_run_kwargs(
        settings,
        template,
        sandbox_id,
        volume=volume,
        network=network,
        disk=disk,
        created=float(labels.get(CREATED_LABEL) or 0),
        owner=labels.get(OWNER_LABEL, ""),
        chat=labels.get(CHAT_LABEL, ""),
    )
    if disk is not None:
        await disk.clear_temporary(volume)
    try:
        # create + start rather than run: run would try to pull a missing image from a registry.
        # Shielded (its own deadline still applies): a create the caller stopped waiting for
        # would land after the clean-up looked for the container, and Docker would make the
        # removed volume again, unlabelled, where no reaper finds it.
        with anyio.CancelScope(shield=True):
            container = await call(client.containers.create, **kwargs)
    except SandboxNotFound as exc:
        raise ImageMissing(
            f"cannot create sandbox {sandbox_id!r} from {template.image!r} "
            f"(is the image built? `kiln images build`): {exc}"
        ) from exc
    await call(container.start)
    return StartedContainer(container.id, await container_ip(client, container.id, network))


async def replace_container(
    client: docker.DockerClient,
    settings: SandboxSettings,
    template: Template,
    sandbox_id: str,
    *,
    volume: str,
    network: str,
    labels: dict[str, str],
) -> StartedContainer:
    """Start a fresh container on the sandbox's existing volume (the old one died or vanished);
    ``network`` must exist."""
    await remove_container(client, container_name(sandbox_id))
    # Normally still there; if not, it comes back labelled (Docker would create a missing
    # volume on its own, but without the labels the reaper finds objects by).
    disk = await create_volume(client, volume, labels, sandbox_disk(settings))
    return await start_container(
        client,
        settings,
        template,
        sandbox_id,
        volume=volume,
        network=network,
        labels=labels,
        disk=disk,
    )


async def remove_container(client: docker.DockerClient, name_or_id: str) -> bool:
    """Force-remove a container; ``False`` when it was already gone."""
    try:
        container = await call(client.containers.get, name_or_id)
        await call(container.remove, force=True)
    except SandboxNotFound:
        return False
    return True


async def remove_volume(
    client: docker.DockerClient, name: str, disk: QuotaDisk | None = None
) -> bool:
    """Remove a volume, and with a ``disk`` the sandbox's subvolume behind it; ``False`` when
    both were already gone.

    A container still on the volume goes first: a sandbox's volume is only its own, and a
    provision stopped halfway (kiln stopping while the warm pool fills) may see its container
    created after it looked for it (the create's thread is not waited for)."""
    for attempt in range(VOLUME_IN_USE_ATTEMPTS):
        try:
            volume = await call(client.volumes.get, name)
            await call(volume.remove, force=True)
            removed = True
            break
        except SandboxNotFound:
            removed = False
            break
        except SandboxError as exc:
            if VOLUME_IN_USE not in str(exc) or attempt == VOLUME_IN_USE_ATTEMPTS - 1:
                raise
        users = await call(
            client.containers.list, all=True, filters={"volume": name}, ignore_removed=True
        )
        for container in users:
            await remove_container(client, container.id)
    if disk is not None and await disk.remove(name):
        return True
    return removed


async def remove_sandbox_objects(
    client: docker.DockerClient,
    sandbox_id: str,
    *,
    volume: str,
    network: str,
    disk: QuotaDisk | None = None,
) -> None:
    """Remove a sandbox's container, then its volume (and subvolume) and, if it has its own,
    its network.

    The shared sandbox network stays: other sandboxes sit on it."""
    await remove_container(client, container_name(sandbox_id))
    if is_own_network(sandbox_id, network):
        await remove_network(client, network)
    await remove_volume(client, volume, disk)


async def container_running(client: docker.DockerClient, container_id: str) -> bool:
    """Whether the container exists and is running."""
    try:
        container = await call(client.containers.get, container_id)
    except SandboxNotFound:
        return False
    return bool(container.status == "running")


async def wait_port_open(
    client: docker.DockerClient, container_id: str, ip: str, port: int, timeout: float
) -> None:
    """Wait until ``ip:port`` accepts TCP connections; fail early if the container stops."""
    with anyio.move_on_after(timeout):
        next_check = anyio.current_time() + CONTAINER_CHECK_SECONDS
        while not await port_open(ip, port):
            if anyio.current_time() >= next_check:
                if not await container_running(client, container_id):
                    raise SandboxUnavailable(
                        f"container {container_id[:12]!r} stopped before its dev server "
                        f"listened on port {port}"
                    )
                next_check = anyio.current_time() + CONTAINER_CHECK_SECONDS
            await anyio.sleep(PORT_POLL_SECONDS)
        return
    raise SandboxUnavailable(f"dev server on {ip}:{port} did not listen within {timeout:g}s")


async def port_open(ip: str, port: int) -> bool:
    """Whether ``ip:port`` accepts a TCP connection within a second."""
    # Bounded: to an address whose container is gone, a connect hangs instead of failing.
    with anyio.move_on_after(CONNECT_TIMEOUT_SECONDS):
        try:
            stream = await anyio.connect_tcp(ip, port)
        except OSError:
            return False
        await stream.aclose()
        return True
    return False
