"""``kiln login-url``: print a fresh one-time sign-in link for ``kiln serve``'s ``local`` user.

The link is a new login token in the data directory's database (``KILN_DATA_DIR`` or
``--data-dir``), the one a running ``kiln serve`` reads, so no restart is needed; it works once,
for a day. It names ``KILN_PUBLIC_HOST`` and the port (``KILN_PORT`` or ``--port``): give the
same ones ``kiln serve`` was started with.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from app.cli.commands import COMMANDS
from app.cli.local_user import boxed, local_login_url
from app.config import ServiceSettings
from app.errors import ConfigError
from app.store import Store, StoreError

EXIT_OK, EXIT_FAILED, EXIT_BAD_USAGE = 0, 1, 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``login-url`` subcommand."""
    command = subparsers.add_parser(
        "login-url", help=COMMANDS["login-url"].help, description=__doc__
    )
    command.add_argument("--data-dir", type=Path, help="the data directory (KILN_DATA_DIR)")
    command.add_argument("--port", type=int, help="kiln serve's port (KILN_PORT, 8000)")
    command.add_argument("--plain", action="store_true", help="print the link alone, no box")
    command.set_defaults(handler=handle_login_url)


def handle_login_url(args: argparse.Namespace) -> int:
    """Print the link; returns the exit code."""
    env = dict(os.environ)
    if args.data_dir is not None:
        env["KILN_DATA_DIR"] = str(args.data_dir)
    if args.port is not None:
        env["KILN_PORT"] = str(args.port)
    try:
        settings = ServiceSettings.from_env(env)
    except ConfigError as exc:
        print(f"kiln login-url: {exc}", file=sys.stderr)
        return EXIT_BAD_USAGE
    try:
        store = Store(
            settings.database_location, settings.secret_key, pool_size=settings.database_pool
        )
        try:
            url, _ = local_login_url(store, settings)
        finally:
            store.close()
    except StoreError as exc:
        print(f"kiln login-url: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(url if args.plain else boxed(url))
    return EXIT_OK
