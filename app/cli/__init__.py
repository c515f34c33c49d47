"""The ``kiln`` command line.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module's handler
returns the process exit code (0 ok, 1 the work failed, 2 bad usage or bad input).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from app.cli.commands import COMMANDS
from app.parser_choice import activate_or_exit


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: every subcommand listed, only ``command``'s module imported.

    The other subcommands get a placeholder with their help (see :mod:`app.cli.commands`), so
    ``kiln --help`` imports no command at all.
    """
    parser = argparse.ArgumentParser(prog="kiln", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, spec in COMMANDS.items():
        if name == command:
            importlib.import_module(spec.module).register(subparsers)
        else:
            subparsers.add_parser(name, help=spec.help, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kiln``; returns the exit code (also used by the console script)."""
    # Before any command module imports `parser`: the compiled build when fresh (KILN_PARSER).
    activate_or_exit("kiln")
    args_in = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_in(args_in))
    args = parser.parse_args(args_in)
    code: int = args.handler(args)
    return code


def _command_in(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first argument that is not an option."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return first if first in COMMANDS else None


if __name__ == "__main__":
    sys.exit(main())
