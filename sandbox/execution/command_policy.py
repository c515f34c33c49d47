"""Which commands a sandbox runs: an allow-list as data, checked by one pure function.

:data:`POLICY` has one entry per program. An entry is either an :class:`ArgRule` (how the
program's arguments are checked) or a table of subcommands to rules (``npm``). :func:`check`
refuses, with :class:`~sandbox.errors.CommandRefused` and a reason naming the value, anything
that is not in the table: shells, ``npx``, ``npm exec``, programs named by path, unknown
options (single-dash clusters are checked letter by letter), and path arguments that leave
``/workspace`` after normalization. Nothing here runs anything; :mod:`sandbox.execution.commands`
does.

Arguments a program passes on to user code (the script arguments of ``node``, anything after
``npm run <script>``) are not interpreted, but if they look like paths (``/``, ``.``, ``~``, or an
``--opt=<path>`` value) they too must stay inside the workspace.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from parser.errors import InvalidPackageError
from parser.packages import validate_package_spec
from sandbox.errors import CommandRefused
from sandbox.images.templates import WORKSPACE
from sandbox.writes.template_files import PACKAGE_MANAGER_CONFIGS

MAX_ARGS = 256
MAX_ARG_LENGTH = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SCRIPT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9:._-]{0,127}")


class CommandKind(Enum):
    """How a checked command is executed."""

    RUN = "run"  # docker exec on the internal network, after the install queue is idle
    INSTALL = "install"  # through the install queue and kiln's npm proxy


class Operand(Enum):
    """What a rule's non-option arguments are."""

    NONE = "none"
    PATH = "path"  # a path inside the workspace
    PACKAGE = "package"  # an npm package spec
    SCRIPT = "script"  # a package.json script name, then pass-through arguments
    NODE_SCRIPT = "node-script"  # a workspace file, then pass-through arguments
    PASSTHROUGH = "passthrough"  # every argument is passed on to user code


@dataclass(frozen=True, slots=True)
class ArgRule:
    """How the arguments after a program (and its subcommand) are checked."""

    operand: Operand
    long_flags: frozenset[str] = frozenset()
    short_flags: str = ""  # letters allowed in ``-x`` options, alone or clustered
    min_operands: int = 0
    max_operands: int | None = None
    root_allowed: bool = True  # may a path operand be ``/workspace`` itself
    kind: CommandKind = CommandKind.RUN


Rule = ArgRule | Mapping[str, ArgRule]


@dataclass(frozen=True, slots=True)
class CheckedCommand:
    """A command the policy allows, with what the executor needs to know."""

    argv: tuple[str, ...]
    kind: CommandKind
    packages: tuple[str, ...] = ()


_NPM_INSTALL = ArgRule(
    Operand.PACKAGE,
    long_flags=frozenset(
        {"--save", "--save-dev", "--save-exact", "--save-optional", "--no-save", "--no-audit"}
        | {"--no-fund", "--legacy-peer-deps", "--prefer-offline", "--ignore-scripts"}
    ),
    short_flags="SDEO",
    kind=CommandKind.INSTALL,
)
_NPM_SCRIPT_FLAGS = frozenset({"--silent", "--if-present"})

POLICY: Mapping[str, Rule] = {
    "npm": {
        "install": _NPM_INSTALL,
        "i": _NPM_INSTALL,
        "ci": ArgRule(
            Operand.NONE,
            long_flags=frozenset({"--no-audit", "--no-fund", "--legacy-peer-deps"})
            | frozenset({"--prefer-offline", "--ignore-scripts"}),
            kind=CommandKind.INSTALL,
        ),
        "run": ArgRule(Operand.SCRIPT, long_flags=_NPM_SCRIPT_FLAGS, min_operands=1),
        "test": ArgRule(Operand.PASSTHROUGH),
    },
    "node": ArgRule(Operand.NODE_SCRIPT, min_operands=1, root_allowed=False),
    "ls": ArgRule(Operand.PATH, short_flags="laAR1hFtrS"),
    "cat": ArgRule(Operand.PATH, short_flags="n", min_operands=1),
    "mkdir": ArgRule(
        Operand.PATH,
        long_flags=frozenset({"--parents"}),
        short_flags="pv",
        min_operands=1,
        root_allowed=False,
    ),
    "rm": ArgRule(
        Operand.PATH,
        long_flags=frozenset({"--recursive", "--force"}),
        short_flags="rRfv",
        min_operands=1,
        root_allowed=False,
    ),
    "mv": ArgRule(Operand.PATH, short_flags="fnv", min_operands=2, root_allowed=False),
    "cp": ArgRule(Operand.PATH, short_flags="rRfnv", min_operands=2, root_allowed=False),
}

_SHELL = "a shell runs arbitrary code; send argv, e.g. command='npm' args=['run', 'build']"
DENIED: Mapping[str, str] = {
    **dict.fromkeys(("sh", "bash", "dash", "zsh", "ash", "ksh", "fish", "csh", "tcsh"), _SHELL),
    "busybox": _SHELL,
    "npx": "npx downloads and runs any package; add it with an install and use 'npm run'",
    "env": "env runs any program",
    "xargs": "xargs runs any program",
    "sudo": "the sandbox has no privileges to gain",
    "su": "the sandbox has no privileges to gain",
}
_NPM_DENIED: Mapping[str, str] = {
    "exec": "npm exec downloads and runs any package",
    "x": "npm exec downloads and runs any package",
    "explore": "npm explore runs a shell",
}


def check(argv: Sequence[str]) -> CheckedCommand:
    """The command ``argv`` if the policy allows it; otherwise raise ``CommandRefused``."""
    args = tuple(argv)
    _check_shape(args)
    program, rest = args[0], args[1:]
    rule = _rule_for(program)
    subcommand: str | None = None
    if not isinstance(rule, ArgRule):
        subcommand, rule = _subcommand_rule(program, rule, rest)
        rest = rest[1:]
    name = program if subcommand is None else f"{program} {subcommand}"
    packages = _check_args(name, rule, rest)
    return CheckedCommand(argv=args, kind=rule.kind, packages=packages)


def resolve_in_workspace(arg: str, *, root_allowed: bool = True) -> str:
    """The absolute path ``arg`` names inside the workspace; refuse anything outside it."""
    if not arg:
        raise CommandRefused("empty path argument")
    if arg.startswith("~"):
        raise CommandRefused(f"home-relative path {arg!r}: paths are relative to {WORKSPACE}")
    resolved = posixpath.normpath(posixpath.join(WORKSPACE, arg))
    if resolved != WORKSPACE and not resolved.startswith(WORKSPACE + "/"):
        raise CommandRefused(f"path {arg!r} is outside {WORKSPACE}")
    if resolved == WORKSPACE and not root_allowed:
        raise CommandRefused(f"path {arg!r} is the workspace itself")
    if posixpath.basename(resolved) in PACKAGE_MANAGER_CONFIGS:
        raise CommandRefused(f"path {arg!r} is a package manager's config file, which kiln owns")
    return resolved


def _check_shape(args: tuple[str, ...]) -> None:
    if not args:
        raise CommandRefused("empty command")
    if len(args) > MAX_ARGS:
        raise CommandRefused(f"{len(args)} arguments; at most {MAX_ARGS} are allowed")
    for arg in args:
        if _CONTROL.search(arg):
            raise CommandRefused(f"argument holds control characters: {arg!r}")
        if len(arg) > MAX_ARG_LENGTH:
            raise CommandRefused(f"argument longer than {MAX_ARG_LENGTH} characters: {arg[:60]!r}")


def _rule_for(program: str) -> Rule:
    base = posixpath.basename(program)
    if base in DENIED:
        raise CommandRefused(f"{program!r} is refused: {DENIED[base]}")
    if "/" in program:
        raise CommandRefused(f"program {program!r} must be a bare name, one of {_allowed()}")
    if program not in POLICY:
        raise CommandRefused(f"program {program!r} is not allowed; allowed: {_allowed()}")
    return POLICY[program]


def _subcommand_rule(
    program: str, table: Mapping[str, ArgRule], rest: tuple[str, ...]
) -> tuple[str, ArgRule]:
    allowed = ", ".join(table)
    if not rest:
        raise CommandRefused(f"{program!r} needs a subcommand: {allowed}")
    subcommand = rest[0]
    if program == "npm" and subcommand in _NPM_DENIED:
        raise CommandRefused(f"'npm {subcommand}' is refused: {_NPM_DENIED[subcommand]}")
    if subcommand not in table:
        raise CommandRefused(f"'{program} {subcommand}' is not allowed; allowed: {allowed}")
    return subcommand, table[subcommand]


def _check_args(name: str, rule: ArgRule, rest: tuple[str, ...]) -> tuple[str, ...]:
    operands: list[str] = []
    passthrough: list[str] = []
    options_done = False
    for index, arg in enumerate(rest):
        if _takes_passthrough(rule, operands):
            passthrough = list(rest[index:])
            break
        if arg == "--" and not options_done:
            options_done = True
        elif arg.startswith("-") and arg != "-" and not options_done:
            _check_flag(name, rule, arg)
        else:
            operands.append(arg)
    _check_count(name, rule, operands)
    packages = tuple(_check_operand(name, rule, operand) for operand in operands)
    for arg in passthrough:
        _check_passthrough(arg)
    return packages if rule.operand is Operand.PACKAGE else ()


def _takes_passthrough(rule: ArgRule, operands: list[str]) -> bool:
    # Once the script is named, the rest belongs to it (node's flags after it are its argv).
    if rule.operand is Operand.PASSTHROUGH:
        return True
    return rule.operand in (Operand.SCRIPT, Operand.NODE_SCRIPT) and len(operands) == 1


def _check_flag(name: str, rule: ArgRule, flag: str) -> None:
    if flag.startswith("--"):
        if flag in rule.long_flags:
            return
    elif all(letter in rule.short_flags for letter in flag[1:]):
        return
    allowed = sorted(rule.long_flags) + [f"-{letter}" for letter in rule.short_flags]
    hint = ", ".join(allowed) if allowed else "none"
    raise CommandRefused(f"option {flag!r} is not allowed for {name!r} (allowed: {hint})")


def _check_count(name: str, rule: ArgRule, operands: list[str]) -> None:
    if rule.operand is Operand.NONE and operands:
        raise CommandRefused(f"{name!r} takes no arguments, got {operands[0]!r}")
    if len(operands) < rule.min_operands:
        raise CommandRefused(f"{name!r} needs at least {rule.min_operands} argument(s)")
    if rule.max_operands is not None and len(operands) > rule.max_operands:
        raise CommandRefused(f"{name!r} takes at most {rule.max_operands} argument(s)")


def _check_operand(name: str, rule: ArgRule, operand: str) -> str:
    if rule.operand in (Operand.PATH, Operand.NODE_SCRIPT):
        resolve_in_workspace(operand, root_allowed=rule.root_allowed)
    elif rule.operand is Operand.PACKAGE:
        try:
            return validate_package_spec(operand)
        except InvalidPackageError:
            raise CommandRefused(f"{name!r}: not an npm package spec: {operand!r}") from None
    elif rule.operand is Operand.SCRIPT and not _SCRIPT_NAME.fullmatch(operand):
        raise CommandRefused(f"{name!r}: not a package.json script name: {operand!r}")
    return operand


def _check_passthrough(arg: str) -> None:
    value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
    if value.startswith(("/", ".", "~")) or "/" in value:
        resolve_in_workspace(value)


def _allowed() -> str:
    return ", ".join(POLICY)
