"""What the cluster nodes' code runs on the host: its tools, found like other tests find
redis-server, and the names and folder every cluster shares (tests/cluster/nodes.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

PREFIX = "kiln-swarm-test"
SEARCH_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
STOP_TIMEOUT_SECONDS = 20.0
BASE_DIR = Path("/var/tmp")
OWNER_FILE = "owner"  # the pid of the process that started the cluster ("": a person)


class ClusterError(RuntimeError):
    """The nodes could not be started, joined or removed; the message says which step."""


def binary(name: str) -> str:
    """The path of ``name``: on ``PATH``, else in the system folders (root's tools)."""
    found = shutil.which(name) or shutil.which(name, path=SEARCH_PATH)
    if found is None:
        raise ClusterError(f"{name!r} is not installed; the cluster nodes need it")
    return found


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command (the first argument found by :func:`binary`), its output captured."""
    result = subprocess.run(
        [binary(args[0]), *args[1:]], capture_output=True, text=True, check=False
    )
    if check and result.returncode != 0:
        raise ClusterError(f"{' '.join(args)!r} failed: {result.stderr.strip()!r}")
    return result


def base_dir() -> Path:
    """Where the clusters' folders are made (each then a tmpfs of its own, see :func:`up`)."""
    return BASE_DIR
