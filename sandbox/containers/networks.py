"""Sandbox networks: ONE internal bridge per kiln instance for every sandbox, and nothing else.

Why one shared network. Docker's default address pools hold about thirty bridge networks, so a
bridge per sandbox capped a host near thirty sandboxes and the thirty-first run crashed on
"could not find an available, non-overlapping IPv4 address pool". A configured pool of small
subnets would lift the ceiling but still spends a bridge, iptables rules and a subnet per
sandbox and makes every operator edit ``daemon.json``. Instead every sandbox of an instance sits
on one network (:func:`ensure_sandbox_network`, named by ``SandboxSettings.network``), whose
isolation does not rely on being alone on it:

- ``internal=True``: Docker drops everything the containers send off the bridge (no egress, no
  published ports); the host still reaches a dev server on the container's address directly;
- ``com.docker.network.bridge.enable_icc=false``: Docker drops forwarding between two ports of
  the bridge, so one sandbox cannot reach another sandbox's dev server (or anything else of it);
  the host's own connections do not cross the bridge's forwarding path and still work. Sandboxes
  have no capabilities (no ``NET_RAW``), so they cannot forge frames past that rule either;
- the bridge is named ``kiln<hash>`` (:func:`bridge_interface`): its gateway address is a host
  address, so host services bound to ``0.0.0.0`` would answer it, and the host rules of
  ``scripts/setup.sh`` close that for every kiln bridge while keeping the host's own connections
  to sandboxes working (a sandbox may open no TCP connection and send nothing but replies),
  except to kiln's npm proxy, which listens on that gateway
  (:mod:`sandbox.containers.npm_proxy`)::

      iptables -I INPUT -i kiln+ -p tcp --syn -j DROP
      iptables -I INPUT -i kiln+ ! -p tcp -m conntrack ! --ctstate ESTABLISHED,RELATED -j DROP
      iptables -I INPUT -i kiln+ -p tcp --dport 4873 -j ACCEPT   # KILN_NPM_PROXY_PORT

One network holds as many sandboxes as its subnet has addresses (a /16 or /20 from Docker's
pools: thousands); what limits a host is memory, which admission checks
(``SandboxSettings.sandbox_limit``).

A sandbox never joins another network, not even to install: npm reaches the registry through
the proxy on its gateway, and nothing else is reachable (no default route, no DNS).

Sandboxes made before this layout each have an own network (``kiln-net-<id>``, recorded in the
registry's ``network`` field). They keep working on it; when such a container has to be
replaced, the new one joins the shared network and the old network is removed
(:func:`is_own_network` tells the two apart), and destroying or reaping one removes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import docker

from sandbox.containers.labels import network_name, shared_labels
from sandbox.docker_boundary import call
from sandbox.errors import SandboxError, SandboxNotFound, SandboxUnavailable

BRIDGE_NAME_OPTION = "com.docker.network.bridge.name"
ICC_OPTION = "com.docker.network.bridge.enable_icc"
BRIDGE_PREFIX = "kiln"
# enable_icc=false and the kiln+ host rules are iptables rules: they see traffic between two ports
# of a bridge only while the kernel passes bridged frames through iptables.
BRIDGE_FILTER_FIX = "modprobe br_netfilter && sysctl -w net.bridge.bridge-nf-call-iptables=1"
BRIDGE_FILTER_OFF = "bridge-nf-call-iptables is disabled"  # the engine's warning


def engine_filters_bridges(info: Mapping[str, Any]) -> bool:
    """Whether the kernel under an engine passes bridged traffic through iptables, as the
    engine's ``info`` says (``BridgeNfIptables``; engines that dropped the field warn instead)."""
    reported = info.get("BridgeNfIptables")
    if reported is not None:
        return bool(reported)
    return not any(BRIDGE_FILTER_OFF in str(warning) for warning in info.get("Warnings") or ())


def is_own_network(sandbox_id: str, network: str) -> bool:
    """Whether ``network`` is the sandbox's own (pre-shared layout) network, removed with it."""
    return network == network_name(sandbox_id)


def bridge_interface(network: str) -> str:
    """The host interface name of a kiln bridge: ``kiln`` and a hash, within Linux's 15 bytes.

    The common prefix lets one firewall rule (``-i kiln+``) cover every sandbox bridge.
    """
    return BRIDGE_PREFIX + hashlib.sha256(network.encode()).hexdigest()[:11]


async def ensure_sandbox_network(client: docker.DockerClient, name: str, instance: str) -> Any:
    """The instance's shared internal sandbox network (no inter-container traffic), created on
    first use; creating it twice at once is harmless (the loser finds the winner's)."""
    try:
        return await call(client.networks.get, name)
    except SandboxNotFound:
        pass
    try:
        return await call(
            client.networks.create,
            name,
            driver="bridge",
            internal=True,
            labels=shared_labels(instance),
            check_duplicate=True,
            options={ICC_OPTION: "false", BRIDGE_NAME_OPTION: bridge_interface(name)},
        )
    except SandboxError as exc:
        try:  # another process created it between our look-up and create
            return await call(client.networks.get, name)
        except SandboxNotFound:
            raise exc from None  # it really failed (no address pool left, Docker away)


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
