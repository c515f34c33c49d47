"""Each swarm node as ``kiln doctor`` reports it (docs/cluster.md, "What `kiln doctor` checks per
node"): one :class:`NodeReport` per node of the manager's ``docker node ls``.

Per node: its state and availability, the ``kiln.engine`` label and that engine answering (its
version, and whether its kernel filters bridged traffic: ``enable_icc=false`` needs it), kiln's
images there as the same builds as kiln's own engine has
(:mod:`sandbox.cluster.node_images`), its capacity (memory, CPUs, what every task reserves
there, this instance's sandboxes, room for how many more: :mod:`sandbox.cluster.capacity`), and
the node requirements read from a **probe sandbox** placed on that node with kiln's own
hardening and node limits (:mod:`sandbox.cluster.node_checks`: ``NoNewPrivs`` from the daemon's
``--no-new-privileges``, memory + swap = memory), removed right after; with
``KILN_SWARM_DISK_ROOT`` its disk keeper started and the root checked (a btrfs filesystem,
quotas on: :mod:`sandbox.cluster.node_disk`). Images a node lacks are
said, not failed: kiln copies a template's images onto every node before it places a sandbox of
it (the doctor only looks); the probe runs as the lightest template the node has.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

import docker

from sandbox.backends.swarm import SwarmBackend, open_backend
from sandbox.cluster.capacity import NodeCapacity, cluster_capacity
from sandbox.cluster.image_distribution import source_image_ids
from sandbox.cluster.node_checks import NodeCheck, check_sandbox_node
from sandbox.cluster.node_disk import ensure_node_disk
from sandbox.cluster.node_images import nodes_lacking
from sandbox.cluster.placement import (
    apply_node_limits,
    create_sandbox_service,
    remove_sandbox_service,
    remove_workspace_volume,
    wait_for_placement,
)
from sandbox.cluster.service_spec import sandbox_service_kwargs
from sandbox.containers.labels import volume_name
from sandbox.containers.networks import BRIDGE_FILTER_FIX, engine_filters_bridges
from sandbox.docker_boundary import call
from sandbox.env_settings import size_bytes
from sandbox.errors import SandboxError
from sandbox.images.builder import PROXY_IMAGE
from sandbox.images.templates import TEMPLATES, get_template
from sandbox.settings import SandboxSettings

GIB = 1024**3
# The probe runs as the first of these the node has (the lightest first).
PROBE_TEMPLATES = ("vanilla", "vite-react", "nextjs")
PROBE_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class NodeReport:
    """One node's line: whether kiln can place sandboxes there, what was seen, what to do."""

    node: str  # its address (the nodes of one machine share a hostname)
    ok: bool
    detail: str
    hint: str = ""


async def swarm_node_reports(settings: SandboxSettings) -> list[NodeReport]:
    """One report per node of the swarm ``DOCKER_HOST`` manages, for the instance of
    ``settings`` (module docstring); refusals to open it raise (``DockerUnavailable``)."""
    backend = await open_backend(settings)
    try:
        return await node_reports(backend)
    finally:
        await backend.aclose()


async def node_reports(backend: SwarmBackend) -> list[NodeReport]:
    """One report per node of ``backend``'s swarm."""
    instance = backend.settings.instance
    images = [template.image for template in TEMPLATES.values()] + [PROXY_IMAGE]
    expected = await source_image_ids(backend.client, images)
    lacking = await nodes_lacking(backend.manager, expected)
    memory = size_bytes(backend.settings.mem_limit)
    reports = []
    for node in await cluster_capacity(backend.manager, instance):
        reports.append(await _report(backend, node, lacking.get(node.node_id, []), memory))
    return reports


async def _report(
    backend: SwarmBackend, node: NodeCapacity, lacking: list[str], memory: int
) -> NodeReport:
    seen = [
        f"{node.node_id[:12]} {node.state}/{node.availability}",
        f"memory {node.memory_bytes / GIB:.1f} GiB, {node.nano_cpus / 1e9:g} CPUs, "
        f"reserved {node.reserved_bytes / GIB:.1f} GiB, {node.sandboxes} sandbox(es) of this "
        f"instance, room for {node.room(memory)} more",
    ]
    if not node.usable:
        hint = "make it ready and active with a kiln.engine label (docs/cluster.md)"
        return NodeReport(node.address, False, "; ".join(seen), hint)
    try:
        info = await call(backend.engine(node.engine).info)
    except SandboxError as exc:
        return NodeReport(node.address, False, f"{'; '.join(seen)}; engine {node.engine!r}: {exc}")
    seen.insert(1, f"engine {info.get('ServerVersion', '?')}")
    if not engine_filters_bridges(info):
        unfiltered = "bridged traffic is not filtered: sandboxes on it could reach each other"
        hint = f"on the node: {BRIDGE_FILTER_FIX}"
        return NodeReport(node.address, False, f"{'; '.join(seen)}; {unfiltered}", hint)
    seen.append("bridged traffic filtered")
    disk = await _disk_quota(backend, node)
    if disk is not None:
        hint = "make KILN_SWARM_DISK_ROOT a btrfs filesystem on the node (docs/cluster.md)"
        return NodeReport(node.address, False, f"{'; '.join(seen)}; disk quota: {disk}", hint)
    seen.append(
        "no disk quota (KILN_SWARM_DISK_ROOT unset)"
        if backend.disk is None
        else f"disk quota {backend.settings.disk_quota} on {str(backend.disk.layout.root)!r}"
    )
    if lacking:
        seen.append(f"lacks {', '.join(lacking)} (copied before a sandbox of it lands here)")
    present = [name for name in PROBE_TEMPLATES if not _lacks(lacking, name)]
    if not present:
        hint = "place a sandbox (kiln copies its images first), then run the doctor again"
        return NodeReport(node.address, False, f"{'; '.join(seen)}; not probed", hint)
    try:
        checks = await _probe(backend, node, present[0])
    except SandboxError as exc:
        return NodeReport(node.address, False, f"{'; '.join(seen)}; probe sandbox: {exc}")
    seen += [
        f"{check.requirement.setting}: {'met' if check.met else check.seen}" for check in checks
    ]
    unmet = [check.requirement.daemon_flag for check in checks if not check.met]
    hint = f"configure the node: {', '.join(unmet)}" if unmet else ""
    return NodeReport(node.address, not unmet, "; ".join(seen), hint)


async def _disk_quota(backend: SwarmBackend, node: NodeCapacity) -> str | None:
    """Why the node cannot hold quota-limited sandboxes (its keeper started, its root
    checked: :func:`ensure_node_disk`); ``None`` when it can or no quota is asked for."""
    if backend.disk is None:
        return None
    try:
        await ensure_node_disk(backend.engine(node.engine), backend.disk.layout, node.node_id)
    except SandboxError as exc:
        return str(exc)
    return None


def _lacks(lacking: list[str], template: str) -> bool:
    """Whether the node has no image of ``template`` at all (another build will do to probe)."""
    return f"{get_template(template).image} (missing)" in lacking


async def _probe(backend: SwarmBackend, node: NodeCapacity, template: str) -> list[NodeCheck]:
    """Place a probe sandbox on ``node`` as kiln places any, read the node checks, remove it."""
    await backend.npm_registry()  # the instance's network, on every node
    sandbox_id = f"probe{secrets.token_hex(4)}"
    kwargs = sandbox_service_kwargs(
        backend.settings,
        get_template(template),
        sandbox_id,
        network=backend.settings.network,
        created=time.time(),
        constraints=[f"node.id=={node.node_id}"],
    )
    service_id = await create_sandbox_service(backend.manager, kwargs)
    engine: docker.DockerClient = backend.engine(node.engine)
    try:
        placement = await wait_for_placement(backend.manager, service_id, PROBE_TIMEOUT_SECONDS)
        await apply_node_limits(engine, placement, size_bytes(backend.settings.mem_limit))
        return await check_sandbox_node(engine, placement.container_id)
    finally:
        await remove_sandbox_service(backend.manager, service_id)
        await remove_workspace_volume(engine, volume_name(sandbox_id))
