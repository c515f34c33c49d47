"""Reading a sandbox's workspace into a project, and writing a version back into it.

Both go through the container the sandbox manager hands out (``container_for``), in threads
(``sandbox.call``): reading runs ``tar`` in the container, so what is recorded is what the
sandbox holds (an install rewrites ``package.json`` and the lock file), not what the model
wrote; folders the rule set ignores (``node_modules``, build output) never leave the container.
Only files are taken (a hard link is a file, under each of its names): a symlink is never
followed, a path that could leave the workspace is dropped. A project file that cannot be kept
(a symlink, a FIFO, a name that is not UTF-8) is listed in the snapshot's ``skipped``, with the
reason, for the turn to say so.

The workspace also carries a marker, :data:`MARKER`, naming the version it was last in step
with (recorded from it or restored into it): a sandbox without the latest version's marker is a
new one, or one left behind by a version recorded elsewhere, and is restored; one with it keeps
what it holds (even changes that could not be recorded, such as a project over the size cap).
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from app.projects.errors import ProjectError
from app.projects.rules import IGNORED_DIRS, is_source, safe_path, unkeepable_name
from sandbox import WORKSPACE, SandboxError, build_workspace_tar, call

SANDBOX_USER = "1000:1000"
MARKER_DIR = ".kiln"
MARKER = f"{MARKER_DIR}/version"
REMOVE_BATCH = 200  # paths per ``rm`` call (argv stays far below the kernel's limit)


def tar_argv() -> list[str]:
    """The ``tar`` call that packs the workspace without the ignored folders."""
    excludes = [f"--exclude={name}" for name in IGNORED_DIRS if name != MARKER_DIR]
    return ["tar", "-cf", "-", *excludes, "-C", WORKSPACE, "."]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a workspace holds: its project files, the version its marker names, and the
    project files it could not take (``path -> why``)."""

    files: dict[str, bytes]
    marker: str | None
    skipped: dict[str, str] = field(default_factory=dict)


async def read_workspace(container: Any) -> Snapshot:
    """The project files the workspace holds (``path -> content``) and its marker."""
    try:
        code, (out, err) = await call(container.exec_run, tar_argv(), demux=True, user=SANDBOX_USER)
    except SandboxError as exc:
        raise ProjectError(f"cannot read the workspace of {container.name!r}: {exc}") from exc
    if code != 0 and not out:
        detail = (err or b"").decode("utf-8", "replace").strip()
        raise ProjectError(f"cannot read the workspace of {container.name!r}: {detail}")
    return workspace_snapshot(out or b"")


def workspace_snapshot(archive: bytes) -> Snapshot:
    """The project files in a tar of the workspace (files only, safe paths only, only what the
    rule set keeps), the marker, and the project files that cannot be kept."""
    files: dict[str, bytes] = {}
    skipped: dict[str, str] = {}
    marker = None
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            path = safe_path(member.name)
            if path is None or member.isdir() or not (is_source(path) or path == MARKER):
                continue
            why = _unkept(member, path)
            extracted = None if why else _extracted(tar, member)
            if path == MARKER:
                marker = _marker(extracted)
            elif extracted is None:
                skipped[path] = why or "it cannot be read"
            else:
                files[path] = extracted.read()
    return Snapshot(files, marker, skipped)


def _marker(extracted: IO[bytes] | None) -> str | None:
    """The version the marker file names (``None`` for one that is not a file)."""
    return extracted.read(100).decode("ascii", "replace").strip() if extracted else None


def _extracted(tar: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes] | None:
    """The member's content (a hard link's is its target's, earlier in the tar)."""
    try:
        return tar.extractfile(member)
    except KeyError:  # a hard link whose target the tar does not hold
        return None


def _unkept(member: tarfile.TarInfo, path: str) -> str:
    """Why a project file of the tar cannot be kept ("" if it can)."""
    if member.issym():
        return "it is a symbolic link"
    if not (member.isreg() or member.islnk()):
        return "it is not a regular file"
    if unkeepable_name(path):
        return "its name is not UTF-8"
    return ""


async def write_workspace(
    container: Any,
    files: Mapping[str, bytes],
    remove: Iterable[str] = (),
    *,
    marker: str | None = None,
) -> None:
    """Write ``files`` (and the ``marker``, if given) into the workspace in one tar, then delete
    ``remove``."""
    for path in [*files, *remove]:
        if safe_path(path) != path:
            raise ProjectError(f"refusing to write a path outside the workspace: {path!r}")
    items = list(files.items())
    if marker is not None:
        items.append((MARKER, f"{marker}\n".encode()))
    try:
        if items:
            await call(container.put_archive, WORKSPACE, build_workspace_tar(items))
        doomed = sorted(remove)
        for start in range(0, len(doomed), REMOVE_BATCH):
            batch = [f"{WORKSPACE}/{path}" for path in doomed[start : start + REMOVE_BATCH]]
            await call(container.exec_run, ["rm", "-f", "--", *batch], user=SANDBOX_USER)
    except SandboxError as exc:
        raise ProjectError(f"cannot write the workspace of {container.name!r}: {exc}") from exc
