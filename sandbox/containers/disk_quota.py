"""A disk quota per sandbox: its writable space is one btrfs subvolume with a qgroup limit.

Why not Docker's own limit: ``--storage-opt size`` needs a data root on xfs with project quotas,
btrfs or zfs, and the usual one is overlay2 on ext4; a named volume has no size at all. So kiln
keeps the space sandboxes write outside Docker's data root, on a btrfs filesystem of its own
(``scripts/setup.sh`` makes one on a sparse loop file, mounted at
:data:`sandbox.disk_mounts.DEFAULT_DISK_ROOT`):
one subvolume per sandbox at ``<root>/<instance>/<volume name>``, limited by a qgroup to
``KILN_SANDBOX_DISK_QUOTA``:

- ``workspace/`` is the sandbox's workspace volume (a local volume bound to it: Docker still
  copies the template's files in on first use, and parking and the reaper still know the
  sandbox's volume by its name);
- ``home/``, ``tmp/`` and ``var-tmp/`` are bound at ``/home/node``, ``/tmp`` and ``/var/tmp``,
  and the container's root filesystem is read-only, so nothing else is writable: one limit
  covers everything a sandbox writes (workspace, npm cache, temporary files). ``tmp/`` and
  ``var-tmp/`` are emptied before each new container of the sandbox (:meth:`SandboxDisk.
  clear_temporary`): a container starts from clean temporary folders, as after a reboot, so
  nothing the app's code left there outlives its container.

Over the limit the kernel fails the write with EDQUOT ("Disk quota exceeded") in the writing
process; the host's disk and other sandboxes are untouched. The subvolume lives and dies with
the workspace volume. Without such a root (a remote Docker engine, a host without btrfs),
sandboxes run unlimited as before and ``kiln doctor`` says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio

from sandbox.disk_mounts import usable_root
from sandbox.env_settings import size_bytes
from sandbox.errors import DiskFull, SandboxConfigError, SandboxUnavailable
from sandbox.images.templates import SANDBOX_UID

if TYPE_CHECKING:
    from sandbox.settings import SandboxSettings

log = logging.getLogger(__name__)
# A write fails once little is left: from this share of the quota on, a failed command is
# taken for a full disk (btrfs accounts at its commits, so usage may stop short of the limit).
USED_UP_SHARE = 0.97
SUBVOLUME_INODE = 256  # the root folder of every btrfs subvolume has this inode number
SYSTEM_BIN_DIRS = "/usr/sbin:/usr/bin:/sbin:/bin"
# The writable folders of a sandbox besides its workspace, and where the container sees them.
BOUND_FOLDERS = (
    ("home", "/home/node", 0o755),
    ("tmp", "/tmp", 0o1777),
    ("var-tmp", "/var/tmp", 0o1777),
)
TEMPORARY_FOLDERS = ("tmp", "var-tmp")  # emptied for every new container
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}")


class QuotaDisk(Protocol):
    """What creating, starting and judging a sandbox needs of its quota-limited disk: kiln's
    own host (:class:`SandboxDisk`) or a swarm node's (:mod:`sandbox.cluster.node_disk`)."""

    def workspace(self, volume: str) -> Path:
        """The folder the workspace volume is bound to."""
        ...

    def binds(self, volume: str) -> dict[str, str]:
        """Folder -> container path of the writable folders besides the workspace."""
        ...

    async def create(self, volume: str) -> Path:
        """Make the sandbox's subvolume, folders and limit (idempotent); the workspace."""
        ...

    async def clear_temporary(self, volume: str) -> None:
        """Empty the sandbox's temporary folders (none of its containers runs)."""
        ...

    async def used_up(self, volume: str) -> bool:
        """Whether the sandbox has (nearly) reached its quota."""
        ...

    async def remove(self, volume: str) -> bool:
        """Delete the sandbox's subvolume; ``False`` when there was none."""
        ...


@dataclass(frozen=True, slots=True)
class SandboxDisk:
    """The quota-limited folders of one instance's sandboxes under a btrfs ``root``."""

    root: Path
    instance: str
    quota_bytes: int

    @property
    def instance_folder(self) -> Path:
        """Where this instance's subvolumes live (its name made safe for a path)."""
        name = self.instance if _SAFE_NAME.fullmatch(self.instance) else "instance-unnamed"
        return self.root / name

    def folder(self, volume: str) -> Path:
        """The subvolume of the sandbox whose workspace volume is ``volume``."""
        if not _SAFE_NAME.fullmatch(volume):
            raise SandboxConfigError(f"volume name {volume!r} is not a safe folder name")
        return self.instance_folder / volume

    def workspace(self, volume: str) -> Path:
        """The folder the workspace volume is bound to."""
        return self.folder(volume) / "workspace"

    def binds(self, volume: str) -> dict[str, str]:
        """Host folder -> container path of the writable folders besides the workspace."""
        return {str(self.folder(volume) / name): target for name, target, _ in BOUND_FOLDERS}

    async def create(self, volume: str) -> Path:
        """Make the sandbox's subvolume and folders and set its limit (idempotent); the
        workspace folder."""
        folder = self.folder(volume)
        if not folder.exists():
            await anyio.to_thread.run_sync(lambda: self.instance_folder.mkdir(exist_ok=True))
            try:
                await _btrfs("subvolume", "create", str(folder))
            except SandboxUnavailable:
                if not folder.exists():  # else another process made it just now: fine
                    raise
        await anyio.to_thread.run_sync(_make_folders, folder)
        await _btrfs("qgroup", "limit", str(self.quota_bytes), str(folder))
        return folder / "workspace"

    async def clear_temporary(self, volume: str) -> None:
        """Empty the sandbox's ``/tmp`` and ``/var/tmp`` (none of its containers runs): what a
        container's processes left there is gone for the next one."""
        folder = self.folder(volume)
        if folder.exists():
            await anyio.to_thread.run_sync(_clear_temporary, folder)

    async def used_up(self, volume: str) -> bool:
        """Whether the sandbox has (nearly) reached its quota: what a failed write that the
        program reported in its own words (Node says "unknown error" for EDQUOT) comes from."""
        if not self.folder(volume).exists():
            return False
        used, limit = await self.usage(volume)
        return limit > 0 and used >= limit * USED_UP_SHARE

    async def usage(self, volume: str) -> tuple[int, int]:
        """``(bytes written, limit)`` of the sandbox's subvolume (a limit of 0 is none)."""
        shown = await _btrfs("qgroup", "show", "-rf", "--raw", str(self.folder(volume)))
        return parse_qgroup_usage(shown)

    async def remove(self, volume: str) -> bool:
        """Delete the sandbox's subvolume; ``False`` when there was none. A plain folder in
        its place (left by something else) goes too."""
        folder = self.folder(volume)
        if not folder.exists():
            return False
        if folder.stat().st_ino == SUBVOLUME_INODE:
            await _btrfs("subvolume", "delete", str(folder))
        else:
            await anyio.to_thread.run_sync(shutil.rmtree, folder)
        return True

    async def remove_all(self) -> None:
        """Delete every subvolume of this instance, and its folder."""
        for name in self.volumes():
            await self.remove(name)
        await anyio.to_thread.run_sync(_remove_empty, self.instance_folder)

    def volumes(self) -> list[str]:
        """The volume names this instance has subvolumes for."""
        if not self.instance_folder.is_dir():
            return []
        return sorted(entry.name for entry in self.instance_folder.iterdir())


def sandbox_disk(settings: SandboxSettings) -> SandboxDisk | None:
    """The quota-limited disk of the settings' instance; ``None`` when sandboxes have none."""
    if settings.disk_root is None:
        return None
    return SandboxDisk(settings.disk_root, settings.instance, size_bytes(settings.disk_quota))


async def enable_quotas(root: Path) -> None:
    """Check that ``root`` is a btrfs mount point and turn its quotas on (a no-op when on);
    ``SandboxConfigError`` in words otherwise."""
    if not await anyio.to_thread.run_sync(usable_root, root):
        raise SandboxConfigError(
            f"KILN_SANDBOX_DISK_ROOT={str(root)!r} is not a btrfs mount point "
            "(scripts/setup.sh makes one; set it empty to run sandboxes without a disk quota)"
        )
    await _btrfs("quota", "enable", str(root))


def parse_qgroup_usage(shown: str) -> tuple[int, int]:
    """``(referenced, limit)`` bytes from ``btrfs qgroup show -rf --raw``; a limit of 0 is
    none. Its last line: qgroup id, referenced, exclusive, max referenced ("none"), path."""
    fields = shown.strip().splitlines()[-1].split() if shown.strip() else []
    numbers = [int(f) if f.isdigit() else 0 for f in fields[1:4]]
    if len(numbers) < 3:
        raise SandboxUnavailable(f"unexpected btrfs qgroup output: {shown!r}")
    return numbers[0], numbers[2]


def _make_folders(folder: Path) -> None:
    """The workspace (Docker fills it on first use) and the bound folders, owned by the
    sandbox user; ``/tmp`` and ``/var/tmp`` sticky and open to all, as usual."""
    (folder / "workspace").mkdir(exist_ok=True)
    for name, _, mode in BOUND_FOLDERS:
        path = folder / name
        path.mkdir(exist_ok=True)
        os.chown(path, SANDBOX_UID, SANDBOX_UID)
        path.chmod(mode)


def _clear_temporary(folder: Path) -> None:
    """Remove the temporary folders under ``folder`` (symbolic links inside are removed, never
    followed) and make them anew."""
    for name in TEMPORARY_FOLDERS:
        shutil.rmtree(folder / name, ignore_errors=True)
    _make_folders(folder)


def _remove_empty(folder: Path) -> None:
    """Remove ``folder`` if it is there and empty (another process may be filling it)."""
    with contextlib.suppress(OSError):
        folder.rmdir()


def btrfs_program() -> str:
    """The ``btrfs`` program (btrfs-progs), looked for in the system's folders too."""
    found = shutil.which("btrfs") or shutil.which("btrfs", path=SYSTEM_BIN_DIRS)
    if found is None:
        raise SandboxConfigError(
            "the btrfs program is missing (apt-get install btrfs-progs); it sets sandboxes' "
            "disk quotas"
        )
    return found


async def _btrfs(*args: str) -> str:
    """Run ``btrfs *args``, its output; a failure is ``DiskFull`` when the disk is, else
    unavailable."""
    result = await anyio.run_process([btrfs_program(), *args], check=False)
    if result.returncode == 0:
        return result.stdout.decode(errors="replace")
    detail = (result.stderr or result.stdout).decode(errors="replace").strip()
    error = DiskFull if "No space left" in detail else SandboxUnavailable
    raise error(f"btrfs {' '.join(args)!r} failed: {detail or result.returncode}")
