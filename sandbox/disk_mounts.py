"""Where sandboxes' disk can live: the btrfs mount point ``scripts/setup.sh`` makes, and the
check that a folder is one (read from /proc/self/mountinfo).

Below the settings (which pick :data:`DEFAULT_DISK_ROOT` when it is usable) and the containers
(:mod:`sandbox.containers.disk_quota`, which turns quotas on under it).
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_DISK_ROOT = Path("/var/lib/kiln/sandbox-disk")
MOUNTINFO = Path("/proc/self/mountinfo")


def mount_of(path: Path, mountinfo: str | None = None) -> tuple[Path, str] | None:
    """The mount point holding ``path`` and its filesystem type (from /proc/self/mountinfo)."""
    text = MOUNTINFO.read_text() if mountinfo is None else mountinfo
    target = os.path.realpath(path)
    best: tuple[Path, str] | None = None
    for line in text.splitlines():
        fields = line.split(" - ", 1)
        if len(fields) != 2:
            continue
        point = fields[0].split()[4].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(str(best[0]))):
            best = (Path(point), fields[1].split()[0])
    return best


def usable_root(path: Path, mountinfo: str | None = None) -> bool:
    """Whether ``path`` is itself a btrfs mount point (the shape setup.sh makes)."""
    found = mount_of(path, mountinfo)
    return found is not None and found == (Path(os.path.realpath(path)), "btrfs")
