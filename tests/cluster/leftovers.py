"""Removing what clusters of tests/cluster/nodes.py leave: daemons, the sandboxes' processes
and cgroups, mounts, namespaces (with their veths and bridges), the host's legs and folders,
found by the name prefix alone, so a run killed before its teardown leaves nothing that
``scripts/cluster-nodes down`` or the next session (:func:`remove_stale`) cannot find."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from tests.cluster.host_tools import (
    OWNER_FILE,
    PREFIX,
    STOP_TIMEOUT_SECONDS,
    base_dir,
    run,
)


def remove_stale() -> list[str]:
    """Remove the clusters whose owning process has ended (a test run killed before its
    teardown); a person's clusters and those of live runs (other sessions) stay."""
    removed: list[str] = []
    for folder in base_dir().glob(f"{PREFIX}-*"):
        try:
            owner = (folder / OWNER_FILE).read_text().strip()
        except OSError:
            continue  # being made or removed right now
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            removed += remove_leftovers(folder.name)
    return removed


def remove_leftovers(prefix: str = PREFIX) -> list[str]:
    """Remove everything named ``prefix*``: daemons (found by their pid files and shims'
    folders), namespaces (and so their veths and bridges), the host's legs, and the folders.
    Returns what was removed (``scripts/cluster-nodes down`` lists it)."""
    removed: list[str] = []
    removed += kill_daemons(prefix)
    removed += remove_mounts(prefix)
    for namespace in run("ip", "netns", "list").stdout.split():
        if namespace.startswith(prefix):
            run("ip", "netns", "delete", namespace, check=False)
            removed.append(f"netns {namespace}")
    for link in host_legs(prefix):
        run("ip", "link", "delete", link, check=False)
        removed.append(f"link {link}")
    for folder in base_dir().glob(f"{prefix}*"):
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(f"folder {folder}")
    return removed


def daemon_pids(prefix: str) -> list[int]:
    """Processes whose command line names a folder of ``prefix`` (containerd, dockerd, shims)."""
    marker = str(base_dir() / prefix).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue  # it ended meanwhile
    return pids


def cgroup_folders(prefix: str) -> list[Path]:
    """The nodes' ``--cgroup-parent`` folders in every cgroup hierarchy."""
    return sorted(Path("/sys/fs/cgroup").glob(f"*/{prefix}*")) + sorted(
        Path("/sys/fs/cgroup").glob(f"{prefix}*")
    )


def signal_all(pids: Iterable[int], signum: int) -> None:
    """Send ``signum`` to each of ``pids`` that still lives."""
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signum)


def cgroup_pids(prefix: str) -> set[int]:
    """Every process in the nodes' cgroups: the sandboxes' processes."""
    pids: set[int] = set()
    for folder in cgroup_folders(prefix):
        for procs in folder.rglob("cgroup.procs"):
            try:
                pids.update(int(line) for line in procs.read_text().split())
            except OSError:
                continue
    return pids


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: an ended child not yet reaped by its parent (a zombie, as the
    daemons of a cluster this process started) does not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kill_daemons(prefix: str) -> list[str]:
    """End the daemons and containers of ``prefix`` left running (SIGTERM, then SIGKILL)."""
    pids = daemon_pids(prefix)
    signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.1)
    stragglers = set(daemon_pids(prefix)) | cgroup_pids(prefix)
    signal_all(stragglers, signal.SIGKILL)
    for folder in sorted(cgroup_folders(prefix), key=lambda f: -len(f.parts)):
        for child in sorted(folder.rglob("*"), key=lambda f: -len(f.parts)):
            if child.is_dir():
                remove_cgroup(child)
        remove_cgroup(folder)
    return [f"process {pid}" for pid in sorted(set(pids) | stragglers)]


def remove_cgroup(folder: Path) -> None:
    """Remove an empty cgroup folder, waiting briefly for killed processes to leave it."""
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    while True:
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def remove_mounts(prefix: str) -> list[str]:
    """Unmount what the nodes' daemons mounted under their folders (deepest first)."""
    marker = str(base_dir() / prefix)
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(marker):
            points.append(point)
    for point in sorted(points, key=len, reverse=True):
        run("umount", "-l", point, check=False)
    return [f"mount {point}" for point in points]


def host_legs(prefix: str) -> list[str]:
    """The host-namespace interfaces whose alias starts with ``prefix``."""
    legs = []
    for line in run("ip", "-o", "link", "show").stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if f"alias {prefix}" in line:
            legs.append(name)
    return legs


def remaining(prefix: str) -> list[str]:
    """Whatever of the cluster ``prefix`` still exists."""
    found = [f"process {pid}" for pid in daemon_pids(prefix)]
    found += [f"cgroup {folder}" for folder in cgroup_folders(prefix)]
    found += [n for n in run("ip", "netns", "list").stdout.split() if n.startswith(prefix)]
    found += [f"link {link}" for link in host_legs(prefix)]
    found += [str(folder) for folder in base_dir().glob(f"{prefix}*")]
    mounts = Path("/proc/self/mountinfo").read_text()
    return found + (["mounts"] if str(base_dir() / prefix) in mounts else [])
