"""Sandbox networks: one ``internal`` bridge per sandbox, plus a shared egress bridge for installs.

An internal bridge still gets a gateway address on the host, so the host (the preview proxy)
reaches the dev server on the container's address on that network directly; Docker's isolation
rules drop everything the container sends off the bridge, and publishing ports does not work on
internal networks. The container therefore reaches nothing, except the host itself: the
bridge's gateway address is a host address, so host services bound to ``0.0.0.0`` answer it.
Every kiln bridge is named ``kiln<hash>`` (:func:`bridge_interface`), so one host rule closes
that for all sandboxes while keeping the host's own connections to them working::

    iptables -I INPUT -i kiln+ -m conntrack ! --ctstate ESTABLISHED,RELATED -j DROP

While an install runs, :func:`egress_attached` connects the container to the egress network (a
normal bridge with inter-container traffic disabled), which gives it a default route and DNS;
the container is disconnected afterwards whatever happened, including cancellation.

Docker's default address pools hold about thirty bridge networks; a host running many
sandboxes needs ``default-address-pools`` in ``daemon.json`` with small (``/24`` or smaller)
subnets.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import docker

from sandbox.containers.docker_boundary import call
from sandbox.containers.labels import shared_labels
from sandbox.errors import SandboxError, SandboxNotFound, SandboxUnavailable

BRIDGE_NAME_OPTION = "com.docker.network.bridge.name"
BRIDGE_PREFIX = "kiln"


async def create_internal_network(
    client: docker.DockerClient, name: str, labels: dict[str, str]
) -> Any:
    """Create a sandbox's own internal bridge network."""
    return await call(
        client.networks.create,
        name,
        driver="bridge",
        internal=True,
        labels=labels,
        check_duplicate=True,
        options={BRIDGE_NAME_OPTION: bridge_interface(name)},
    )


def bridge_interface(network: str) -> str:
    """The host interface name of a kiln bridge: ``kiln`` and a hash, within Linux's 15 bytes.

    The common prefix lets one firewall rule (``-i kiln+``) cover every sandbox bridge.
    """
    return BRIDGE_PREFIX + hashlib.sha256(network.encode()).hexdigest()[:11]


async def ensure_internal_network(
    client: docker.DockerClient, name: str, labels: dict[str, str]
) -> Any:
    """The internal network called ``name``, created again if it has gone."""
    try:
        return await call(client.networks.get, name)
    except SandboxNotFound:
        return await create_internal_network(client, name, labels)


async def ensure_egress_network(client: docker.DockerClient, name: str, instance: str) -> Any:
    """The shared egress network, created on first use; creating it twice at once is harmless."""
    try:
        return await call(client.networks.get, name)
    except SandboxNotFound:
        pass
    try:
        return await call(
            client.networks.create,
            name,
            driver="bridge",
            labels=shared_labels(instance),
            check_duplicate=True,
            options={
                # Sandboxes installing at the same time must not see each other.
                "com.docker.network.bridge.enable_icc": "false",
                BRIDGE_NAME_OPTION: bridge_interface(name),
            },
        )
    except SandboxError:
        # Another process created it between our look-up and create.
        return await call(client.networks.get, name)


async def remove_network(client: docker.DockerClient, name: str) -> bool:
    """Remove a network by name; ``False`` when it was already gone."""
    try:
        network = await call(client.networks.get, name)
        await call(network.remove)
    except SandboxNotFound:
        return False
    return True


async def container_ip(client: docker.DockerClient, container_id: str, network: str) -> str:
    """The container's IPv4 address on ``network``; raises if it has none."""
    container = await call(client.containers.get, container_id)
    networks = container.attrs.get("NetworkSettings", {}).get("Networks", {})
    address = str(networks.get(network, {}).get("IPAddress") or "")
    if not address:
        raise SandboxUnavailable(f"container {container_id!r} has no address on {network!r}")
    return address


async def connect(client: docker.DockerClient, network_name: str, container_id: str) -> None:
    """Attach a container to a network."""
    network = await call(client.networks.get, network_name)
    await call(network.connect, container_id)


async def disconnect(client: docker.DockerClient, network_name: str, container_id: str) -> None:
    """Detach a container from a network; already detached, or either gone, is fine."""
    try:
        network = await call(client.networks.get, network_name)
        await call(network.disconnect, container_id, force=True)
    except SandboxNotFound:
        return
    except SandboxError as exc:
        if "not connected" not in str(exc):
            raise


@asynccontextmanager
async def egress_attached(
    client: docker.DockerClient, network_name: str, instance: str, container_id: str
) -> AsyncIterator[None]:
    """Keep the container on the egress network for the duration of the block, no longer."""
    await ensure_egress_network(client, network_name, instance)
    try:
        await connect(client, network_name, container_id)
        yield
    finally:
        # Shielded: a cancelled or timed-out install must still lose its network access.
        with anyio.CancelScope(shield=True):
            await disconnect(client, network_name, container_id)
