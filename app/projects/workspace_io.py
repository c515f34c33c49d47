"""Reading a sandbox's workspace into a project, and writing a version back into it.

Both go through the container the sandbox manager hands out (``container_for``), in threads
(``sandbox.call``): reading runs ``tar`` in the container, so what is recorded is what the
sandbox holds (an install rewrites ``package.json`` and the lock file), not what the model
wrote; folders the rule set ignores (``node_modules``, build output) never leave the container.
Only regular files are taken: a symlink is never followed, a path that could leave the
workspace is dropped.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable, Mapping
from typing import Any

from app.projects.errors import ProjectError
from app.projects.rules import IGNORED_DIRS, is_source, safe_path
from sandbox import WORKSPACE, SandboxError, build_workspace_tar, call

SANDBOX_USER = "1000:1000"
REMOVE_BATCH = 200  # paths per ``rm`` call (argv stays far below the kernel's limit)


def tar_argv() -> list[str]:
    """The ``tar`` call that packs the workspace without the ignored folders."""
    excludes = [f"--exclude={name}" for name in IGNORED_DIRS]
    return ["tar", "-cf", "-", *excludes, "-C", WORKSPACE, "."]


async def read_workspace(container: Any) -> dict[str, bytes]:
    """The project files the workspace holds (``path -> content``)."""
    try:
        code, (out, err) = await call(container.exec_run, tar_argv(), demux=True, user=SANDBOX_USER)
    except SandboxError as exc:
        raise ProjectError(f"cannot read the workspace of {container.name!r}: {exc}") from exc
    if code != 0 and not out:
        detail = (err or b"").decode("utf-8", "replace").strip()
        raise ProjectError(f"cannot read the workspace of {container.name!r}: {detail}")
    return workspace_files(out or b"")


def workspace_files(archive: bytes) -> dict[str, bytes]:
    """The project files in a tar of the workspace: regular files only, safe paths only, and
    only what the rule set keeps."""
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            path = safe_path(member.name)
            if path is None or not member.isreg() or not is_source(path):
                continue
            extracted = tar.extractfile(member)
            if extracted is not None:
                files[path] = extracted.read()
    return files


async def write_workspace(
    container: Any, files: Mapping[str, bytes], remove: Iterable[str] = ()
) -> None:
    """Write ``files`` into the workspace (one tar) and delete ``remove``."""
    for path in [*files, *remove]:
        if safe_path(path) != path:
            raise ProjectError(f"refusing to write a path outside the workspace: {path!r}")
    try:
        if files:
            await call(container.put_archive, WORKSPACE, build_workspace_tar(files.items()))
        doomed = sorted(remove)
        for start in range(0, len(doomed), REMOVE_BATCH):
            batch = [f"{WORKSPACE}/{path}" for path in doomed[start : start + REMOVE_BATCH]]
            await call(container.exec_run, ["rm", "-f", "--", *batch], user=SANDBOX_USER)
    except SandboxError as exc:
        raise ProjectError(f"cannot write the workspace of {container.name!r}: {exc}") from exc
