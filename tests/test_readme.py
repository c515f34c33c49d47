"""The README's commands run as written from the checkout: every command line of its ``sh``
blocks that runs kiln names ``.venv/bin/kiln`` (set-up puts no ``kiln`` on PATH), and every
kiln subcommand it names exists."""

from __future__ import annotations

import re
from pathlib import Path

from app.cli.commands import COMMANDS

README = Path(__file__).resolve().parents[1] / "README.md"
SH_BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)


def command_lines() -> list[str]:
    """The first line of each command in the README's ``sh`` blocks (not continuations)."""
    lines = []
    for block in SH_BLOCK.findall(README.read_text()):
        lines += [line for line in block.splitlines() if line and not line.startswith(" ")]
    return lines


def test_every_command_runs_from_the_checkout() -> None:
    lines = command_lines()
    assert lines, "the README has no sh block"
    assert [line for line in lines if line.split()[0] == "kiln"] == []


def test_every_kiln_subcommand_exists() -> None:
    named = [line.split()[1] for line in command_lines() if line.startswith(".venv/bin/kiln ")]
    assert named
    assert [name for name in named if name not in COMMANDS] == []
