"""``kiln sandbox``: list, remove, reap sandboxes and run allowed commands in them.

Every subcommand is one entry of :data:`SUBCOMMANDS` (help text, a function adding its
arguments, and an async function running it with an open :class:`SandboxManager`); adding a
subcommand means adding an entry there. The manager is opened from ``KILN_*`` settings and never
runs a warm pool here. Exit codes: 0 ok, 1 the work failed, 2 bad input (a refused command or
package); ``exec`` exits with the command's own code.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import anyio

from app.cli.commands import COMMANDS
from app.cli.local_sandbox import DATA_DIR_HELP, cli_sandbox_settings
from app.cli.sandbox_apply import configure_apply, run_apply
from sandbox import (
    TEMPLATES,
    CommandRefused,
    InstallRefused,
    SandboxError,
    SandboxManager,
    SandboxSettings,
    sweep_instance,
)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
Run = Callable[[SandboxManager, argparse.Namespace], Awaitable[int]]


@dataclass(frozen=True, slots=True)
class Subcommand:
    """One ``kiln sandbox`` subcommand."""

    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Run


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``sandbox`` and its subcommands (one per :data:`SUBCOMMANDS` entry)."""
    command = subparsers.add_parser("sandbox", help=COMMANDS["sandbox"].help)
    actions = command.add_subparsers(dest="sandbox_command", required=True, metavar="ACTION")
    for name, subcommand in SUBCOMMANDS.items():
        parser = actions.add_parser(name, help=subcommand.help, description=subcommand.help)
        subcommand.configure(parser)
        parser.add_argument("--data-dir", type=Path, help=DATA_DIR_HELP)
        parser.set_defaults(handler=functools.partial(handle, subcommand.run))


def handle(run: Run, args: argparse.Namespace) -> int:
    """Open a manager from the environment, run one subcommand, map errors to exit codes."""
    try:
        settings = cli_sandbox_settings(args.data_dir)
    except ValueError as exc:
        print(f"kiln sandbox: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return anyio.run(_with_manager, run, settings, args)
    except (CommandRefused, InstallRefused) as exc:
        print(f"kiln sandbox: refused: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SandboxError as exc:
        print(f"kiln sandbox: {exc}", file=sys.stderr)
        return EXIT_FAILED


async def _with_manager(run: Run, settings: SandboxSettings, args: argparse.Namespace) -> int:
    manager = await SandboxManager.open(settings)
    try:
        return await run(manager, args)
    finally:
        await manager.aclose()


# -- ls ------------------------------------------------------------------------------------


def _configure_ls(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object per sandbox")


async def _run_ls(manager: SandboxManager, args: argparse.Namespace) -> int:
    records = await manager.list()
    if args.json:
        for record in records:
            print(json.dumps(asdict(record), sort_keys=True))
        return EXIT_OK
    now = time.time()
    print(f"{'ID':<14}{'TEMPLATE':<12}{'STATE':<14}{'IDLE':>7}  {'OWNER':<16}{'CHAT':<20}URL")
    for record in records:
        idle = f"{now - record.last_used:.0f}s"
        url = f"http://{record.ip}:{_port(record.template)}" if record.ip else "-"
        url = f"http://{record.preview}" if record.preview else url
        print(
            f"{record.id:<14}{record.template:<12}{record.state:<14}{idle:>7}  "
            f"{record.owner or '-':<16}{record.chat or '-':<20}{url}"
        )
    return EXIT_OK


def _port(template: str) -> str:
    return str(TEMPLATES[template].dev_port) if template in TEMPLATES else "?"


# -- rm ------------------------------------------------------------------------------------


def _configure_rm(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ids", nargs="+", metavar="ID", help="sandbox ids (see `kiln sandbox ls`)")


async def _run_rm(manager: SandboxManager, args: argparse.Namespace) -> int:
    code = EXIT_OK
    for sandbox_id in args.ids:
        known = await manager.registry.get(sandbox_id) is not None
        await manager.destroy(sandbox_id)
        if known:
            print(f"removed {sandbox_id}")
        else:
            print(f"kiln sandbox: no sandbox {sandbox_id!r} recorded", file=sys.stderr)
            code = EXIT_FAILED
    return code


# -- exec ----------------------------------------------------------------------------------


def _configure_exec(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID", help="the sandbox id")
    parser.add_argument(
        "argv", nargs=argparse.REMAINDER, metavar="-- ARGV", help="the command, e.g. -- npm test"
    )


async def _run_exec(manager: SandboxManager, args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("kiln sandbox exec: give the command after --", file=sys.stderr)
        return EXIT_BAD_INPUT

    async def show(line: str) -> None:
        """Print each output line as it arrives."""
        print(line, flush=True)

    result = await manager.run_command(args.id, argv, show)
    if result.oom_killed:
        print(f"kiln sandbox exec: out of memory (killed): {argv!r}", file=sys.stderr)
    elif result.timed_out:
        print(f"kiln sandbox exec: timed out: {argv!r}", file=sys.stderr)
    return result.exit_code if result.exit_code >= 0 else EXIT_FAILED


# -- reap ----------------------------------------------------------------------------------


def _configure_reap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--all",
        action="store_true",
        help="remove every sandbox of this instance (KILN_INSTANCE), in use or not, "
        "and its shared network, npm proxy and its cache",
    )


async def _run_reap(manager: SandboxManager, args: argparse.Namespace) -> int:
    if args.all:
        removed = await sweep_instance(
            manager.client, manager.settings.instance, manager.registry, manager.disk
        )
        for obj in removed:
            print(f"removed {obj.kind} {obj.name}")
        # A cluster's: every service of the instance (none is known now), what the nodes keep
        # of them, then each node's relay, proxy and keeper, and the network.
        for left in await manager.backend.reap_elsewhere(_none_known):
            print(f"removed {left}")
        await manager.backend.release_shared()
        return EXIT_OK
    report = await manager.reap()
    for rule, items in asdict(report).items():
        for item in items:
            print(f"{rule}: {item}")
    print(f"reaped {report.total}")
    return EXIT_OK


async def _none_known() -> set[str]:
    return set()


SUBCOMMANDS: dict[str, Subcommand] = {
    "ls": Subcommand("list the sandboxes of this instance", _configure_ls, _run_ls),
    "rm": Subcommand("destroy sandboxes (container, network, volume)", _configure_rm, _run_rm),
    "exec": Subcommand(
        "run an allowed command in a sandbox; exits with its code", _configure_exec, _run_exec
    ),
    "reap": Subcommand(
        "remove idle and expired sandboxes and orphaned objects", _configure_reap, _run_reap
    ),
    "apply": Subcommand(
        "drive a fresh sandbox with a recorded answer's events", configure_apply, run_apply
    ),
}
