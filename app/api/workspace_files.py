"""Listing and reading a sandbox's workspace files through Docker (blocking; run via ``call``).

- :func:`list_workspace` runs ``find`` in the container (``exec``, argv only, no shell), with the
  dependency and build folders (``node_modules``, ``dist``, ``.git``, ``.next``) pruned at any
  depth: they hold tens of thousands of files nobody reads in a chat. Output is NUL-separated,
  so any file name survives; at most ``MAX_LISTED`` files are returned.
- :func:`read_workspace_text` asks ``stat`` what the path is, then fetches it with
  ``get_archive``. Only a regular file is answered (a folder or a symlink is "absent"), and only
  up to ``MAX_READ_BYTES`` (a larger file raises :class:`FileTooLarge` before its content is
  transferred).
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from typing import Any

import docker.errors

from sandbox import WORKSPACE

PRUNED_FOLDERS = ("node_modules", "dist", ".git", ".next")
MAX_LISTED = 5000
MAX_READ_BYTES = 2 * 1024 * 1024


class FileTooLarge(Exception):
    """A workspace file over the read limit."""

    def __init__(self, path: str, size: int) -> None:
        super().__init__(f"file {path!r} has {size} bytes; at most {MAX_READ_BYTES} are served")
        self.size = size


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
    exit_code, output = container.exec_run(find_argv(), stdout=True, stderr=False, demux=False)
    if exit_code not in (0, None) and not output:
        return []  # an empty or unreadable workspace lists as empty rather than failing
    return parse_listing(output or b"")


def read_workspace_text(container: Any, path: str) -> str | None:
    """The text of workspace file ``path`` (already normalized), ``None`` if it is no file."""
    target = f"{WORKSPACE}/{path}"
    # Ask first (a cheap exec): an archive of a folder could be the whole node_modules.
    exit_code, output = container.exec_run(["stat", "-c", "%F/%s", "--", target], demux=False)
    kind, _, size = (output or b"").decode(errors="replace").strip().rpartition("/")
    if exit_code != 0 or kind != "regular file":
        return None
    if int(size) > MAX_READ_BYTES:
        raise FileTooLarge(path, int(size))
    try:
        stream, _ = container.get_archive(target)
    except docker.errors.NotFound:
        return None  # removed in between
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
        member = next(iter(archive.getmembers()), None)
        if member is None or not member.isfile():
            return None
        extracted = archive.extractfile(member)
        return None if extracted is None else extracted.read().decode(errors="replace")
