"""Each swarm node's capacity for sandboxes, as the scheduler sees it (for ``kiln doctor``,
cluster-wide admission and the warm pool).

A sandbox service reserves its memory limit (:mod:`sandbox.cluster.service_spec`), so a node
holds as many more sandboxes as its unreserved memory has room for; the scheduler counts every
task's reservation, kiln's or not, and so does :func:`cluster_capacity`. A node that is not
``ready`` and ``active`` (down, drained, paused) has no room, whatever its memory.
:func:`roomiest_node` is where kiln places a new sandbox (and pins it: the swarm backend).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import docker

from sandbox.cluster.service_spec import ENGINE_LABEL
from sandbox.containers.labels import INSTANCE_LABEL
from sandbox.docker_boundary import call
from sandbox.errors import SandboxCapacity


@dataclass(frozen=True)
class NodeCapacity:
    """One node: what it has, what is reserved on it, and how many of this instance's
    sandboxes run there."""

    node_id: str
    address: str
    state: str  # ready, down, unknown, disconnected
    availability: str  # active, pause, drain
    engine: str  # the kiln.engine label ("": the node cannot hold sandboxes)
    memory_bytes: int
    nano_cpus: int
    reserved_bytes: int
    sandboxes: int

    @property
    def usable(self) -> bool:
        """Whether sandboxes may be placed on this node at all."""
        return self.state == "ready" and self.availability == "active" and bool(self.engine)

    def room(self, sandbox_bytes: int) -> int:
        """How many more sandboxes reserving ``sandbox_bytes`` each fit on this node."""
        if not self.usable or sandbox_bytes <= 0:
            return 0
        return max(self.memory_bytes - self.reserved_bytes, 0) // sandbox_bytes


def _reservation(task: dict[str, Any]) -> int:
    reservations = task.get("Spec", {}).get("Resources", {}).get("Reservations", {})
    return int(reservations.get("MemoryBytes", 0))


def _instance(task: dict[str, Any]) -> str:
    labels = task.get("Spec", {}).get("ContainerSpec", {}).get("Labels") or {}
    return str(labels.get(INSTANCE_LABEL, ""))


def _capacity(manager: docker.DockerClient, instance: str) -> list[NodeCapacity]:
    tasks = manager.api.tasks(filters={"desired-state": "running"})
    report = []
    for node in manager.api.nodes():
        mine = [task for task in tasks if task.get("NodeID") == node["ID"]]
        resources = node["Description"].get("Resources", {})
        report.append(
            NodeCapacity(
                node_id=node["ID"],
                address=node["Status"].get("Addr", ""),
                state=node["Status"]["State"],
                availability=node["Spec"].get("Availability", ""),
                engine=(node["Spec"].get("Labels") or {}).get(ENGINE_LABEL, ""),
                memory_bytes=int(resources.get("MemoryBytes", 0)),
                nano_cpus=int(resources.get("NanoCPUs", 0)),
                reserved_bytes=sum(_reservation(task) for task in mine),
                sandboxes=sum(1 for task in mine if _instance(task) == instance),
            )
        )
    return sorted(report, key=lambda capacity: capacity.address)


async def cluster_capacity(manager: docker.DockerClient, instance: str) -> list[NodeCapacity]:
    """Every node of the swarm with its capacity (``instance``: whose sandboxes to count)."""
    return await call(_capacity, manager, instance)


def roomiest_node(
    nodes: Sequence[NodeCapacity],
    memory: int,
    reachable: set[str],
    placing: Mapping[str, int],
) -> NodeCapacity:
    """The reachable node with room for one more sandbox reserving ``memory`` and the most
    unreserved memory, counting ``placing`` (node ID -> bytes of sandboxes being placed there
    now, not yet among its tasks); fewest of the instance's sandboxes first among equals.
    ``SandboxCapacity`` when no node has room."""
    counted = [
        replace(node, reserved_bytes=node.reserved_bytes + placing.get(node.node_id, 0))
        for node in nodes
        if node.node_id in reachable
    ]
    fitting = [node for node in counted if node.room(memory) > 0]
    if not fitting:
        raise SandboxCapacity(
            f"no swarm node has {memory} bytes of memory unreserved for another sandbox"
        )
    return max(fitting, key=lambda node: (node.memory_bytes - node.reserved_bytes, -node.sandboxes))
