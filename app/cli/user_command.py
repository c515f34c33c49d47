"""``kiln user create NAME [--json]``: add a user and print their API token, once.

``kiln user token NAME`` issues another API token for an existing user (the old ones stay
valid). Tokens are stored hashed: a lost token cannot be shown again, only replaced. The user
lives in the data directory's database (``KILN_DATA_DIR`` or ``--data-dir``), the one
``kiln serve`` uses; the token goes in ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from app.cli.commands import COMMANDS
from app.config import ServiceSettings
from app.errors import ConfigError
from app.store import Store, StoreConflict, StoreError

EXIT_OK, EXIT_FAILED, EXIT_BAD_USAGE = 0, 1, 2
USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``user create`` and ``user token``."""
    command = subparsers.add_parser("user", help=COMMANDS["user"].help, description=__doc__)
    actions = command.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, handler, text in (
        ("create", handle_create, "create a user and print an API token"),
        ("token", handle_token, "print a new API token for an existing user"),
    ):
        action = actions.add_parser(name, help=text, description=text)
        action.add_argument("name", help="the user's name (letters, digits, . _ @ -)")
        action.add_argument("--data-dir", type=Path, help="the data directory (KILN_DATA_DIR)")
        action.add_argument("--json", action="store_true", help="print {user, token} as JSON")
        action.set_defaults(handler=handler)


def service_settings(data_dir: Path | None) -> ServiceSettings:
    """The service's settings, with ``data_dir`` (a command's ``--data-dir``) for
    ``KILN_DATA_DIR`` when given."""
    env = dict(os.environ)
    if data_dir is not None:
        env["KILN_DATA_DIR"] = str(data_dir)
    return ServiceSettings.from_env(env)


def open_store(data_dir: Path | None) -> Store:
    """The store of ``data_dir`` (or ``KILN_DATA_DIR``)."""
    settings = service_settings(data_dir)
    return Store(settings.database_location, settings.secret_key, pool_size=settings.database_pool)


def handle_create(args: argparse.Namespace) -> int:
    """Create the user and print a token."""
    return _with_token(args, create=True)


def handle_token(args: argparse.Namespace) -> int:
    """Print a new token for an existing user."""
    return _with_token(args, create=False)


def _with_token(args: argparse.Namespace, *, create: bool) -> int:
    command = f"kiln user {'create' if create else 'token'}"
    if not USER_NAME.fullmatch(args.name):
        print(f"{command}: not a valid user name: {args.name!r}", file=sys.stderr)
        return EXIT_BAD_USAGE
    try:
        store = open_store(args.data_dir)
    except (ConfigError, StoreError) as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    try:
        user = store.create_user(args.name) if create else store.user_by_name(args.name)
        if user is None:
            print(f"{command}: no user named {args.name!r}", file=sys.stderr)
            return EXIT_FAILED
        token = store.create_token(user.id, "api")
    except StoreConflict as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        store.close()
    if args.json:
        print(json.dumps({"user": user.to_dict(), "token": token}))
    else:
        print(f"user {user.name!r} ({user.id})")
        print(f"API token (shown once): {token}")
    return EXIT_OK
