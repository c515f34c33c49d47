"""What a swarm node must provide for a sandbox, checked on a sandbox running there.

:data:`~sandbox.cluster.service_spec.NODE_PROVIDES` names the hardening a service cannot carry;
each entry has a check here that reads the truth from the node's own engine and the container
(not the daemon's flags, which kiln cannot see on a remote node): ``kiln doctor`` runs them per
node on a probe sandbox, and the cluster tests on every sandbox they place.
"""

from __future__ import annotations

from dataclasses import dataclass

import docker

from sandbox.cluster.service_spec import NODE_PROVIDES, NodeRequirement
from sandbox.docker_boundary import call


@dataclass(frozen=True)
class NodeCheck:
    """One requirement on one node: met or not, with what was seen."""

    requirement: NodeRequirement
    met: bool
    seen: str


def _status_field(node: docker.DockerClient, container_id: str, field: str) -> str:
    """A field of ``/proc/1/status`` in the container (its init: what every process inherits)."""
    result = node.containers.get(container_id).exec_run(["cat", "/proc/1/status"])
    for line in result.output.decode(errors="replace").splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return str(value).strip()
    return ""


async def check_sandbox_node(node: docker.DockerClient, container_id: str) -> list[NodeCheck]:
    """Each of :data:`NODE_PROVIDES` on the node running ``container_id``."""
    no_new_privileges = await call(_status_field, node, container_id, "NoNewPrivs")
    container = await call(node.containers.get, container_id)
    host_config = container.attrs["HostConfig"]
    memory, with_swap = host_config.get("Memory", 0), host_config.get("MemorySwap", 0)
    return [
        NodeCheck(NODE_PROVIDES["security_opt"], no_new_privileges == "1", no_new_privileges),
        NodeCheck(
            NODE_PROVIDES["memswap_limit"],
            memory > 0 and with_swap == memory,
            f"memory {memory}, memory+swap {with_swap}",
        ),
    ]
