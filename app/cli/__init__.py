"""The ``kiln`` command line.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module's handler
returns the process exit code (0 ok, 1 the work failed, 2 bad usage or bad input).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMAND_MODULES = (
    "app.cli.parse_command",
    "app.cli.images_command",
    "app.cli.sandbox_command",
    "app.cli.run_command",
    "app.cli.serve_command",
    "app.cli.worker_command",
    "app.cli.user_command",
    "app.cli.project_command",
    "app.cli.doctor_command",
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every available subcommand registered."""
    parser = argparse.ArgumentParser(prog="kiln", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # a subcommand whose module has not landed yet
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kiln``; returns the exit code (also used by the console script)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
