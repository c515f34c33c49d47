"""The ``kiln`` entry point: commands as data, each command's module loaded only when it runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.cli import build_parser
from app.cli.commands import COMMANDS

LOADED_MODULES = """
import sys
from app.cli import build_parser
build_parser({command!r})
heavy = ("docker", "starlette", "anthropic", "openai", "google.genai", "tiktoken", "redis")
print(sorted(m for m in sys.modules if m.startswith("app.cli.") and m != "app.cli.commands"))
print(sorted(h for h in heavy if h in sys.modules))
"""


def loaded_by(command: str | None) -> tuple[str, str]:
    """The command modules and heavy libraries loaded by building the parser for ``command``."""
    code = LOADED_MODULES.format(command=command)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules, heavy = out.stdout.splitlines()
    return modules, heavy


def test_the_top_level_help_loads_no_command_and_no_heavy_library() -> None:
    assert loaded_by(None) == ("[]", "[]")


def test_parse_loads_only_its_own_module_and_no_heavy_library() -> None:
    assert loaded_by("parse") == ("['app.cli.parse_command']", "[]")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_module_registers_its_command(command: str) -> None:
    """The named command gets its module's real parser; the others stay placeholders."""
    parser = build_parser(command)
    subparsers = next(a for a in parser._actions if a.dest == "command")
    choices = subparsers.choices
    assert isinstance(choices, dict)
    assert choices[command].add_help  # a real parser (placeholders have no --help)
    assert not any(sub.add_help for name, sub in choices.items() if name != command)


def test_the_help_lists_every_command_with_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    out = capsys.readouterr().out
    for name, spec in COMMANDS.items():
        assert name in out
        assert spec.help.split()[0] in out
