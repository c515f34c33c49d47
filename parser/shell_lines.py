"""Turning a body of shell lines (bolt's ``<boltAction type="shell">``) into events.

kiln never runs a shell line. Each line is split on ``&&`` into argv lists; ``npm install PKG...``
becomes an install block whose specs are validated like any other, every other argv a
``command`` event that the sandbox's policy judges. Anything that needs a shell to mean what it
says (pipes, redirections, substitutions, ``;``, ``||``, globs, variables) is refused.
"""

from __future__ import annotations

import re
import shlex

from parser.errors import InvalidPackageError
from parser.events import Command, Error, Event, InstallContent, InstallEnd, InstallStart
from parser.packages import validate_package_spec

_SHELL_SYNTAX = re.compile(r"[|;<>`$(){}*?\\]|&(?!&)|(?<!&)&")
_NPM_INSTALL = frozenset({"install", "i", "add"})


def shell_events(body: str) -> list[Event]:
    """The install and command events a shell body asks for, with errors for refused lines."""
    events: list[Event] = []
    for line in body.splitlines():
        for part in line.split("&&"):
            part = part.strip()
            if part:
                events.extend(_part_events(part))
    return events


def _part_events(part: str) -> list[Event]:
    if _SHELL_SYNTAX.search(part):
        return [
            Error("unsupported_shell", f"shell syntax is not run, only plain commands: {part!r}")
        ]
    try:
        argv = shlex.split(part)
    except ValueError as exc:
        return [Error("unsupported_shell", f"cannot split shell line {part!r}: {exc}")]
    if len(argv) > 2 and argv[0] == "npm" and argv[1] in _NPM_INSTALL:
        return _install_events(argv[2:])
    return [Command(argv[0], argv[1:])]


def _install_events(words: list[str]) -> list[Event]:
    specs: list[str] = []
    errors: list[Event] = []
    for word in words:
        if word.startswith("-"):
            continue  # --save-dev and friends: kiln installs every package the same way
        try:
            specs.append(validate_package_spec(word))
        except InvalidPackageError as exc:
            errors.append(Error("invalid_package", str(exc)))
    return [*errors, InstallStart(), InstallContent(specs, None), InstallEnd()]
