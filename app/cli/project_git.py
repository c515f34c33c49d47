"""``kiln project push CHAT`` and ``kiln project import URL``: a project over git, from the
terminal, on the data directory (as ``kiln project log`` is).

- ``push CHAT [--url URL] [--branch B] [--token-env VAR]``: push every version (one commit
  each) to the chat's remote as a fast-forward, never forced. ``--url`` sets the remote first
  (as ``PUT /api/chats/{id}/remote`` does); the token is read from the environment variable
  named by ``--token-env``, never from the command line (where ``ps`` shows it), and stored
  encrypted with the remote. The result is kept as the remote's last push (the UI shows it).
- ``import URL --user NAME [--branch B] [--title T] [--token-env VAR]``: a new chat of that user
  whose version 1 is the repository's files (:mod:`app.projects.importing`); its sandbox gets
  them when the chat's first run acquires one (the API's import starts the preview at once).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from app.cli.user_command import service_settings
from app.config import ServiceSettings
from app.errors import ConfigError
from app.projects.errors import ProjectError
from app.projects.git_remote import (
    DEFAULT_BRANCH,
    Remote,
    RemoteLimits,
    check_branch,
    check_url,
    push,
    repository_title,
)
from app.projects.importing import import_project
from app.service.workspaces import project_store
from app.store import Store, StoreError
from sandbox import ImageBuildSettings

EXIT_OK, EXIT_FAILED = 0, 1


def register(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``project push`` and ``project import``."""
    pushing = actions.add_parser("push", help="push a chat's versions to its git remote")
    pushing.add_argument("chat", help="the chat's id")
    pushing.add_argument("--url", help="set the chat's remote to this git URL first")
    imports = actions.add_parser("import", help="make a new chat from a git repository")
    imports.add_argument("url", help="the repository's git URL (https://, ssh://, git@host:path)")
    imports.add_argument("--user", required=True, help="the user who gets the chat")
    imports.add_argument("--title", help="the chat's title (default: the repository's name)")
    for action in (pushing, imports):
        action.add_argument("--branch", help="the branch (push: default main; import: default)")
        action.add_argument("--token-env", metavar="VAR", help="read the token from $VAR")
        action.add_argument("--data-dir", type=Path, help="the data directory (KILN_DATA_DIR)")
    pushing.set_defaults(handler=_guarded("push", push_chat))
    imports.set_defaults(handler=_guarded("import", import_chat))


def _guarded(
    name: str, action: Callable[[ServiceSettings, argparse.Namespace], int]
) -> Callable[[argparse.Namespace], int]:
    """``action`` with its failures as words on stderr and exit code 1."""

    def handle(args: argparse.Namespace) -> int:
        try:
            settings = service_settings(args.data_dir)
            return action(settings, args)
        except (ConfigError, ProjectError, StoreError) as exc:
            print(f"kiln project {name}: {exc}", file=sys.stderr)
            return EXIT_FAILED

    return handle


def token_from(args: argparse.Namespace) -> str | None:
    """The token in ``$VAR`` of ``--token-env VAR`` (``None`` without the option)."""
    if args.token_env is None:
        return None
    token = os.environ.get(args.token_env, "").strip()
    if not token:
        raise ConfigError(f"--token-env names {args.token_env!r}, which is unset or empty")
    return token


def push_chat(settings: ServiceSettings, args: argparse.Namespace) -> int:
    """Push the chat's versions to its remote (set from ``--url`` first when given)."""
    store = Store(settings.database_location, settings.secret_key, pool_size=settings.database_pool)
    if store.get_chat(args.chat) is None:
        raise ConfigError(f"no chat {args.chat!r}")
    if args.url is not None:
        branch = check_branch(args.branch or DEFAULT_BRANCH)
        store.set_chat_remote(args.chat, check_url(args.url), branch, token_from(args))
    stored = store.chat_remote(args.chat)
    if stored is None:
        raise ConfigError(f"chat {args.chat!r} has no remote: give --url")
    projects = project_store(settings)
    version = projects.version(args.chat, "latest")
    limits = RemoteLimits.from_env(settings.project_max_bytes)
    remote = Remote(stored.url, stored.branch, stored.token)
    try:
        done = push(projects.repository(args.chat), remote, limits)
    except ProjectError as exc:
        store.record_push(args.chat, {"ok": False, "code": exc.code, "message": str(exc)})
        raise
    result = {"ok": True, "outcome": done.outcome, "version": version.number}
    store.record_push(args.chat, {**result, "commit": done.commit, "at": done.at})
    said = "already there" if done.outcome == "up_to_date" else "pushed"
    print(f"version {version.number} {said}: {stored.url} ({stored.branch}) at {done.commit}")
    return EXIT_OK


def import_chat(settings: ServiceSettings, args: argparse.Namespace) -> int:
    """Make a new chat of ``--user`` from the repository."""
    store = Store(settings.database_location, settings.secret_key, pool_size=settings.database_pool)
    user = store.user_by_name(args.user)
    if user is None:
        raise ConfigError(f"no user named {args.user!r}")
    remote = Remote(check_url(args.url), check_branch(args.branch) if args.branch else "")
    remote = Remote(remote.url, remote.branch, token_from(args) or "")
    chat = store.create_chat(user.id, (args.title or repository_title(remote.url)).strip())
    projects = project_store(settings)
    limits = RemoteLimits.from_env(settings.project_max_bytes)
    try:
        result = import_project(
            projects, chat.id, remote, limits, ImageBuildSettings.images_folder()
        )
    except ProjectError:
        store.delete_chat(chat.id)
        projects.delete(chat.id)
        raise
    print(
        f"chat {chat.id} ({chat.title!r}): version 1 from {remote.url}, template {result.template}"
    )
    for path, why in result.left_out.items():
        print(f"  left out {path!r}: {why}")
    return EXIT_OK
