"""``kiln serve``: the API, the web UI, the preview proxy and workers, in one process.

    kiln serve [--host 127.0.0.1] [--port 8000] [--data-dir DIR] [--workers N | --no-worker]

- **Redis**: ``REDIS_URL`` if set; otherwise a private ``redis-server`` on a unix socket with its
  files in the data directory, restarted if it dies and stopped on exit
  (:mod:`app.service.embedded_redis`).
- **Sign-in**: the first start on an empty data directory creates the user ``local``; every
  start prints a login link with a fresh one-time token in a box, like Jupyter
  (``http://kiln.localhost:8000/login?token=...``), and again, fresh, after the image check
  if that logged anything; ``kiln login-url`` prints another at any time.
- **Workers**: ``--workers N`` (default 1) in-process workers, each running up to
  ``KILN_WORKER_CONCURRENCY`` runs at once; ``--no-worker`` leaves the queue to ``kiln worker``
  processes.
- **Images**: missing or outdated sandbox images are built in the background at start
  (``--no-build`` skips it; ``kiln images build`` does it by hand).
- Logs are JSON lines on stderr, with run and request ids. SIGINT/SIGTERM stop the server
  (event streams end at once; other requests get a few seconds), then the workers (runs in
  progress are resumed by the next worker that starts), then park the sandboxes (containers and
  networks removed, workspace volumes kept for the next start:
  :mod:`sandbox.lifecycle.parking`), then Redis. All of it within ``KILN_STOP_LIMIT`` (15 s):
  past it, or at a second signal, the process ends at once (:mod:`app.service.stop_deadline`).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

import anyio
import anyio.abc

from app.api.canonical_host import previews_share_its_site
from app.cli.commands import COMMANDS
from app.cli.local_user import boxed, local_login_url
from app.config import ServiceSettings
from app.data_dir import make_private
from app.errors import ConfigError, error_code, start_failure
from app.logs import setup_logging
from app.service.embedded_redis import EmbeddedRedis
from app.service.http_server import KilnServer, server_config
from app.service.stack import ServiceStack, build_app_for, open_stack
from app.service.stop_deadline import StopDeadline
from app.tokens import check_tokenizer
from sandbox import ImageBuilder, ImageBuildSettings, SandboxError

log = logging.getLogger(__name__)
EXIT_OK, EXIT_FAILED, EXIT_BAD_USAGE = 0, 1, 2
PARK_LIMIT_SECONDS = 6.0  # a stop (Ctrl+C, SIGTERM) must end within seconds
REDIS_STOP_RESERVE_SECONDS = 2.0  # what parking leaves of the stop's deadline for what follows


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``serve`` subcommand."""
    command = subparsers.add_parser("serve", help=COMMANDS["serve"].help, description=__doc__)
    command.add_argument("--host", help="the address to listen on (KILN_HOST, 127.0.0.1)")
    command.add_argument("--port", type=int, help="the port to listen on (KILN_PORT, 8000)")
    command.add_argument("--data-dir", type=Path, help="the data directory (KILN_DATA_DIR)")
    workers = command.add_mutually_exclusive_group()
    workers.add_argument("--workers", type=int, default=1, metavar="N", help="in-process workers")
    workers.add_argument("--no-worker", action="store_true", help="run no worker here")
    command.add_argument("--no-build", action="store_true", help="do not build missing images")
    command.add_argument("--log-level", default="info", help="debug, info, warning, error")
    command.add_argument(
        "--access-log",
        action="store_true",
        help="log every HTTP request (off by default, so the sign-in link stands out)",
    )
    command.set_defaults(handler=handle_serve)


def settings_from(args: argparse.Namespace, env: Mapping[str, str]) -> ServiceSettings:
    """The service settings: the environment, overridden by the command line."""
    overrides = dict(env)
    for name, value in (("KILN_DATA_DIR", args.data_dir), ("KILN_HOST", args.host)):
        if value is not None:
            overrides[name] = str(value)
    if args.port is not None:
        overrides["KILN_PORT"] = str(args.port)
    return ServiceSettings.from_env(overrides)


def handle_serve(args: argparse.Namespace) -> int:
    """Handle ``kiln serve``; returns the exit code."""
    if args.workers < 1:
        print("kiln serve: --workers must be at least 1 (or use --no-worker)", file=sys.stderr)
        return EXIT_BAD_USAGE
    try:
        settings = settings_from(args, os.environ)
    except ConfigError as exc:
        print(f"kiln serve: {exc}", file=sys.stderr)
        return EXIT_BAD_USAGE
    setup_logging(args.log_level)
    workers = 0 if args.no_worker else args.workers
    try:
        anyio.run(serve, settings, workers, not args.no_build, sys.stdout, args.access_log)
    except (ConfigError, SandboxError, ExceptionGroup) as exc:
        failure = start_failure(exc)
        if failure is None:
            raise
        print(f"kiln serve: {failure} [{error_code(failure)}]", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


async def serve(
    settings: ServiceSettings,
    workers: int,
    build_images: bool,
    out: TextIO,
    access_log: bool = False,
) -> None:
    """Run everything until SIGINT/SIGTERM (see the module docstring)."""
    deadline = StopDeadline(settings.stop_limit_seconds)
    if settings.redis_url is not None:
        await serve_with_redis(settings, deadline, workers, build_images, out, access_log)
        return
    async with EmbeddedRedis(settings.data_dir) as embedded, anyio.create_task_group() as tasks:
        deadline.last_resort(embedded.terminate)  # its own session: it would outlive kiln
        tasks.start_soon(embedded.supervise)
        embedded_settings = dataclasses.replace(settings, redis_url=embedded.url)
        await serve_with_redis(embedded_settings, deadline, workers, build_images, out, access_log)
        deadline.stage("stopping the embedded Redis")
        tasks.cancel_scope.cancel()


async def serve_with_redis(
    settings: ServiceSettings,
    deadline: StopDeadline,
    workers: int,
    build_images: bool,
    out: TextIO,
    access_log: bool = False,
) -> None:
    """Serve on an opened stack: HTTP in front, workers behind, until a signal; then park the
    sandboxes (no container or network outlives the service; volumes wait for the next start)."""
    async with open_stack(settings) as stack:
        try:
            async with anyio.create_task_group() as tasks:
                stopping = anyio.Event()
                app = build_app_for(stack, stopping)
                config = server_config(app, settings.host, settings.port, access_log=access_log)
                server = KilnServer(config)
                for worker in stack.workers(workers):
                    tasks.start_soon(worker.run)
                images = ImageCheck()
                if build_images:
                    tasks.start_soon(ensure_images, stack, images)
                else:
                    images.checked.set()
                tasks.start_soon(check_tokenizer_files)
                tasks.start_soon(anyio.to_thread.run_sync, make_private, settings.data_dir)
                tasks.start_soon(stop_on_signal, server, stopping, deadline)
                tasks.start_soon(announce, server, stack, out, images)
                await server.serve()
                deadline.stage("stopping the runs")
                tasks.cancel_scope.cancel()
        finally:
            deadline.stage("parking the sandboxes")
            await park_sandboxes(stack, deadline)
            deadline.stage("closing the sandbox manager and the store")


async def park_sandboxes(stack: ServiceStack, deadline: StopDeadline) -> None:
    """Park the instance's sandboxes (``SandboxManager.park``), bounded so that a stop stays
    quick even with Docker away (and leaves Redis its time within the stop's deadline); a
    failure is logged: the reaper of the next start catches up."""
    limit = min(PARK_LIMIT_SECONDS, deadline.remaining() - REDIS_STOP_RESERVE_SECONDS)
    with anyio.CancelScope(shield=True), anyio.move_on_after(max(limit, 0.0)) as scope:
        try:
            report = await stack.manager.park(shared=stack.deployment is not None)
        except SandboxError as exc:
            log.warning("sandboxes could not be parked at stop: %s", exc)
            return
        log.info(
            "parked %d sandboxes (volumes kept), kept %d in use elsewhere, removed networks %s",
            len(report.parked),
            len(report.kept_in_use),
            report.networks_removed,
        )
    if scope.cancelled_caught:
        log.warning(
            "parking the sandboxes took over %.1f s; the next start's reaper goes on", limit
        )


async def stop_on_signal(server: KilnServer, stopping: anyio.Event, deadline: StopDeadline) -> None:
    """At the first SIGINT/SIGTERM: end the event streams, ask the server to stop and start
    the stop's deadline; a second signal ends the process at once."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for received in signals:
            name = signal.Signals(received).name
            if deadline.started:
                deadline.expire(f"a second {name}")
            log.info("stopping on %s (at most %g s)", name, deadline.limit)
            deadline.begin()
            stopping.set()
            server.should_exit = True


@dataclasses.dataclass
class ImageCheck:
    """The start-up check of the sandbox images: done yet, and how many lines it logged."""

    checked: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    lines: int = 0


async def announce(
    server: KilnServer, stack: ServiceStack, out: TextIO, images: ImageCheck
) -> None:
    """Once the port is open, print where to sign in, boxed; again once the images are checked
    if that logged anything, so the link is the last thing on the terminal."""
    while not server.started:
        await anyio.sleep(0.05)
    settings = stack.settings
    url, created = await anyio.to_thread.run_sync(local_login_url, stack.store, settings)
    if created:
        print("created user 'local'", file=out)
    print(f"kiln is serving on http://{settings.host}:{settings.port}", file=out)
    if not previews_share_its_site(settings.public_host):
        print(
            f"warning: previews at <id>.preview.{settings.public_host} are another site than the "
            f"UI at {settings.public_host}: browsers that block third-party storage refuse the "
            "app's storage in the preview pane; set KILN_PUBLIC_HOST=kiln.localhost (or a name "
            "with a dot)",
            file=out,
        )
    print(boxed(url), file=out, flush=True)
    await images.checked.wait()
    if images.lines:  # a build logged many lines after the box: a fresh link comes last
        url, _ = await anyio.to_thread.run_sync(local_login_url, stack.store, settings)
        print(boxed(url), file=out, flush=True)


async def check_tokenizer_files() -> None:
    """Log an error at start when tiktoken's files are missing: every run would fail."""
    try:
        await anyio.to_thread.run_sync(check_tokenizer)
    except ConfigError as exc:
        log.error("%s; runs will fail until it is fixed (see `kiln doctor`)", exc)


async def ensure_images(stack: ServiceStack, images: ImageCheck) -> None:
    """Build missing or outdated sandbox images (logged); a failure is logged, not fatal."""

    def logged(line: str) -> None:
        images.lines += 1
        log.info("%s", line)

    try:
        settings = await anyio.to_thread.run_sync(ImageBuildSettings.from_env)
        builder = ImageBuilder(stack.manager.client, settings, logged)
        await builder.build()
    except (SandboxError, ValueError, OSError) as exc:
        images.lines += 1
        log.error("sandbox images could not be built: %s; runs will fail until they are", exc)
    finally:
        images.checked.set()
