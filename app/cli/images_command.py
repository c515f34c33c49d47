"""``kiln images``: build the sandbox images (``build``) and show whether they are current (``ls``).

``kiln images build`` makes sure the base image exists (building a local one when no registry can
be reached), then builds every template image whose inputs changed; up-to-date images are
skipped, so running it again is cheap. ``--service`` also builds the images ``compose.yaml``
runs (kiln itself and Redis, see ``app.deploy.service_images``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import anyio
import anyio.to_thread
import docker

from app.cli.commands import COMMANDS
from app.deploy.service_images import ServiceImageBuilder, ServiceImageSettings
from sandbox import (
    SERVICE_IMAGES,
    TEMPLATES,
    BuildResult,
    ImageBuilder,
    ImageBuildSettings,
    ImageStatus,
    SandboxError,
    connect,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``images build`` and ``images ls`` to the ``kiln`` command line."""
    parser = subparsers.add_parser("images", help=COMMANDS["images"].help, description=__doc__)
    actions = parser.add_subparsers(dest="images_action", required=True, metavar="ACTION")
    build = actions.add_parser("build", help="build the base and template images")
    build.add_argument(
        "--template",
        action="append",
        choices=[*TEMPLATES, *SERVICE_IMAGES],
        dest="templates",
        help="build only this template, the npm proxy or the render browser (repeatable)",
    )
    build.add_argument(
        "--force", action="store_true", help="rebuild templates even if their inputs are unchanged"
    )
    build.add_argument(
        "--rebuild-base", action="store_true", help="rebuild the local base images (debootstrap)"
    )
    build.add_argument(
        "--service",
        action="store_true",
        help="also build the images compose.yaml runs (kiln and Redis)",
    )
    build.set_defaults(handler=run_build)
    listing = actions.add_parser("ls", help="list the images and whether they are up to date")
    listing.set_defaults(handler=run_ls)


def progress(line: str) -> None:
    """Print one progress line at once (called from the build's worker thread)."""
    print(line, flush=True)


def run_build(args: argparse.Namespace) -> int:
    """Handler of ``kiln images build``."""
    try:
        settings = ImageBuildSettings.from_env()
        service = ServiceImageSettings.from_env() if args.service else None
    except ValueError as exc:
        print(f"kiln images build: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        results = anyio.run(
            build_images, settings, service, args.templates, args.force, args.rebuild_base
        )
    except SandboxError as exc:
        print(f"kiln images build: {exc}", file=sys.stderr)
        return 1
    print(format_results(results, time.monotonic() - started))
    return 0


async def build_images(
    settings: ImageBuildSettings,
    service: ServiceImageSettings | None,
    names: Sequence[str] | None,
    force: bool,
    rebuild_base: bool,
) -> list[BuildResult]:
    """Connect to Docker and build (the service images too, given ``service``); the client is
    closed afterwards.
    """
    client = await anyio.to_thread.run_sync(connect)
    try:
        builder = ImageBuilder(client, settings, progress)
        results = await builder.build(names, force=force, rebuild_base=rebuild_base)
        if service is not None:
            services = ServiceImageBuilder(client, settings, service, progress)
            results += await services.build(force=force, rebuild_base=rebuild_base)
        return results
    finally:
        client.close()


def format_results(results: Sequence[BuildResult], seconds: float) -> str:
    """The closing summary: one line per image, then the total time."""
    lines = [f"{r.name:<12} {r.action:<8} {r.seconds:6.0f}s  {r.image}" for r in results]
    lines.append(f"done in {seconds:.0f}s")
    return "\n".join(lines)


def run_ls(args: argparse.Namespace) -> int:
    """Handler of ``kiln images ls``."""
    try:
        settings = ImageBuildSettings.from_env()
        rows = anyio.run(list_images, settings)
    except ValueError as exc:
        print(f"kiln images ls: {exc}", file=sys.stderr)
        return 2
    except SandboxError as exc:
        print(f"kiln images ls: {exc}", file=sys.stderr)
        return 1
    print(format_statuses(rows))
    return 0


async def list_images(settings: ImageBuildSettings) -> list[ImageStatus]:
    """The status of the base and every template image."""
    client: docker.DockerClient = await anyio.to_thread.run_sync(connect)
    try:
        return await ImageBuilder(client, settings, progress).statuses()
    finally:
        client.close()


def format_statuses(rows: Sequence[ImageStatus]) -> str:
    """A table: name, status, short id, size, image tag."""
    lines = [f"{'NAME':<12} {'STATUS':<11} {'ID':<12} {'SIZE':>8}  IMAGE"]
    for row in rows:
        short_id = (row.image_id or "-").removeprefix("sha256:")[:12]
        size = f"{row.size_bytes / 1e6:.0f}MB" if row.size_bytes is not None else "-"
        lines.append(f"{row.name:<12} {row.status:<11} {short_id:<12} {size:>8}  {row.image}")
    return "\n".join(lines)
