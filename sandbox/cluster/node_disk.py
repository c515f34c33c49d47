"""The disk quota on a swarm node: a keeper container per node makes each sandbox's btrfs
subvolume and its limit there, as kiln does on its own host (:mod:`sandbox.containers.
disk_quota`: the same layout, the same limit, the same folders bound into the sandbox).

Every node holds a btrfs filesystem at ``KILN_SWARM_DISK_ROOT`` (the same path on every node;
``docs/cluster.md`` says how to make one, quotas on). kiln cannot touch a remote node's
folders, so each node runs one keeper of the instance, ``kiln-disk-<instance>``: ``sleep``
in kiln's npm proxy image (already on every node; it carries ``btrfs-progs`` for this), the
disk root bound at its own path, no network, root with only the capabilities its commands
need (``CAP_SYS_ADMIN`` sets a qgroup limit; owner and mode changes on the sandbox's
folders). Each operation is one ``docker exec`` of a short shell script whose paths are
its arguments, never spliced into it.

The keeper goes with the instance's other per-node containers (kiln stopping with no sandbox
left, or removing the instance's shared parts); the subvolumes of parked sandboxes stay on
their nodes with their volumes.

Swarm places a task on a node of its choice and only then makes the task's volumes, so a
subvolume cannot wait for the swarm's choice: with a disk root, kiln picks the node first
(:func:`roomiest_node`, the node with the most unreserved memory, as the scheduler's spread
would), makes the subvolume and the volume bound to it there, then places the service with a
``node.id==`` constraint; the scheduler still checks the reservation.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker

from sandbox.containers.disk_quota import (
    BOUND_FOLDERS,
    SUBVOLUME_INODE,
    TEMPORARY_FOLDERS,
    USED_UP_SHARE,
    QuotaDisk,
    SandboxDisk,
    parse_qgroup_usage,
)
from sandbox.containers.labels import ROLE_LABEL, shared_labels
from sandbox.containers.named_containers import ensure_named_container, named_container
from sandbox.containers.provisioning import create_volume
from sandbox.docker_boundary import call
from sandbox.errors import (
    DiskFull,
    SandboxConfigError,
    SandboxNotFound,
    SandboxUnavailable,
)
from sandbox.images.builder import PROXY_IMAGE
from sandbox.images.templates import SANDBOX_UID

KEEPER_ROLE = "disk-keeper"
CONFIG_LABEL = "kiln.disk.config"
KEEPER_CAPABILITIES = ("SYS_ADMIN", "CHOWN", "DAC_OVERRIDE", "FOWNER")
MISSING = 3  # a script's exit status when the folder it was given is not there
# The sandbox's folders besides the workspace, made as kiln makes them on its own host.
_FOLDERS = "\n".join(
    f'mkdir -p "$f/{name}" && chown {SANDBOX_UID}:{SANDBOX_UID} "$f/{name}" '
    f'&& chmod {mode:o} "$f/{name}"'
    for name, _, mode in BOUND_FOLDERS
)
CHECK_ROOT = f"""[ "$(stat -f -c %T "$1")" = btrfs ] || exit {MISSING}
btrfs quota enable "$1"
"""
CREATE = f"""set -e
f="$1"
mkdir -p "$(dirname "$f")"
[ -e "$f" ] || btrfs subvolume create "$f" >/dev/null || [ -d "$f" ]
mkdir -p "$f/workspace"
{_FOLDERS}
btrfs qgroup limit "$2" "$f"
"""
CLEAR_TEMPORARY = f"""set -e
f="$1"
[ -d "$f" ] || exit 0
rm -rf {" ".join(f'"$f/{name}"' for name in TEMPORARY_FOLDERS)}
{_FOLDERS}
"""
USAGE = f"""[ -d "$1" ] || exit {MISSING}
btrfs qgroup show -rf --raw "$1"
"""
REMOVE = f"""f="$1"
[ -e "$f" ] || exit {MISSING}
if [ "$(stat -c %i "$f")" = {SUBVOLUME_INODE} ]; then btrfs subvolume delete "$f" >/dev/null
else rm -rf "$f"; fi
"""


def keeper_name(instance: str) -> str:
    """The keeper container's name on every node."""
    return f"kiln-disk-{instance}"


def keeper_run_kwargs(instance: str, root: Path) -> dict[str, Any]:
    """``containers.run`` arguments of the keeper on a node (module docstring)."""
    digest = hashlib.sha256(f"{PROXY_IMAGE}\0{root}\0{KEEPER_CAPABILITIES}".encode()).hexdigest()
    return {
        "image": PROXY_IMAGE,
        "entrypoint": ["sleep", "infinity"],
        "command": [],
        "name": keeper_name(instance),
        "detach": True,
        "network_mode": "none",
        "user": "0:0",
        "cap_drop": ["ALL"],
        "cap_add": list(KEEPER_CAPABILITIES),
        "security_opt": ["no-new-privileges"],
        "read_only": True,
        "init": True,
        "mem_limit": "64m",
        "volumes": {str(root): {"bind": str(root), "mode": "rw"}},
        "restart_policy": {"Name": "unless-stopped"},
        "labels": {**shared_labels(instance), ROLE_LABEL: KEEPER_ROLE, CONFIG_LABEL: digest},
    }


@dataclass(frozen=True, slots=True)
class NodeDisk:
    """One node's quota-limited sandbox folders, laid out as :class:`SandboxDisk` lays them
    out on kiln's host (``layout``), made and read through the node's ``keeper``."""

    layout: SandboxDisk
    keeper: Any  # the keeper's docker Container on the node's engine
    node: str  # the node's name, for messages

    def workspace(self, volume: str) -> Path:
        """The folder the workspace volume is bound to, on the node."""
        return self.layout.workspace(volume)

    def binds(self, volume: str) -> dict[str, str]:
        """Node folder -> container path of the writable folders besides the workspace."""
        return self.layout.binds(volume)

    async def create(self, volume: str) -> Path:
        """Make the sandbox's subvolume and folders and set its limit (idempotent)."""
        folder = self.layout.folder(volume)
        await self._run(CREATE, str(folder), str(self.layout.quota_bytes))
        return folder / "workspace"

    async def clear_temporary(self, volume: str) -> None:
        """Empty the sandbox's ``/tmp`` and ``/var/tmp`` before a new container of it."""
        await self._run(CLEAR_TEMPORARY, str(self.layout.folder(volume)))

    async def usage(self, volume: str) -> tuple[int, int] | None:
        """``(bytes written, limit)`` of the sandbox's subvolume; ``None`` when it has none."""
        shown = await self._run(USAGE, str(self.layout.folder(volume)))
        return None if shown is None else parse_qgroup_usage(shown)

    async def used_up(self, volume: str) -> bool:
        """Whether the sandbox has (nearly) reached its quota."""
        found = await self.usage(volume)
        return found is not None and found[1] > 0 and found[0] >= found[1] * USED_UP_SHARE

    async def remove(self, volume: str) -> bool:
        """Delete the sandbox's subvolume on the node; ``False`` when there was none."""
        return await self._run(REMOVE, str(self.layout.folder(volume))) is not None

    async def _run(self, script: str, *args: str) -> str | None:
        """The script's output; ``None`` when it said its folder is missing."""
        argv = ["sh", "-c", script, "sh", *args]
        result = await call(self.keeper.exec_run, argv, user="0", demux=True)
        out, err = ((part or b"").decode(errors="replace") for part in result.output)
        if result.exit_code == 0:
            return out
        if result.exit_code == MISSING:
            return None
        detail = (err or out).strip() or f"exit status {result.exit_code}"
        error = DiskFull if "No space left" in detail else SandboxUnavailable
        raise error(f"disk keeper on node {self.node!r}: {shlex.join(args)!r}: {detail}")


async def ensure_node_disk(node: docker.DockerClient, layout: SandboxDisk, where: str) -> NodeDisk:
    """The instance's keeper on the node engine ``node`` (started, or adopted when running
    with this configuration) once its disk root is a btrfs filesystem with quotas on;
    ``SandboxConfigError`` in words naming the node ``where`` and the root otherwise."""
    kwargs = keeper_run_kwargs(layout.instance, layout.root)
    keeper, _started = await ensure_named_container(node, kwargs, CONFIG_LABEL, f"node {where!r}")
    disk = NodeDisk(layout, keeper, where)
    if await disk._run(CHECK_ROOT, str(layout.root)) is None:
        raise SandboxConfigError(
            f"KILN_SWARM_DISK_ROOT={str(layout.root)!r} is not on a btrfs filesystem on node "
            f"{where!r} (docs/cluster.md: the node's disk; empty: sandboxes without a quota)"
        )
    return disk


async def remove_node_disk_keeper(
    node: docker.DockerClient, instance: str, instance_folder: Path | None
) -> bool:
    """Remove the instance's keeper from the node, and its folder of subvolumes when empty
    (the subvolumes of parked sandboxes stay); ``False`` if it had no keeper."""
    keeper = await named_container(node, keeper_name(instance))
    if keeper is None:
        return False
    if instance_folder is not None and keeper.status == "running":
        await call(keeper.exec_run, ["rmdir", str(instance_folder)], user="0")
    await call(keeper.remove, force=True)
    return True


async def _running(keeper: Any) -> bool:
    """Whether the keeper container still runs (one inspect)."""
    try:
        await call(keeper.reload)
    except SandboxNotFound:
        return False
    return bool(keeper.status == "running")


class SwarmDisk:
    """The swarm's sandbox disks as one: the instance's keeper on each node (started once per
    node per process, a running one adopted), and each volume's operations sent to the keeper
    of the node holding it (``locate``: that node's ID and engine, ``None`` when no reachable
    node holds it). The paths are the same on every node (``layout``)."""

    def __init__(
        self,
        layout: SandboxDisk,
        locate: Callable[[str], Awaitable[tuple[str, docker.DockerClient] | None]],
    ) -> None:
        self.layout = layout
        self._locate = locate
        self._keepers: dict[str, NodeDisk] = {}  # node ID -> its keeper's disk

    async def on_node(self, node_id: str, engine: docker.DockerClient) -> NodeDisk:
        """The node's disk, its keeper started (:func:`ensure_node_disk`) on first use and
        whenever it no longer runs (a node whose engine restarted, a keeper removed by hand)."""
        known = self._keepers.get(node_id)
        if known is not None and await _running(known.keeper):
            return known
        self._keepers[node_id] = await ensure_node_disk(engine, self.layout, node_id)
        return self._keepers[node_id]

    async def workspace_volume(
        self, node_id: str, engine: docker.DockerClient, volume: str, labels: dict[str, str]
    ) -> QuotaDisk | None:
        """The workspace ``volume`` on the node, bound to its subvolume there (made first),
        its temporary folders emptied for a new container; ``None`` for a volume made there
        before the quota (it keeps working, unlimited: :func:`create_volume`)."""
        disk = await create_volume(engine, volume, labels, await self.on_node(node_id, engine))
        if disk is not None:
            await disk.clear_temporary(volume)
        return disk

    async def release(self, node: docker.DockerClient) -> None:
        """Remove the instance's keeper (and its empty folder) from ``node``; started anew
        when next needed."""
        await remove_node_disk_keeper(node, self.layout.instance, self.layout.instance_folder)
        self._keepers.clear()

    def workspace(self, volume: str) -> Path:
        """The folder the workspace volume is bound to, on its node."""
        return self.layout.workspace(volume)

    def binds(self, volume: str) -> dict[str, str]:
        """Node folder -> container path of the writable folders besides the workspace."""
        return self.layout.binds(volume)

    async def create(self, volume: str) -> Path:
        """On the volume's node (made there first: :meth:`workspace_volume`)."""
        return await (await self._on_volumes_node(volume)).create(volume)

    async def clear_temporary(self, volume: str) -> None:
        """On the volume's node."""
        await (await self._on_volumes_node(volume)).clear_temporary(volume)

    async def used_up(self, volume: str) -> bool:
        """On the volume's node; ``False`` when no reachable node holds it."""
        disk = await self._volumes_disk(volume)
        return disk is not None and await disk.used_up(volume)

    async def remove(self, volume: str) -> bool:
        """On the volume's node; ``False`` when no reachable node holds it."""
        disk = await self._volumes_disk(volume)
        return disk is not None and await disk.remove(volume)

    async def _volumes_disk(self, volume: str) -> NodeDisk | None:
        found = await self._locate(volume)
        return None if found is None else await self.on_node(*found)

    async def _on_volumes_node(self, volume: str) -> NodeDisk:
        disk = await self._volumes_disk(volume)
        if disk is None:
            raise SandboxUnavailable(f"volume {volume!r} is on no reachable swarm node")
        return disk
