"""``kiln worker``: standalone workers consuming the run queue of a ``kiln serve`` elsewhere.

    kiln worker [--data-dir DIR] [--workers N]

Workers share the API's Redis and its data directory's SQLite database (so they run on the
same host, or on a shared volume): ``REDIS_URL`` when set, else the embedded Redis a
``kiln serve`` on the same data directory started (its URL is recorded in the data directory).
Each worker runs up to ``KILN_WORKER_CONCURRENCY`` runs at once. SIGINT/SIGTERM stop them; runs
in progress are resumed by another worker after ``KILN_RUN_CLAIM_IDLE`` seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
from pathlib import Path

import anyio

from app.cli.commands import COMMANDS
from app.cli.serve_command import settings_from
from app.config import ServiceSettings
from app.errors import ConfigError, error_code, start_failure
from app.logs import setup_logging
from app.service.embedded_redis import recorded_url
from app.service.stack import open_stack
from sandbox import SandboxError

log = logging.getLogger(__name__)
EXIT_OK, EXIT_FAILED, EXIT_BAD_USAGE = 0, 1, 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``worker`` subcommand."""
    command = subparsers.add_parser("worker", help=COMMANDS["worker"].help, description=__doc__)
    command.add_argument("--data-dir", type=Path, help="the data directory (KILN_DATA_DIR)")
    command.add_argument("--workers", type=int, default=1, metavar="N", help="how many workers")
    command.add_argument("--log-level", default="info", help="debug, info, warning, error")
    command.set_defaults(handler=handle_worker, host=None, port=None)


def worker_settings(args: argparse.Namespace) -> ServiceSettings:
    """The settings, with the Redis URL from the environment or the data directory."""
    settings = settings_from(args, os.environ)
    if settings.redis_url is not None:
        return settings
    url = recorded_url(settings.data_dir)
    if url is None:
        raise ConfigError(
            f"no Redis to share: set REDIS_URL, or start `kiln serve` on {str(settings.data_dir)!r}"
        )
    return dataclasses.replace(settings, redis_url=url)


def handle_worker(args: argparse.Namespace) -> int:
    """Handle ``kiln worker``; returns the exit code."""
    if args.workers < 1:
        print("kiln worker: --workers must be at least 1", file=sys.stderr)
        return EXIT_BAD_USAGE
    try:
        settings = worker_settings(args)
    except ConfigError as exc:
        print(f"kiln worker: {exc}", file=sys.stderr)
        return EXIT_BAD_USAGE
    setup_logging(args.log_level)
    try:
        anyio.run(run_workers, settings, args.workers)
    except (ConfigError, SandboxError, ExceptionGroup) as exc:
        failure = start_failure(exc)
        if failure is None:
            raise
        print(f"kiln worker: {failure} [{error_code(failure)}]", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


async def run_workers(settings: ServiceSettings, count: int) -> None:
    """Run ``count`` workers until SIGINT/SIGTERM."""
    async with open_stack(settings) as stack, anyio.create_task_group() as tasks:
        for worker in stack.workers(count):
            tasks.start_soon(worker.run)
        log.info("%d worker(s) consuming the run queue", count)
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for received in signals:
                log.info("stopping on %s", signal.Signals(received).name)
                break
        tasks.cancel_scope.cancel()
