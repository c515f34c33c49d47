"""``kiln project log|diff|restore|export|push|import``: a chat's project, from the terminal.

Works on the data directory (``KILN_DATA_DIR`` or ``--data-dir``), as ``kiln user`` does:

- ``log CHAT [--json]``: every version, oldest first (number, time, run, turn, summary);
- ``diff CHAT VERSION``: the version's unified diff against its parent;
- ``restore CHAT VERSION``: the version becomes the newest, recorded as a new version (history
  only grows); the chat's sandbox gets it at its next run (a sandbox that does not hold the
  latest version is restored when a run acquires it);
- ``export CHAT [VERSION] [-o FILE]``: a zip of the version (default ``latest``);
- ``push CHAT`` and ``import URL``: over git (:mod:`app.cli.project_git`).
- ``publish CHAT [VERSION]`` / ``unpublish CHAT``: the chat's public link
  (:mod:`app.cli.project_publish`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from app.cli import project_git
from app.cli.commands import COMMANDS
from app.cli.project_publish import add_actions
from app.cli.user_command import service_settings
from app.errors import ConfigError
from app.projects.errors import ProjectError
from app.projects.store import LATEST, ProjectStore, Version
from app.projects.sync import restore_version
from app.service.workspaces import project_store

EXIT_OK, EXIT_FAILED, EXIT_BAD_USAGE = 0, 1, 2
Action = Callable[[ProjectStore, argparse.Namespace], int]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``project log|diff|restore|export|publish|unpublish``."""
    command = subparsers.add_parser("project", help=COMMANDS["project"].help, description=__doc__)
    actions = command.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, handler, text, version in (
        ("log", show_log, "list the versions of a chat's project", None),
        ("diff", show_diff, "show what a version changed", "the version (a number or latest)"),
        ("restore", restore, "make a version the newest (as a new version)", "the version"),
        ("export", export, "write a version as a zip", "the version (default: latest)"),
    ):
        action = actions.add_parser(name, help=text, description=text)
        action.add_argument("chat", help="the chat's id")
        if version is not None:
            action.add_argument("version", nargs="?" if name == "export" else None, help=version)
        action.add_argument("--data-dir", type=Path, help="the data directory (KILN_DATA_DIR)")
        if name == "log":
            action.add_argument("--json", action="store_true", help="print the versions as JSON")
        if name == "export":
            action.add_argument("-o", "--output", type=Path, help="the zip (default CHAT-vN.zip)")
        action.set_defaults(handler=_handler(name, handler))
    project_git.register(actions)
    add_actions(actions)


def _handler(name: str, action: Action) -> Callable[[argparse.Namespace], int]:
    """Open the project store, run ``action``, turn failures into words and an exit code."""

    def handle(args: argparse.Namespace) -> int:
        try:
            return action(open_projects(args.data_dir), args)
        except (ConfigError, ProjectError) as exc:
            print(f"kiln project {name}: {exc}", file=sys.stderr)
            return EXIT_FAILED

    return handle


def open_projects(data_dir: Path | None) -> ProjectStore:
    """The project store of ``data_dir`` (or ``KILN_DATA_DIR``)."""
    return project_store(service_settings(data_dir))


def show_log(projects: ProjectStore, args: argparse.Namespace) -> int:
    """Print the versions, oldest first."""
    versions = projects.versions(args.chat)
    if args.json:
        print(json.dumps([version.to_dict() for version in versions], indent=2))
    elif not versions:
        print(f"the chat {args.chat!r} has no versions yet")
    for version in versions if not args.json else []:
        print(log_line(version))
    return EXIT_OK


def log_line(version: Version) -> str:
    """``3  2026-11-24 06:40:00  run abc turn 2  1 added, 0 changed, 0 removed``."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(version.created))
    who = f"run {version.info.run} turn {version.info.turn}" if version.info.run else "-"
    note = f" ({version.info.note})" if version.info.note else ""
    return f"{version.number:>3}  {when}  {who}{note}  {version.summary}"


def show_diff(projects: ProjectStore, args: argparse.Namespace) -> int:
    """Print the version's diff."""
    for diff in projects.diff(args.chat, args.version):
        sys.stdout.write(diff.diff)
    return EXIT_OK


def restore(projects: ProjectStore, args: argparse.Namespace) -> int:
    """Record the version's files as the newest version."""
    source, version = restore_version(projects, args.chat, args.version)
    print(f"version {source.number} restored as version {version.number}")
    return EXIT_OK


def export(projects: ProjectStore, args: argparse.Namespace) -> int:
    """Write the version as a zip."""
    version = projects.version(args.chat, args.version or LATEST)
    output: Path = args.output or Path(f"{args.chat}-v{version.number}.zip")
    data = projects.archive(args.chat, version.number)
    partial = output.with_name(output.name + ".partial")
    try:
        partial.write_bytes(data)
        partial.replace(output)  # never a half-written zip under the final name
    except OSError as exc:
        print(f"kiln project export: cannot write {str(output)!r}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"version {version.number} written to {output}")
    return EXIT_OK
