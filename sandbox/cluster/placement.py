"""Where a sandbox service landed, and that node's own engine for exec and archives.

A swarm has no exec or copy: kiln finds the service's one task (:func:`wait_for_placement`), the
node it runs on and its container, and talks to that node's engine (:func:`node_engine`).

Node engines are found by a node label, ``kiln.engine`` (:data:`ENGINE_LABEL`), whose value is
the URL a Docker client opens (``unix://…``, ``tcp://host:2376``, ``ssh://user@host``): the
operator sets it once per node (``docker node update --label-add kiln.engine=tcp://10.0.0.12:2376
NODE``) and it travels with the swarm's own state, so every kiln process sees the same map and a
node added later needs nothing in kiln's settings. TLS material for ``tcp://`` comes from the
environment as for ``DOCKER_HOST`` (``DOCKER_CERT_PATH``, ``DOCKER_TLS_VERIFY``). A node without
the label cannot host sandboxes (:class:`~sandbox.errors.SandboxUnavailable` names it).

Right after placement kiln applies what a service could not ask for on the node
(:func:`apply_node_limits`): swap capped at the memory limit, as ``docker run`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import docker
import docker.errors

from sandbox.cluster.node_proxy import CONNECT_PROBE
from sandbox.cluster.service_spec import ENGINE_LABEL
from sandbox.containers.hardening import SANDBOX_USER
from sandbox.docker_boundary import CLIENT_TIMEOUT_SECONDS, call
from sandbox.errors import SandboxCapacity, SandboxError, SandboxNotFound, SandboxUnavailable

POLL_SECONDS = 0.2
PORT_POLL_SECONDS = 0.25
# The swarm's words for a task no node can take (memory reservation, constraints, platform).
NO_ROOM = "no suitable node"
# Task states past which a task never runs (Docker's swarm task states).
FAILED_STATES = frozenset({"failed", "rejected", "shutdown", "complete", "orphaned", "remove"})


@dataclass(frozen=True)
class Placement:
    """The node and container one sandbox service's task runs as."""

    service_id: str
    node_id: str
    node_address: str
    engine_url: str
    container_id: str


async def create_sandbox_service(manager: docker.DockerClient, kwargs: dict[str, Any]) -> str:
    """Create the service ``kwargs`` describes (:func:`~sandbox.cluster.service_spec.
    sandbox_service_kwargs`); its ID."""
    service = await call(manager.services.create, **kwargs)
    return str(service.id)


def _running_task(manager: docker.DockerClient, service_id: str) -> dict[str, Any] | None:
    """The service's task once it runs; raises when it cannot run: no node has room for it
    (:class:`SandboxCapacity`, at once: the swarm says so while the task is pending), or it
    failed (:class:`SandboxUnavailable`)."""
    tasks = manager.api.tasks(filters={"service": service_id})
    for task in tasks:
        status = task["Status"]
        state, error = status["State"], status.get("Err") or status.get("Message")
        if state == "running" and status.get("ContainerStatus", {}).get("ContainerID"):
            return dict(task)
        if state == "pending" and NO_ROOM in str(error):
            raise SandboxCapacity(f"sandbox service {service_id!r}: {error!r}")
        if state in FAILED_STATES:
            raise SandboxUnavailable(f"sandbox service {service_id!r} task {state}: {error!r}")
    return None


async def wait_for_placement(
    manager: docker.DockerClient, service_id: str, timeout: float
) -> Placement:
    """The placement of the service's task once it runs (a task the swarm cannot place, e.g.
    no node has the memory reservation left, is :class:`SandboxUnavailable` at ``timeout``)."""
    with anyio.move_on_after(timeout):
        while (task := await call(_running_task, manager, service_id)) is None:
            await anyio.sleep(POLL_SECONDS)
        node = await call(manager.nodes.get, task["NodeID"])
        engine = node.attrs["Spec"].get("Labels", {}).get(ENGINE_LABEL)
        if not engine:
            raise SandboxUnavailable(f"swarm node {node.id!r} has no {ENGINE_LABEL!r} label")
        return Placement(
            service_id=service_id,
            node_id=str(node.id),
            node_address=str(node.attrs["Status"].get("Addr", "")),
            engine_url=str(engine),
            container_id=str(task["Status"]["ContainerStatus"]["ContainerID"]),
        )
    raise SandboxUnavailable(f"sandbox service {service_id!r} was not running after {timeout} s")


def node_engine(placement: Placement) -> docker.DockerClient:
    """A client of the engine of the node ``placement`` is on (the caller closes it)."""
    try:
        return docker.DockerClient(base_url=placement.engine_url, timeout=CLIENT_TIMEOUT_SECONDS)
    except docker.errors.DockerException as exc:
        raise SandboxUnavailable(f"node engine {placement.engine_url!r}: {exc!s}") from exc


async def apply_node_limits(node: docker.DockerClient, placement: Placement, memory: int) -> None:
    """Cap the container's memory plus swap at its memory (no swap), as ``docker run`` does."""
    container = await call(node.containers.get, placement.container_id)
    await call(container.update, mem_limit=memory, memswap_limit=memory)


async def remove_sandbox_service(manager: docker.DockerClient, service_id: str) -> bool:
    """Remove the service (its task's container goes with it); ``False`` if already gone."""
    try:
        service = await call(manager.services.get, service_id)
        await call(service.remove)
    except SandboxNotFound:
        return False
    return True


async def remove_workspace_volume(
    node: docker.DockerClient, name: str, within: float = CLIENT_TIMEOUT_SECONDS
) -> bool:
    """Remove a sandbox's workspace volume from its node once its container is gone (the
    swarm leaves named volumes behind); ``False`` if already gone, ``TimeoutError`` when it is
    still in use after ``within`` seconds."""
    with anyio.fail_after(within):
        while True:
            try:
                volume = await call(node.volumes.get, name)
                await call(volume.remove)
                return True
            except SandboxNotFound:
                return False
            except SandboxError as exc:
                if "in use" not in str(exc):
                    raise
                await anyio.sleep(POLL_SECONDS)  # its task's container is still being removed


async def wait_port_inside(
    node: docker.DockerClient, container_id: str, port: int, timeout: float
) -> None:
    """Return once ``port`` accepts connections inside the container (probed there: a node's
    bridge is not reachable from kiln's host); :class:`SandboxUnavailable` when the container
    stops first or ``timeout`` seconds pass."""
    probe = ["node", "-e", CONNECT_PROBE, "127.0.0.1", str(port)]
    with anyio.move_on_after(timeout):
        while True:
            container = await call(node.containers.get, container_id)
            if container.status != "running":
                raise SandboxUnavailable(
                    f"container {container_id[:12]!r} stopped before its dev server "
                    f"listened on port {port}"
                )
            result = await call(container.exec_run, probe, user=SANDBOX_USER)
            if result.exit_code == 0:
                return
            await anyio.sleep(PORT_POLL_SECONDS)
    raise SandboxUnavailable(f"dev server on port {port} did not listen within {timeout:g}s")


def service_placements(
    manager: docker.DockerClient, labels: list[str]
) -> list[tuple[Placement, dict[str, str]]]:
    """The latest task of each service carrying ``labels``, with the service's labels
    (blocking); a service with no task on a labelled node yet is left out."""
    services = manager.api.services(filters={"label": labels})
    if not services:
        return []
    names = {service["ID"]: dict(service["Spec"].get("Labels") or {}) for service in services}
    engines = {
        node["ID"]: ((node["Spec"].get("Labels") or {}).get(ENGINE_LABEL, ""), node["Status"])
        for node in manager.api.nodes()
    }
    latest: dict[str, dict[str, Any]] = {}
    for task in manager.api.tasks(filters={"service": list(names)}):
        current = latest.get(task["ServiceID"])
        if current is None or task["Version"]["Index"] > current["Version"]["Index"]:
            latest[task["ServiceID"]] = task
    placements = []
    for service_id, task in latest.items():
        engine, status = engines.get(task.get("NodeID", ""), ("", {}))
        container = (task["Status"].get("ContainerStatus") or {}).get("ContainerID", "")
        if engine and container:
            address = status.get("Addr", "")
            placement = Placement(service_id, task["NodeID"], address, engine, container)
            placements.append((placement, names[service_id]))
    return placements
