"""The sandboxes' network on a swarm: an internal bridge on every node, no traffic between them.

An overlay network joins the nodes: a sandbox on one node reaches a sandbox on another (measured).
So the swarm-scoped network is a *bridge* instead, made in two steps:

1. on every node's own engine, a ``--config-only`` network ``<name>-config`` holding the bridge's
   options: ``enable_icc=false`` (no traffic between two sandboxes of the node) and the bridge's
   interface name (``kiln<hash>``, so the firewall rules of ``scripts/setup.sh`` cover it);
2. on the manager, ``<name>`` with ``--scope swarm --internal --config-from <name>-config``:
   each task gets the bridge of ITS node, with no route off it (no egress, no other node).

A node instantiates the bridge only while a task of the network runs there (and removes it
after), picking the subnet itself unless step 1 fixed one: kiln fixes it (``subnet``), so every
node's bridge has the same gateway, where that node's npm proxy listens, and a sandbox's
registry address is known before the swarm places it.

A node added later needs step 1 before a sandbox lands on it (:func:`ensure_node_config`).
The Docker SDK has no ``ConfigOnly`` / ``ConfigFrom`` arguments, so both are posted as the Engine
API's own JSON (:func:`create_network`).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence
from typing import Any

import anyio
import docker

from sandbox.containers.labels import shared_labels
from sandbox.containers.networks import BRIDGE_NAME_OPTION, ICC_OPTION, bridge_interface
from sandbox.docker_boundary import call
from sandbox.errors import SandboxError, SandboxNotFound

IN_USE_POLL_SECONDS = 0.2
IN_USE_WAIT_SECONDS = 30.0
log = logging.getLogger(__name__)


def config_network_name(name: str) -> str:
    """The name of each node's config-only network behind the swarm network ``name``."""
    return f"{name}-config"


def _post_network(client: docker.DockerClient, payload: dict[str, Any]) -> str:
    """``POST /networks/create`` with ``payload``; the new network's ID."""
    response = client.api._post_json(client.api._url("/networks/create"), data=payload)
    return str(client.api._result(response, json=True)["Id"])


async def create_network(client: docker.DockerClient, payload: dict[str, Any]) -> str:
    """Create a network from the Engine API's JSON unless one of its name exists; its ID."""
    try:
        existing = await call(client.networks.get, payload["Name"])
        return str(existing.id)
    except SandboxNotFound:
        return await call(_post_network, client, payload)


def subnet_gateway(subnet: str) -> str:
    """The gateway of ``subnet`` on every node: its first address (where the node's npm proxy
    listens, :mod:`sandbox.cluster.node_proxy`)."""
    return str(ipaddress.ip_network(subnet)[1])


async def ensure_node_config(
    node: docker.DockerClient, name: str, instance: str, subnet: str | None = None
) -> str:
    """Step 1 on one node's engine (module docstring); ``subnet`` (the same on every node)
    fixes the bridge's addresses, else each node picks its own when a sandbox first needs it."""
    payload: dict[str, Any] = {
        "Name": config_network_name(name),
        "ConfigOnly": True,
        "Options": {ICC_OPTION: "false", BRIDGE_NAME_OPTION: bridge_interface(name)},
        "Labels": shared_labels(instance),
    }
    if subnet is not None:
        payload["IPAM"] = {"Config": [{"Subnet": subnet, "Gateway": subnet_gateway(subnet)}]}
    return await create_network(node, payload)


async def ensure_isolated_network(
    manager: docker.DockerClient,
    nodes: Sequence[docker.DockerClient],
    name: str,
    instance: str,
    subnet: str | None = None,
) -> str:
    """The swarm's sandbox network ``name`` (module docstring), made on first use; its ID."""
    for node in nodes:
        await ensure_node_config(node, name, instance, subnet)
    return await create_network(
        manager,
        {
            "Name": name,
            "Driver": "bridge",
            "Scope": "swarm",
            "Internal": True,
            # No labels: Docker refuses any of its own settings on a network made from a
            # config-only one ("user specified configurations are not supported"); the
            # config-only networks carry the instance's labels, the name does here.
            "ConfigFrom": {"Network": config_network_name(name)},
        },
    )


async def remove_isolated_network(
    manager: docker.DockerClient, nodes: Sequence[docker.DockerClient], name: str
) -> None:
    """Remove the swarm network, then each node's config-only network (gone ones are fine).
    A node drops its instance of the swarm network a moment after the manager removed it: until
    then its config-only network is "in use", so that removal is tried again for a while, then
    left in place with a warning (a node whose engine was killed can keep it "in use" for good,
    measured on Docker 20.10; the next :func:`ensure_node_config` adopts it by its name)."""
    await _remove_network(manager, name)
    for node in nodes:
        with anyio.move_on_after(IN_USE_WAIT_SECONDS):
            while not await _removed_unless_in_use(node, config_network_name(name)):
                await anyio.sleep(IN_USE_POLL_SECONDS)
            continue
        log.warning("%r kept on node engine %r: still in use", config_network_name(name), node)


async def _removed_unless_in_use(client: docker.DockerClient, name: str) -> bool:
    try:
        await _remove_network(client, name)
    except SandboxError as exc:
        if "in use" not in str(exc):
            raise
        return False
    return True


async def _remove_network(client: docker.DockerClient, name: str) -> None:
    try:
        found = await call(client.networks.get, name)
        await call(found.remove)
    except SandboxNotFound:
        pass
