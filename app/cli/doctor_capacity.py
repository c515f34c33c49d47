"""``kiln doctor``'s capacity checks: how many sandboxes this host holds, and what is in use.

- **capacity**: ``KILN_MAX_SANDBOXES`` (or the default derived from host memory and the
  per-sandbox memory limit) against the sandboxes of this instance that exist now, and every
  kiln sandbox on the host (other instances share its memory); fails when the instance is full;
- **memory**: the memory available now (``MemAvailable``, every kiln instance's sandboxes in it)
  against the reserve admission keeps (``KILN_HOST_MEMORY_RESERVE``), and how many new chats'
  sandboxes fit above it at their busy size; fails when not one more fits (new chats get 429);
- **pids**: the kernel's ``pid_max`` against what the configured sandboxes use idle
  (:data:`IDLE_PIDS`), the worst case (every sandbox at ``KILN_SANDBOX_PIDS``) shown;
- **networks**: the shared sandbox networks and the older per-sandbox ones still in use; fails
  when the kernel does not filter bridged traffic (``net.bridge.bridge-nf-call-iptables``),
  since then sandboxes on the shared network could reach each other;
- **disk**: each sandbox's disk quota and the space left on the quota disk that holds them all;
  fails when sandboxes have no quota (generated code could fill the host's disk).

On a swarm (``KILN_SANDBOX_BACKEND=swarm``) the nodes hold the sandboxes, so none of this host's
numbers is read: **capacity** counts the instance's sandbox services in the swarm; memory, disk
and networks (bridged traffic filtering) point at each node's ``swarm node`` line
(:mod:`app.cli.doctor_swarm`); pids says it is the nodes' own set-up.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
import docker

from app.cli.doctor_result import CheckResult
from sandbox import (
    BRIDGE_FILTER_FIX,
    DEFAULT_DISK_ROOT,
    DEFAULT_TEMPLATE,
    TEMPLATES,
    HostMemory,
    SandboxError,
    SandboxSettings,
    busy_bytes,
    call,
    instance_filter,
    room_for,
    size_bytes,
    usable_root,
)

IDLE_PIDS = 32  # an idle dev server and npm run about 20 processes and threads (bench/capacity.py)
GIB, MIB = 2**30, 2**20
PID_MAX = Path("/proc/sys/kernel/pid_max")
BRIDGE_FILTER = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
SANDBOX_LABEL = "kiln.sandbox"
SHARED = "shared"


@dataclass(frozen=True)
class InUse:
    """Sandboxes: of this instance, and of every kiln on the host (or the swarm)."""

    instance: int
    host: int


async def check_capacity(
    client: docker.DockerClient | None, env: Mapping[str, str] | None = None
) -> list[CheckResult]:
    """The capacity, memory, pids and networks checks (see the module docstring); settings
    from ``env`` (``os.environ`` unless given)."""
    if client is None:
        return [CheckResult("capacity", False, "not checked: Docker is unavailable", "fix Docker")]
    try:
        settings = await anyio.to_thread.run_sync(SandboxSettings.from_env, env)
    except ValueError as exc:  # SandboxConfigError: a malformed setting, named in the message
        return [CheckResult("capacity", False, str(exc), "fix the setting it names")]
    if settings.backend == "swarm":
        return await swarm_capacity(client, settings)
    try:
        in_use = await sandboxes_in_use(client, settings.instance)
        networks = await kiln_networks(client)
    except SandboxError as exc:
        return [CheckResult("capacity", False, str(exc), "check the Docker engine")]
    return [
        capacity_result(settings, in_use),
        memory_result(settings, HostMemory.read()),
        pids_result(settings, _read_int(PID_MAX)),
        networks_result(networks, _read_int(BRIDGE_FILTER)),
        disk_result(settings),
    ]


async def swarm_capacity(
    client: docker.DockerClient, settings: SandboxSettings
) -> list[CheckResult]:
    """On a swarm the nodes hold the sandboxes, not this host: the instance's sandbox services
    against the limit; memory, disk and bridge filtering are each node's (its ``swarm node``
    line); this host's pid_max says nothing of the nodes'."""
    try:
        services = await call(client.services.list, filters=instance_filter(settings.instance))
        every = await call(client.services.list, filters={"label": SANDBOX_LABEL})
    except SandboxError as exc:  # not a manager, say: the swarm line says so too
        return [CheckResult("capacity", False, str(exc), "point DOCKER_HOST at a swarm manager")]
    on_nodes = "each node's in its 'swarm node' line"
    unread = "not read on a swarm's nodes: their set-up (docs/cluster.md, 'Node set-up')"
    return [
        capacity_result(settings, InUse(len(services), len(every)), "in the swarm"),
        CheckResult("memory", True, f"unreserved memory and room: {on_nodes}"),
        CheckResult("pids", True, f"kernel.pid_max {unread}"),
        CheckResult("networks", True, f"bridged traffic filtering: {on_nodes}"),
        CheckResult("disk", True, f"disk quota: {on_nodes}"),
    ]


async def sandboxes_in_use(client: docker.DockerClient, instance: str) -> InUse:
    """How many sandbox containers exist, of ``instance`` and of any kiln on this host."""
    # Sparse: no inspect per container, which fails for one removed meanwhile (a busy host).
    containers = await call(
        client.containers.list, all=True, sparse=True, filters={"label": SANDBOX_LABEL}
    )
    labels = [dict(c.attrs.get("Labels") or {}) for c in containers]
    ours = [found for found in labels if found.get("kiln.instance") == instance]
    return InUse(len(ours), len(labels))


async def kiln_networks(client: docker.DockerClient) -> list[dict[str, str]]:
    """The labels of every kiln network on the host."""
    found = await call(client.networks.list, filters={"label": SANDBOX_LABEL})
    return [dict(network.attrs.get("Labels") or {}) for network in found]


def capacity_result(
    settings: SandboxSettings, in_use: InUse, where: str = "on this host"
) -> CheckResult:
    """This instance's sandboxes against its limit (``in_use.host``: every kiln's ``where``)."""
    limit = settings.sandbox_limit
    origin = "KILN_MAX_SANDBOXES" if settings.max_sandboxes is not None else "derived"
    detail = (
        f"{in_use.instance} of {limit} sandboxes in use ({origin}; instance "
        f"{settings.instance!r}); {in_use.host} kiln sandboxes {where} in all"
    )
    hint = "raise KILN_MAX_SANDBOXES if memory allows, or wait for idle sandboxes to be reaped"
    return CheckResult("capacity", in_use.instance < limit, detail, hint)


def memory_result(settings: SandboxSettings, memory: HostMemory) -> CheckResult:
    """The memory available now against the reserve admission keeps, and how many new chats'
    sandboxes (each busy) fit above it (:mod:`sandbox.backends.host_memory`)."""
    percent = settings.memory_reserve_percent
    headroom = memory.headroom(percent)
    sizes = ", ".join(f"{name} {t.idle_mib}/{t.busy_mib} MiB" for name, t in TEMPLATES.items())
    detail = (
        f"{memory.available / GIB:.1f} GiB available of {memory.total / GIB:.1f} GiB, "
        f"{memory.reserve(percent) / GIB:.1f} GiB ({percent:g} %, KILN_HOST_MEMORY_RESERVE) kept "
        f"free: room for {room_for(headroom, DEFAULT_TEMPLATE)} more new {DEFAULT_TEMPLATE} "
        f"sandboxes busy (idle/busy: {sizes}), every instance on the host counted; past it a "
        "new chat gets 429"
    )
    hint = "free memory, lower KILN_HOST_MEMORY_RESERVE, or wait for idle sandboxes to go"
    return CheckResult("memory", headroom >= busy_bytes(DEFAULT_TEMPLATE), detail, hint)


def pids_result(settings: SandboxSettings, pid_max: int | None) -> CheckResult:
    """The kernel's pid_max against the configured sandboxes' processes."""
    if pid_max is None:
        return CheckResult("pids", True, f"{PID_MAX} is unreadable: not checked")
    limit = settings.sandbox_limit
    idle, worst = limit * IDLE_PIDS, limit * settings.pids_limit
    detail = (
        f"pid_max {pid_max}; {limit} idle sandboxes use about {idle}, "
        f"{worst} if each reached KILN_SANDBOX_PIDS={settings.pids_limit}"
    )
    hint = "raise kernel.pid_max (sysctl) or lower KILN_MAX_SANDBOXES"
    return CheckResult("pids", pid_max >= idle, detail, hint)


def networks_result(networks: list[dict[str, str]], bridge_filter: int | None) -> CheckResult:
    """Kiln's networks in use, and whether the kernel filters bridged traffic."""
    shared = sum(1 for labels in networks if labels.get(SANDBOX_LABEL) == SHARED)
    own = len(networks) - shared
    detail = f"{shared} shared, {own} per-sandbox from before sharing"
    if bridge_filter == 1:
        return CheckResult("networks", True, f"{detail}; bridged traffic is filtered")
    hint = BRIDGE_FILTER_FIX
    filtered = "unknown" if bridge_filter is None else "off"
    detail += f"; bridged traffic filtering is {filtered}: sandboxes could reach each other"
    return CheckResult("networks", False, detail, hint)


def disk_result(settings: SandboxSettings) -> CheckResult:
    """Each sandbox's disk quota, and the space left for all of them."""
    root = settings.disk_root
    if root is None or not usable_root(root):
        where = "no btrfs quota disk" if root is None else f"{str(root)!r} is not a btrfs mount"
        if root is None and usable_root(DEFAULT_DISK_ROOT):
            where = f"not root, so no quotas on {str(DEFAULT_DISK_ROOT)!r}"
        detail = f"{where}: sandboxes write without a limit and could fill the host's disk"
        hint = "run scripts/setup.sh (it makes one) or set KILN_SANDBOX_DISK_ROOT to a btrfs mount"
        return CheckResult("disk", False, detail, hint)
    usage = shutil.disk_usage(root)
    detail = (
        f"each sandbox may write {settings.disk_quota} (KILN_SANDBOX_DISK_QUOTA) on {root}; "
        f"{usage.free / GIB:.1f} GiB free of {usage.total / GIB:.1f} GiB for all of them"
    )
    hint = "grow the quota disk (scripts/setup.sh, KILN_SANDBOX_DISK_SIZE) or lower the quota"
    return CheckResult("disk", usage.free >= size_bytes(settings.disk_quota), detail, hint)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
