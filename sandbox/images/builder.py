"""Building the sandbox images: one per template (``images/<name>/``), on the base image, and
the npm registry proxy's (``images/npm-proxy``, :mod:`sandbox.containers.npm_proxy`) and the
render check's browser (``images/render-browser``, :mod:`sandbox.preview.render_check`) the
same way.

``ImageBuilder.build`` makes sure the base exists (present, pulled, or built locally, see
``sandbox.images.base_image``), then builds each template's ``Dockerfile`` with ``BASE`` and the
host's npm registry and proxies as build args, and the host's CA bundle added to the build context
(npm inside the build must verify the registry's TLS, which may be re-signed by a proxy).

A template build is skipped when the image's ``kiln.image.inputs`` label equals the content hash
of its inputs: every file of ``images/<name>/``, the base image's id and the build args that
shape the result. The CA bundle and proxies are left out: they change how the registry is
reached, not what the image does. How builds run is described in ``sandbox.images.docker_build``.

The Dockerfiles live in the repository's top-level ``images/`` (kiln runs from a checkout;
``KILN_IMAGES_DIR`` points elsewhere).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
import docker

from sandbox.docker_boundary import call
from sandbox.images.base_image import BASE_NAME, base_digest, ensure_base
from sandbox.images.docker_build import (
    CA_FILE,
    IMAGE_LABEL,
    INPUTS_LABEL,
    BuildResult,
    ContextFile,
    Progress,
    context_files,
    context_tar,
    image_state,
    inputs_digest,
    remove_replaced,
    stream_build,
)
from sandbox.images.settings import ImageBuildSettings
from sandbox.images.templates import TEMPLATES, Template

# Two builds at once (two shells, a test session and setup.sh) would both see a stale image and
# both build it; the second to finish would orphan the first's image. One host-wide lock.
BUILD_LOCK = Path(tempfile.gettempdir()) / "kiln-images-build.lock"
PROXY_NAME = "npm-proxy"  # built like a template: same build args, same skip rule
PROXY_IMAGE = (
    "kiln/npm-proxy:latest"  # the npm registry proxy's image (sandbox.containers.npm_proxy)
)
RENDER_NAME = "render-browser"  # the render check's browser (sandbox.preview.render_check)
RENDER_IMAGE = "kiln/render-browser:latest"
# Images built like templates from ``images/<name>/`` that are not templates.
SERVICE_IMAGES = {PROXY_NAME: PROXY_IMAGE, RENDER_NAME: RENDER_IMAGE}


@dataclass(frozen=True, slots=True)
class ImageStatus:
    """One row of ``kiln images ls``: ``missing``, ``stale``, ``up to date`` or ``present``."""

    name: str
    image: str
    status: str
    image_id: str | None
    size_bytes: int | None


def template_params(settings: ImageBuildSettings, base_id: str) -> dict[str, str]:
    """The build args and base identity that shape a template image (hashed with its files)."""
    params = {"BASE": settings.base_image, "base_id": base_id}
    if settings.npm_registry:
        params["npm_config_registry"] = settings.npm_registry
    return params


def ca_context_file(settings: ImageBuildSettings) -> ContextFile:
    """The CA bundle npm trusts during the build; empty when there is none."""
    content = settings.ca_bundle.read_bytes() if settings.ca_bundle else b""
    return ContextFile(CA_FILE, content)


def image_size(client: docker.DockerClient, tag: str) -> int | None:
    """The size of local image ``tag`` in bytes, or ``None`` (blocking)."""
    state = image_state(client, tag)
    if state is None:
        return None
    return int(client.images.get(state.image_id).attrs.get("Size", 0))


class ImageBuilder:
    """Builds the base (when needed) and the template images, skipping what is up to date."""

    def __init__(
        self, client: docker.DockerClient, settings: ImageBuildSettings, progress: Progress
    ) -> None:
        """``progress`` receives human-readable lines, possibly from a worker thread."""
        self.client = client
        self.settings = settings
        self.progress = progress

    async def build(
        self, names: Iterable[str] | None = None, *, force: bool = False, rebuild_base: bool = False
    ) -> list[BuildResult]:
        """Ensure the base, then build the images ``names``: templates, ``npm-proxy`` and
        ``render-browser`` (all of them by default).

        ``force`` rebuilds the templates without the build cache; ``rebuild_base`` rebuilds the
        base locally even if one is present.
        """
        wanted = list(names or [*TEMPLATES, *SERVICE_IMAGES])
        templates = [template_named(name) for name in wanted if name not in SERVICE_IMAGES]
        async with build_lock(BUILD_LOCK, self.progress):
            base = await ensure_base(self.client, self.settings, self.progress, force=rebuild_base)
            results = [base]
            for template in templates:
                results.append(await self.build_template(template, base.image_id, force=force))
            for name, image in SERVICE_IMAGES.items():
                if name in wanted:
                    results.append(await self.build_image(name, image, base.image_id, force=force))
            await call(remove_replaced, self.client, base.replaced_id, base.image_id)
        return results

    async def build_template(self, template: Template, base_id: str, *, force: bool) -> BuildResult:
        """Build ``template``'s image unless its inputs are unchanged (or ``force``)."""
        return await self.build_image(template.name, template.image, base_id, force=force)

    async def build_image(self, name: str, image: str, base_id: str, *, force: bool) -> BuildResult:
        """Build ``images/<name>`` as ``image`` unless its inputs are unchanged (or ``force``)."""
        started = time.monotonic()
        files = await call(context_files, self.settings.images_dir / name)
        params = template_params(self.settings, base_id)
        digest = inputs_digest(files, params)
        existing = await call(image_state, self.client, image)
        if existing is not None and existing.inputs == digest and not force:
            self.progress(f"[{name}] up to date ({image})")
            return BuildResult(name, image, "skipped", existing.image_id, 0.0)
        self.progress(f"[{name}] building {image}")
        buildargs = {key: value for key, value in params.items() if key != "base_id"}
        image_id = await call(
            stream_build,
            self.client,
            lambda line: self.progress(f"[{name}] {line}"),
            fileobj=context_tar([*files, ca_context_file(self.settings)]),
            custom_context=True,
            tag=image,
            buildargs={**buildargs, **self.settings.proxy_args},
            labels={IMAGE_LABEL: name, INPUTS_LABEL: digest},
            nocache=force,
        )
        old_id = existing.image_id if existing else None
        await call(remove_replaced, self.client, old_id, image_id)
        seconds = time.monotonic() - started
        self.progress(f"[{name}] built {image} in {seconds:.0f}s")
        return BuildResult(name, image, "built", image_id, seconds)

    async def statuses(self) -> list[ImageStatus]:
        """Whether the base and each template image exists and matches its inputs."""
        base = await call(image_state, self.client, self.settings.base_image)
        rows = [await self.base_status()]
        base_id = base.image_id if base else None
        for template in TEMPLATES.values():
            rows.append(await self.template_status(template, base_id))
        for name, image in SERVICE_IMAGES.items():
            rows.append(await self.image_status(name, image, base_id))
        return rows

    async def template_status(self, template: Template, base_id: str | None) -> ImageStatus:
        """One template's row: ``stale`` when its inputs or its base changed."""
        return await self.image_status(template.name, template.image, base_id)

    async def image_status(self, name: str, image: str, base_id: str | None) -> ImageStatus:
        """The row of ``images/<name>`` built as ``image``: ``stale`` when its inputs or its
        base changed."""
        state = await call(image_state, self.client, image)
        if state is None:
            status = "missing"
        elif base_id is None:
            status = "stale"
        else:
            files = await call(context_files, self.settings.images_dir / name)
            current = inputs_digest(files, template_params(self.settings, base_id))
            status = "up to date" if state.inputs == current else "stale"
        size = await call(image_size, self.client, image)
        image_id = state.image_id if state else None
        return ImageStatus(name, image, status, image_id, size)

    async def base_status(self) -> ImageStatus:
        """The base image's row: ``present`` when it was not built by kiln."""
        tag = self.settings.base_image
        state = await call(image_state, self.client, tag)
        if state is None:
            status = "missing"
        elif state.labels.get(IMAGE_LABEL) != BASE_NAME:
            status = "present"
        else:
            current = await base_digest(self.settings)
            status = "up to date" if state.inputs == current else "stale"
        size = await call(image_size, self.client, tag)
        image_id = state.image_id if state else None
        return ImageStatus(BASE_NAME, tag, status, image_id, size)


@contextlib.asynccontextmanager
async def build_lock(path: Path, progress: Progress) -> AsyncIterator[None]:
    """Hold an exclusive lock on ``path`` (waiting in a thread if another build holds it)."""
    descriptor = open_lock_file(path)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress("waiting for another `kiln images build` to finish")
            await anyio.to_thread.run_sync(fcntl.flock, descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def open_lock_file(path: Path) -> int:
    """A read-only descriptor of ``path``, created if missing (flock needs no write access).

    Opening an existing file without ``O_CREAT`` matters: in a sticky /tmp, ``O_CREAT`` on a
    file another user created is refused (``fs.protected_regular``).
    """
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)


def template_named(name: str) -> Template:
    """The template called ``name``; ``ValueError`` naming the known ones otherwise."""
    if name not in TEMPLATES:
        raise ValueError(f"unknown template {name!r}; known: {', '.join(TEMPLATES)}")
    return TEMPLATES[name]
