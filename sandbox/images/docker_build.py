"""The mechanics of one ``docker build``: contexts, input hashes, streamed output, image state.

Builds go through the Docker SDK's low-level ``APIClient.build`` rather than the ``docker build``
CLI: it needs no CLI on the host, takes the build context as a tar made here (so the host's CA
bundle can be added to it without touching the repository), and streams the build output as
JSON, which is turned into progress lines. The functions here block; callers run them through
``sandbox.docker_boundary.call``, so a ``progress`` callback is called from a worker
thread.
"""

from __future__ import annotations

import collections
import hashlib
import io
import re
import tarfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors

from sandbox.docker_boundary import run_wrapped
from sandbox.errors import ImageBuildFailed, SandboxError, SandboxNotFound

IMAGE_LABEL = "kiln.image"  # which kiln image this is: a template name, or "base"
INPUTS_LABEL = "kiln.image.inputs"  # content hash of the build inputs, for skipping rebuilds
CA_FILE = "kiln-build-ca.pem"
# Left behind by running npm or a build by hand inside images/; never part of a context.
EXCLUDED_NAMES = frozenset({"node_modules", "dist", ".next", ".git", "__pycache__"})
BUILD_ERROR_TAIL = 12  # output lines quoted when a build fails
# The legacy builder colours a step's stderr; progress lines are plain text.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class BuildResult:
    """What happened to an image: ``built``, ``skipped`` (up to date), ``present``, ``pulled``."""

    name: str
    image: str
    action: str
    image_id: str
    seconds: float
    # The image this build replaced, if it could not be removed yet (it had child images).
    replaced_id: str | None = None


@dataclass(frozen=True, slots=True)
class ContextFile:
    """One file of a build context."""

    path: str
    content: bytes
    executable: bool = False


@dataclass(frozen=True, slots=True)
class ImageState:
    """An existing local image: its id and its labels."""

    image_id: str
    labels: Mapping[str, str]

    @property
    def inputs(self) -> str | None:
        """The input hash the image was built from, if kiln built it."""
        return self.labels.get(INPUTS_LABEL)


def context_files(root: Path) -> list[ContextFile]:
    """Every file under ``root`` (sorted, POSIX paths), without build leftovers."""
    if not (root / "Dockerfile").is_file():
        hint = "KILN_IMAGES_DIR names the images/ folder of a kiln checkout"
        raise ImageBuildFailed(f"no Dockerfile in {str(root)!r} ({hint})")
    files = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_dir() or EXCLUDED_NAMES.intersection(relative.parts):
            continue
        executable = bool(path.stat().st_mode & 0o111)
        files.append(ContextFile(relative.as_posix(), path.read_bytes(), executable))
    return files


def inputs_digest(files: Iterable[ContextFile], params: Mapping[str, str]) -> str:
    """A content hash of build inputs: file paths, modes and contents, and ``params``."""
    digest = hashlib.sha256()
    for item in sorted(files, key=lambda f: f.path):
        digest.update(f"file {item.path} {int(item.executable)} {len(item.content)}\n".encode())
        digest.update(item.content)
    for key in sorted(params):
        digest.update(f"param {key}={params[key]}\n".encode())
    return "sha256:" + digest.hexdigest()


def context_tar(files: Iterable[ContextFile]) -> io.BytesIO:
    """A build context tar of ``files``, reproducible (no timestamps or owners)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for item in files:
            info = tarfile.TarInfo(item.path)
            info.size = len(item.content)
            info.mode = 0o755 if item.executable else 0o644
            tar.addfile(info, io.BytesIO(item.content))
    buffer.seek(0)
    return buffer


def image_state(client: docker.DockerClient, tag: str) -> ImageState | None:
    """The local image ``tag``, or ``None`` if there is none (blocking; run it through ``call``)."""
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    return ImageState(image.id, dict(image.labels or {}))


def stream_build(client: docker.DockerClient, progress: Progress, **build_args: Any) -> str:
    """Run ``APIClient.build`` to the end, reporting each output line; returns the image id.

    Blocking: run it through ``call``. Raises ``ImageBuildFailed`` with the builder's message.
    """
    tag = build_args.get("tag")
    image_id = None
    pending = ""
    tail: collections.deque[str] = collections.deque(maxlen=BUILD_ERROR_TAIL)
    for chunk in client.api.build(decode=True, rm=True, forcerm=True, **build_args):
        if "error" in chunk:
            output = " | ".join(tail)
            message = chunk["error"].strip()
            raise ImageBuildFailed(f"building {tag!r} failed: {message!r} after {output!r}")
        pending += ANSI_ESCAPE.sub("", chunk.get("stream", ""))
        *lines, pending = pending.split("\n")
        for line in lines:
            if line.strip():
                tail.append(line.rstrip())
                progress(line.rstrip())
        image_id = chunk.get("aux", {}).get("ID", image_id)
    if image_id is None:
        raise ImageBuildFailed(f"building {tag!r} produced no image")
    return str(image_id)


def remove_replaced(client: docker.DockerClient, old_id: str | None, new_id: str) -> bool:
    """Drop the image a rebuild replaced (blocking); ``False`` if it is still in use.

    An image stays while a container or a child image uses it; a replaced base is retried once
    the templates built on it were replaced too.
    """
    if old_id is None or old_id == new_id:
        return True
    try:
        run_wrapped(client.images.remove, old_id, noprune=False)
    except SandboxError as exc:
        return isinstance(exc, SandboxNotFound)  # already gone counts as removed
    return True
