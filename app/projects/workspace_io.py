"""Reading a sandbox's workspace into a project, and writing a version back into it.

Both go through the container the sandbox manager hands out (``container_for``), in threads
(``sandbox.call``): reading runs ``find`` and ``tar`` in the container, so what is recorded is
what the sandbox holds (an install rewrites ``package.json`` and the lock file), not what the
model wrote; folders and files the rule set ignores (``node_modules``, build output, logs) never
leave the container. Only files are taken (a hard link is a file, under each of its names): a
symlink is never followed, a path that could leave the workspace is dropped. A project file that
cannot be kept (a symlink, a FIFO, a name that is not UTF-8) is listed in the snapshot's
``skipped``, with the reason, for the turn to say so.

A read is linear, bounded and cancellable (a workspace can hold anything the app wrote):

1. a **listing** (``find``: sizes and names, no contents) is checked against the cap first: a
   workspace over it is refused in words naming its largest files, without reading any of them
   (a restore, which must get a user out of exactly that, takes the listing alone:
   :attr:`Snapshot.complete` is false);
2. the **archive** (``tar`` of the files the same ``find`` names) is streamed frame by frame
   (``sandbox.read_stdout``, never docker-py's quadratic ``demux``) and stopped at the cap plus
   the archive's own overhead: a workspace that grew meanwhile is refused too;
3. a cancel or the deadline (:data:`READ_SECONDS`) stops the read, and kills ``tar`` in the
   container.

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

import anyio.to_thread

from app.projects.errors import ProjectError, ProjectTooLarge
from app.projects.installed_match import INSTALLED_RECORD
from app.projects.rules import (
    IGNORED_DIRS,
    IGNORED_FILES,
    check_size,
    is_source,
    safe_path,
    too_large,
    unkeepable_name,
)
from sandbox import WORKSPACE, SandboxError, build_workspace_tar, call, read_stdout

SANDBOX_USER = "1000:1000"
MARKER_DIR = ".kiln"
MARKER = f"{MARKER_DIR}/version"
REMOVE_BATCH = 200  # paths per ``rm`` call (argv stays far below the kernel's limit)
DEFAULT_MAX_BYTES = 50 * 2**20  # ``KILN_PROJECT_MAX_BYTES``'s default
READ_SECONDS = 120.0  # a whole read (listing or archive); a cap-sized archive takes ~1 s
LISTING_MAX_BYTES = 8 * 2**20  # names and sizes: some 100,000 files
# What the archive may add to the files' bytes: a header and up to 511 bytes of padding per
# file, a long name's extra header, folders, tar's closing blocks.
ARCHIVE_BYTES_PER_FILE = 2048
ARCHIVE_BYTES_FIXED = 2**20
# The listing: the marker's first bytes, a NUL, then ``size path\0`` per file; ``$@`` is the
# find expression (:func:`find_expression`), shared with the archive so both see the same files.
LISTING_SCRIPT = (
    "head -c 100 .kiln/version 2>/dev/null | tr -d '\\000'; printf '\\000'; "
    "exec find . \"$@\" -printf '%s %P\\0'"
)
ARCHIVE_SCRIPT = 'find . "$@" -print0 | tar --null --no-recursion -T - -cf -'


def find_expression() -> list[str]:
    """``find``'s expression for the project's files: ignored folders pruned at any depth,
    every entry but folders (a symlink or FIFO is listed, to be named as not kept, never
    followed), ignored file names left out (the rule set's globs, as ``-name`` reads
    them)."""
    pruned = [arg for name in IGNORED_DIRS for arg in ("-o", "-name", name)][1:]
    skipped = [arg for name in IGNORED_FILES for arg in ("!", "-name", name)]
    return ["(", *pruned, ")", "-prune", "-o", "!", "-type", "d", *skipped]


def listing_argv() -> list[str]:
    """The call that lists the workspace's project files with their sizes, marker first."""
    return ["sh", "-c", LISTING_SCRIPT, "sh", *find_expression()]


def tar_argv() -> list[str]:
    """The call that packs the workspace's project files (those :func:`listing_argv` names)."""
    return ["sh", "-c", ARCHIVE_SCRIPT, "sh", *find_expression()]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a workspace holds: its project files (``sizes`` lists them all; ``files`` has their
    contents when ``complete``, nothing when the workspace is over the cap) and the version its
    marker names, and the project files it could not take (``path -> why``)."""

    files: dict[str, bytes]
    marker: str | None
    skipped: dict[str, str] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    complete: bool = True


async def read_workspace(
    container: Any, max_bytes: int = DEFAULT_MAX_BYTES, *, whole: bool = True
) -> Snapshot:
    """The project files the workspace holds and its marker, read within ``max_bytes``.

    Over the cap, ``whole`` (recording a version) raises :class:`ProjectTooLarge` naming the
    largest files; otherwise (a restore) the snapshot holds the listing alone."""
    try:
        listing = await _bounded(container, listing_argv(), LISTING_MAX_BYTES)
        marker, sizes = parse_listing(listing)
        if sum(sizes.values()) > max_bytes:
            if whole:
                raise too_large(sizes, max_bytes)
            return Snapshot({}, marker, sizes=sizes, complete=False)
        budget = max_bytes + ARCHIVE_BYTES_PER_FILE * len(sizes) + ARCHIVE_BYTES_FIXED
        archive = await _bounded(container, tar_argv(), budget)
    except SandboxError as exc:
        raise ProjectError(f"cannot read the workspace of {container.name!r}: {exc}") from exc
    snapshot = await anyio.to_thread.run_sync(workspace_snapshot, archive)
    check_size(snapshot.files, max_bytes)  # what was read, exactly (files may have grown)
    return Snapshot(snapshot.files, marker, snapshot.skipped, sizes)


async def _bounded(container: Any, argv: list[str], max_bytes: int) -> bytes:
    """Stdout of ``argv`` in the workspace, refused past ``max_bytes`` or on a failure."""
    out = await read_stdout(
        container.client, container.id, argv, max_bytes=max_bytes, timeout=READ_SECONDS
    )
    if out.over_cap:
        raise ProjectTooLarge(
            f"the workspace of {container.name!r} passed {max_bytes} bytes while being read "
            "(its files grew meanwhile, or it holds too many of them)"
        )
    if out.exit_code != 0 and not out.stdout:
        raise ProjectError(f"cannot read the workspace of {container.name!r}: {out.stderr!r}")
    return out.stdout


async def read_installed_record(container: Any) -> bytes | None:
    """npm's record of what the workspace's ``node_modules`` holds (its hidden lock file,
    :mod:`app.projects.installed_match`); ``None`` when it is missing, unreadable or over
    :data:`LISTING_MAX_BYTES`."""
    argv = ["cat", f"{WORKSPACE}/{INSTALLED_RECORD}"]
    try:
        out = await read_stdout(
            container.client, container.id, argv, max_bytes=LISTING_MAX_BYTES, timeout=READ_SECONDS
        )
    except SandboxError:
        return None
    return None if out.over_cap or out.exit_code != 0 else out.stdout


def parse_listing(listing: bytes) -> tuple[str | None, dict[str, int]]:
    """The marker and ``path -> size`` of the project files in :func:`listing_argv`'s output."""
    head, _, rest = listing.partition(b"\0")
    marker = head.decode("ascii", "replace").strip() or None
    sizes: dict[str, int] = {}
    for entry in rest.split(b"\0"):
        size, _, name = entry.partition(b" ")
        path = safe_path(name.decode("utf-8", "surrogateescape"))
        if path is not None and size.isdigit() and is_source(path):
            sizes[path] = int(size)
    return marker, sizes


def workspace_snapshot(archive: bytes) -> Snapshot:
    """The project files in a tar of the workspace (files only, safe paths only, only what the
    rule set keeps), the marker if the tar holds it, and the project files that cannot be kept."""
    files: dict[str, bytes] = {}
    skipped: dict[str, str] = {}
    marker = None
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:  # never compressed
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
    except tarfile.TarError as exc:
        raise ProjectError(f"the workspace's archive cannot be read: {exc}") from exc
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
