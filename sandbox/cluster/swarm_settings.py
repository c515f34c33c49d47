"""The swarm backend's own settings (``KILN_SWARM_*``), read as every setting is
(:class:`~sandbox.env_settings.EnvReader`), documented in README's settings table.

The manager itself is ``DOCKER_HOST`` (with ``DOCKER_TLS_VERIFY`` / ``DOCKER_CERT_PATH``, as
Docker's own clients read them); each node's engine is its ``kiln.engine`` node label
(:mod:`sandbox.cluster.placement`), opened with the same TLS variables.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sandbox.cluster.preview_relay import check_port_range
from sandbox.env_settings import EnvReader
from sandbox.errors import SandboxConfigError

# The sandboxes' bridge on every node: clear of Docker's default pools and the swarm's overlay
# pool; a /24 holds 253 sandboxes per node.
DEFAULT_SUBNET = "10.214.0.0/24"
# Below Linux's ephemeral ports (32768-60999), where a node's own outgoing connection could
# hold a relay port (CI: a relay at 42000 never listened), and below Kubernetes' NodePorts.
DEFAULT_RELAY_PORT = 24000
# kiln's own engine, where `kiln images build` makes the images copied onto the nodes.
DEFAULT_IMAGE_SOURCE = "unix:///var/run/docker.sock"
# The smallest subnet with room for a few sandboxes, the largest a relay's ports can cover.
SUBNET_PREFIXES = (16, 29)


@dataclass(frozen=True, slots=True)
class SwarmSettings:
    """Where the swarm backend puts sandboxes' addresses and previews, and its images' source."""

    subnet: str = DEFAULT_SUBNET
    relay_port: int = DEFAULT_RELAY_PORT
    image_source: str = DEFAULT_IMAGE_SOURCE
    # The btrfs filesystem at the same path on every node that holds sandboxes' disk quotas
    # (sandbox.cluster.node_disk); None: sandboxes on the swarm without a quota.
    disk_root: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SwarmSettings:
        """``KILN_SWARM_SUBNET``, ``KILN_SWARM_RELAY_PORT``, ``KILN_SWARM_IMAGE_SOURCE``,
        ``KILN_SWARM_DISK_ROOT`` of ``env`` (``os.environ`` unless given); a bad value refused
        in words."""
        read, d = EnvReader(env), cls()
        subnet = _subnet(read.text("KILN_SWARM_SUBNET", d.subnet))
        port = read.integer("KILN_SWARM_RELAY_PORT", d.relay_port, low=1024, high=65535)
        try:
            check_port_range(port, subnet)
        except ValueError as exc:
            raise SandboxConfigError(f"KILN_SWARM_RELAY_PORT={str(port)!r}: {exc}") from None
        disk_root = read.optional_path("KILN_SWARM_DISK_ROOT")
        if disk_root is not None and not disk_root.is_absolute():
            raise SandboxConfigError(
                f"KILN_SWARM_DISK_ROOT={str(disk_root)!r} must be an absolute path (the same "
                "on every node)"
            )
        source = read.text("KILN_SWARM_IMAGE_SOURCE", d.image_source)
        return cls(subnet, port, source, disk_root)


def _subnet(raw: str) -> str:
    """An IPv4 network between /16 and /29, written canonically."""
    try:
        network = ipaddress.IPv4Network(raw)
    except ValueError:
        network = None
    low, high = SUBNET_PREFIXES
    if network is None or not low <= network.prefixlen <= high:
        raise SandboxConfigError(
            f"KILN_SWARM_SUBNET={raw!r} must be an IPv4 network from /{low} to /{high} "
            "(e.g. 10.214.0.0/24)"
        )
    return str(network)
