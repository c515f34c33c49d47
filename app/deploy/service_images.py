"""Building the images ``compose.yaml`` runs: kiln itself and Redis.

- ``kiln/kiln`` (``images/kiln/Dockerfile``) on ``python:3.11-slim-bookworm``. Its build context
  is the repository root filtered by the root ``.dockerignore`` (the same context ``docker
  compose build`` sends), plus, under ``kiln-build/``, what only this host knows: the CA bundle
  pip must trust and tiktoken's cached encodings (kiln never downloads them at run time). How
  pip reaches its index goes in as build args (``app.deploy.pip_index``), proxies as Docker's
  predefined proxy args.
- ``kiln/redis`` (``images/redis/Dockerfile``) on ``redis:7-bookworm``.

Both bases are pulled, or, where no registry is reachable, built locally as stand-ins on the
sandbox base image's Debian (``sandbox.images.base_image.ensure_stand_in``). Like the sandbox
images, each image carries the hash of its inputs and is rebuilt only when they change; the CA
bundle and proxies are not hashed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import docker
from docker.utils.build import exclude_paths

from app.deploy.pip_index import PipIndex
from app.errors import ConfigError
from app.tokens import CL100K, O200K, cache_file_for, tiktoken_cache_dir
from sandbox import (
    BUILD_LOCK,
    EXCLUDED_NAMES,
    BuildResult,
    ContextFile,
    EnvReader,
    ImageBuildFailed,
    ImageBuildSettings,
    ImageRecipe,
    Progress,
    StandIn,
    build_if_stale,
    build_lock,
    call,
    context_files,
    ensure_stand_in,
)

KILN_DOCKERFILE = "images/kiln/Dockerfile"
# Where the host's additions sit in the kiln image's context (images/kiln/Dockerfile reads them).
HOST_FOLDER = "kiln-build"
HOST_CA_FILE = f"{HOST_FOLDER}/kiln-build-ca.pem"
TIKTOKEN_FOLDER = f"{HOST_FOLDER}/tiktoken-cache"
TIKTOKEN_ENCODINGS = (CL100K, O200K)


@dataclass(frozen=True)
class ServiceImageSettings:
    """The service images' tags and their bases; ``from_env()`` reads ``KILN_*`` variables.

    compose.yaml reads the same variables, with the same defaults.
    """

    kiln_image: str = "kiln/kiln:latest"
    redis_image: str = "kiln/redis:latest"
    python_base: str = "python:3.11-slim-bookworm"
    redis_base: str = "redis:7-bookworm"
    pip: PipIndex = field(default_factory=PipIndex)
    tiktoken_cache_dir: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServiceImageSettings:
        """Settings from the environment and the host's pip configuration (blocking)."""
        read = EnvReader(environ, ConfigError)
        defaults = cls()
        return cls(
            kiln_image=read.text("KILN_SERVICE_IMAGE", defaults.kiln_image),
            redis_image=read.text("KILN_REDIS_IMAGE", defaults.redis_image),
            python_base=read.text("KILN_PYTHON_BASE", defaults.python_base),
            redis_base=read.text("KILN_REDIS_BASE", defaults.redis_base),
            pip=PipIndex.from_env(read.env),
            tiktoken_cache_dir=tiktoken_cache_dir(read.env),
        )


def source_files(root: Path, dockerfile: str = KILN_DOCKERFILE) -> list[ContextFile]:
    """The files of ``root`` its ``.dockerignore`` lets into a build context (blocking)."""
    ignore = root / ".dockerignore"
    if not ignore.is_file():
        hint = "KILN_IMAGES_DIR must be the images/ folder of a kiln checkout"
        raise ImageBuildFailed(f"no .dockerignore in {str(root)!r} ({hint})")
    lines = ignore.read_text(encoding="utf-8").splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    files = []
    for relative in sorted(exclude_paths(str(root), patterns, dockerfile=dockerfile)):
        path = root / relative
        parts = Path(relative).parts
        # kiln-build/ on disk is for plain builds; this builder adds the host's own.
        if parts[0] == HOST_FOLDER or EXCLUDED_NAMES.intersection(parts):
            continue
        if path.is_file():
            executable = bool(path.stat().st_mode & 0o111)
            files.append(ContextFile(Path(relative).as_posix(), path.read_bytes(), executable))
    return files


def tiktoken_files(cache_dir: str) -> list[ContextFile]:
    """tiktoken's cached encodings kiln uses, as found in ``cache_dir`` (blocking)."""
    files = []
    for encoding in TIKTOKEN_ENCODINGS:
        path = cache_file_for(encoding, cache_dir) if cache_dir else None
        if path is not None and path.is_file():
            files.append(ContextFile(f"{TIKTOKEN_FOLDER}/{path.name}", path.read_bytes()))
    return files


def ca_files(bundle: Path | None) -> list[ContextFile]:
    """The CA bundle pip trusts during the build, if there is one (blocking)."""
    return [ContextFile(HOST_CA_FILE, bundle.read_bytes())] if bundle else []


class ServiceImageBuilder:
    """Builds the kiln and Redis images (and their bases when needed), skipping current ones."""

    def __init__(
        self,
        client: docker.DockerClient,
        images: ImageBuildSettings,
        service: ServiceImageSettings,
        progress: Progress,
    ) -> None:
        """``progress`` receives human-readable lines, possibly from a worker thread."""
        self.client = client
        self.images = images
        self.service = service
        self.progress = progress

    async def build(self, *, force: bool = False, rebuild_base: bool = False) -> list[BuildResult]:
        """The Python base and kiln, then the Redis base and Redis.

        ``force`` rebuilds kiln and Redis without the build cache; ``rebuild_base`` rebuilds the
        two bases locally even if they are present.
        """
        python = StandIn("python-base", self.service.python_base, "kiln/base")
        redis = StandIn("redis-base", self.service.redis_base, "redis/base")
        async with build_lock(BUILD_LOCK, self.progress):
            results = [await self.ensure(python, force=rebuild_base)]
            kiln = await self.kiln_recipe(results[0].image_id)
            results.append(await build_if_stale(self.client, kiln, self.progress, force=force))
            results.append(await self.ensure(redis, force=rebuild_base))
            server = await self.redis_recipe(results[2].image_id)
            results.append(await build_if_stale(self.client, server, self.progress, force=force))
        return results

    async def ensure(self, stand_in: StandIn, *, force: bool) -> BuildResult:
        """A base image: present, pulled, or built locally."""
        return await ensure_stand_in(self.client, self.images, stand_in, self.progress, force=force)

    async def kiln_recipe(self, base_id: str) -> ImageRecipe:
        """The kiln image's build: the repository's source, the host's additions, pip's index."""
        root = self.images.images_dir.parent
        sources = await call(source_files, root)
        encodings = await call(tiktoken_files, self.service.tiktoken_cache_dir)
        if len(encodings) < len(TIKTOKEN_ENCODINGS):
            where = self.service.tiktoken_cache_dir or "(none)"
            self.progress(f"[kiln] no tiktoken encodings in {where!r}: the build downloads them")
        ca_bundle = self.service.pip.cert or self.images.ca_bundle
        return ImageRecipe(
            name="kiln",
            tag=self.service.kiln_image,
            files=[*sources, *encodings],
            buildargs={"BASE": self.service.python_base, **self.service.pip.build_args()},
            identity={"base_id": base_id},
            extra_files=await call(ca_files, ca_bundle),
            hidden_buildargs=self.images.proxy_args,
            dockerfile=KILN_DOCKERFILE,
        )

    async def redis_recipe(self, base_id: str) -> ImageRecipe:
        """The Redis image's build: ``images/redis`` on the Redis base."""
        files = await call(context_files, self.images.images_dir / "redis")
        return ImageRecipe(
            name="redis",
            tag=self.service.redis_image,
            files=files,
            buildargs={"BASE": self.service.redis_base},
            identity={"base_id": base_id},
            hidden_buildargs=self.images.proxy_args,
        )
