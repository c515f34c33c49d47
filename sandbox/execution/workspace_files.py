"""Listing and reading a sandbox's workspace, as the sandbox user, never through a symlink.

Both run ``docker exec`` as uid 1000 in ``/workspace`` (argv only, no shell). They are blocking:
call them through :func:`sandbox.docker_boundary.call` (the manager's ``list_files``
and ``read_file`` do).

- :func:`list_workspace` runs ``find`` with the dependency and build folders (``node_modules``,
  ``dist``, ``.git``, ``.next``) pruned at any depth: they hold tens of thousands of files nobody
  reads in a chat; ``.kiln`` too (kiln's own marker of the project version the sandbox holds).
  ``find`` lists regular files only, so symlinks are left out. Output is NUL-separated, so any
  file name survives; at most :data:`MAX_LISTED` files are returned.
- :func:`read_workspace_file` runs a small Node program (every template image has Node): it
  refuses a path whose real path is not the path itself (a symlink anywhere along it), opens the
  file with ``O_NOFOLLOW``, asks ``fstat`` on the open descriptor whether it is a regular file
  under :data:`MAX_READ_BYTES`, and writes it out. Docker's archive API, used before, reads as
  root and follows symlinks inside the container: a workspace link to ``/etc`` served
  ``/etc/shadow``. As uid 1000, even a link swapped in mid-read reaches nothing the sandbox's own
  code could not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from parser.paths import normalize_file_path
from sandbox.errors import FileTooLarge, SandboxUnavailable
from sandbox.images.templates import SANDBOX_UID, WORKSPACE

PRUNED_FOLDERS = ("node_modules", "dist", ".git", ".next", ".kiln")
MAX_LISTED = 5000
MAX_READ_BYTES = 2 * 1024 * 1024
SANDBOX_USER = f"{SANDBOX_UID}:{SANDBOX_UID}"
NOT_A_FILE = 3  # exit codes of READ_PROGRAM
TOO_LARGE = 4
READ_PROGRAM = f"""
const fs = require('fs');
const [path, max] = process.argv.slice(1);
function read() {{
  let fd;
  try {{
    if (fs.realpathSync(path) !== path) return {NOT_A_FILE};
    const {{O_RDONLY, O_NOFOLLOW, O_NONBLOCK}} = fs.constants;
    fd = fs.openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  }} catch {{ return {NOT_A_FILE}; }}
  const stat = fs.fstatSync(fd);
  if (!stat.isFile()) return {NOT_A_FILE};
  if (stat.size > Number(max)) {{ process.stdout.write(String(stat.size)); return {TOO_LARGE}; }}
  const data = Buffer.alloc(stat.size);
  const got = fs.readSync(fd, data, 0, stat.size, 0);
  process.stdout.write(data.subarray(0, got));
  return 0;
}}
process.exitCode = read();
"""


@dataclass(frozen=True, slots=True)
class WorkspaceFile:
    """One listed file: its path relative to the workspace and its size in bytes."""

    path: str
    size: int


def find_argv() -> list[str]:
    """The ``find`` command listing regular files as ``<size> <path>\\0``, pruning folders."""
    prune: list[str] = []
    for name in PRUNED_FOLDERS:
        prune += ["-o", "-name", name] if prune else ["-name", name]
    return [
        "find", WORKSPACE, "-mindepth", "1", "-type", "d", "(", *prune, ")", "-prune",
        "-o", "-type", "f", "-printf", "%s %P\\0",
    ]  # fmt: skip


def parse_listing(output: bytes) -> list[WorkspaceFile]:
    """``find``'s NUL-separated ``<size> <path>`` records, sorted by path, capped."""
    files = []
    for record in output.split(b"\0"):
        size, _, path = record.decode(errors="replace").partition(" ")
        if path and size.isdigit():
            files.append(WorkspaceFile(path, int(size)))
    files.sort(key=lambda item: item.path)
    return files[:MAX_LISTED]


def list_workspace(container: Any) -> list[WorkspaceFile]:
    """The workspace's files (see the module docstring). Blocking."""
    exit_code, output = container.exec_run(
        find_argv(), stdout=True, stderr=False, demux=False, user=SANDBOX_USER
    )
    if exit_code not in (0, None) and not output:
        return []  # an empty or unreadable workspace lists as empty rather than failing
    return parse_listing(output or b"")


def read_argv(path: str) -> list[str]:
    """The argv that prints workspace file ``path`` (see the module docstring)."""
    target = f"{WORKSPACE}/{normalize_file_path(path)}"
    return ["node", "-e", READ_PROGRAM, target, str(MAX_READ_BYTES)]


def read_workspace_file(container: Any, path: str) -> str | None:
    """The text of workspace file ``path``; ``None`` if it is no regular file. Blocking.

    ``path`` is normalized first (``UnsafePathError`` if it leaves the workspace); a file over
    :data:`MAX_READ_BYTES` raises :class:`~sandbox.errors.FileTooLarge`.
    """
    exit_code, (out, err) = container.exec_run(
        read_argv(path), demux=True, user=SANDBOX_USER, workdir=WORKSPACE
    )
    if exit_code == NOT_A_FILE:
        return None
    if exit_code == TOO_LARGE:
        size = int(out or b"0")
        raise FileTooLarge(f"file {path!r} has {size} bytes; at most {MAX_READ_BYTES} are served")
    if exit_code != 0:
        detail = (err or b"").decode(errors="replace")[-300:]
        raise SandboxUnavailable(f"reading {path!r} exited with {exit_code}: {detail!r}")
    return (out or b"").decode(errors="replace")
