"""A sandbox container's cgroup read from the host: its OOM-kill counter and its processes.

Every command needs both (:mod:`sandbox.execution.exec_stream`): the counter before it runs, to
tell an OOM kill from a timeout, and the processes it left behind when it ends, to kill them
(which ones: :mod:`sandbox.execution.command_mark`).
Asked with ``docker exec`` each costs an exec round trip, about 50 ms, and both lie on the
path of every command a user waits for (the build after the answer's stream above all). Where
kiln runs on the Docker host with the rights to read the container's cgroup and its processes
(root, as ``scripts/setup.sh`` sets it up), the host answers in well under a millisecond;
elsewhere (a remote engine, a user without those rights) these return ``None`` and the caller
asks with an exec as before.

The cgroup folder depends on the cgroup version and Docker's cgroup driver, so each known
layout is tried: v1 ``<controller>/docker/<id>``, v2 ``docker/<id>`` (cgroupfs driver) and
v2 ``system.slice/docker-<id>.scope`` (systemd driver).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
from pathlib import Path

from sandbox.execution.command_mark import MarkedProcess, leftover_pids, read_marked_process

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC = Path("/proc")
_OOM_KILL = re.compile(rb"^oom_kill (\d+)$", re.MULTILINE)
_CONTAINER_ID = re.compile(r"[0-9a-f]{64}")
KILL_ROUNDS = 3


def cgroup_folders(container_id: str, controller: str, root: Path = CGROUP_ROOT) -> list[Path]:
    """Where the container's cgroup may be for ``controller`` (memory, pids), v1 first."""
    if not _CONTAINER_ID.fullmatch(container_id):
        return []  # a short id or a name: only Docker can resolve it
    return [
        root / controller / "docker" / container_id,
        root / "docker" / container_id,
        root / "system.slice" / f"docker-{container_id}.scope",
    ]


def host_oom_kills(container_id: str, root: Path = CGROUP_ROOT) -> int | None:
    """The container's OOM-kill count from its memory cgroup; ``None`` if the host cannot tell."""
    for folder in cgroup_folders(container_id, "memory", root):
        for name in ("memory.oom_control", "memory.events"):
            try:
                counted = parse_oom_kills((folder / name).read_bytes())
            except OSError:
                continue
            if counted is not None:
                return counted
    return None


def parse_oom_kills(output: bytes) -> int | None:
    """The ``oom_kill <n>`` count in ``memory.events`` / ``memory.oom_control`` text."""
    found = _OOM_KILL.search(output)
    return None if found is None else int(found.group(1))


def host_kill_leftovers(
    container_id: str, mark: int, root: Path = CGROUP_ROOT, proc: Path = PROC
) -> bool:
    """Kill (SIGKILL) the leftovers of the command marked ``mark`` in the container
    (:func:`sandbox.execution.command_mark.leftover_pids`), in rounds while a round finds any
    (what they forked meanwhile is marked too); ``False`` when the host cannot list or read the
    container's processes (ask with an exec)."""
    for _ in range(KILL_ROUNDS):
        pids = _container_pids(container_id, root)
        if pids is None:
            return False
        table: dict[int, MarkedProcess] = {}
        for pid in pids:
            try:
                table[pid] = read_marked_process(proc / str(pid))
            except (FileNotFoundError, ProcessLookupError):
                continue  # ended meanwhile
            except (OSError, ValueError):
                return False  # not ours to read: the exec can
        doomed = leftover_pids(table, mark)
        if not doomed:
            return True
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return True


def _container_pids(container_id: str, root: Path) -> list[int] | None:
    """The host pids in the container's cgroup (its pids controller's, v1; the unified one, v2)."""
    for folder in cgroup_folders(container_id, "pids", root):
        try:
            text = (folder / "cgroup.procs").read_text()
        except OSError:
            continue
        return [int(line) for line in text.split()]
    return None
