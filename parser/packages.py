"""Package specs and install blocks.

A spec is an npm package name (optionally ``@scope/``) with an optional ``@`` and a version,
range or dist-tag. Nothing else passes: no URLs, git or file specs, no shell syntax, no leading
dash (that would be read as an option by ``npm install``). The sandbox re-validates with the same
function before anything reaches ``npm``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from parser.errors import InvalidPackageError

_NAME = r"(?:@[a-z0-9~][a-z0-9._~-]*/)?[a-z0-9~][a-z0-9._~-]*"
# A semver range: versions, operators, x-ranges, hyphen ranges and `||`, single spaces between.
_RANGE_ATOM = r"[<>=^~]{0,2}v?[0-9xX*][0-9A-Za-z.+*-]*"
_RANGE = rf"{_RANGE_ATOM}(?:(?: \|\| | - | ){_RANGE_ATOM})*"
_TAG = r"[a-z][a-z0-9._-]*"
_SPEC = re.compile(rf"(?P<name>{_NAME})(?:@(?P<version>{_RANGE}|{_TAG}|\*))?")
MAX_NAME_LENGTH = 214
MAX_SPEC_LENGTH = 256
_FRAMEWORK = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def validate_package_spec(spec: str) -> str:
    """Return ``spec`` stripped if it is a valid npm package spec, else raise."""
    candidate = spec.strip()
    match = _SPEC.fullmatch(candidate) if len(candidate) <= MAX_SPEC_LENGTH else None
    if match is None or len(match["name"]) > MAX_NAME_LENGTH:
        raise InvalidPackageError(f"not an npm package spec: {spec!r}")
    return candidate


@dataclass
class InstallBlock:
    """What an install block asked for, and the parts of it that were refused."""

    framework: str | None = None
    dependencies: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (code, message)


def parse_install_block(body: str) -> InstallBlock:
    """Parse ``framework: X`` and ``packages: a, b`` / ``- a`` lines of an install block.

    Packages are separated by commas or semicolons; every spec is validated and a refused one
    is reported by name, never passed on. Duplicates keep their first position.
    """
    block = InstallBlock()
    in_packages = False
    for raw_line in body.splitlines():
        line = raw_line.strip()
        if not line:
            continue
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if sep and key in ("framework", "template"):
            _set_framework(block, value.strip())
            in_packages = False
        elif sep and key in ("packages", "dependencies", "package"):
            in_packages = True
            _add_specs(block, value)
        elif line.startswith("- ") or (in_packages and line.startswith("* ")):
            _add_specs(block, line[2:])
        else:
            block.rejected.append(
                (
                    "invalid_install_line",
                    f"install line is not 'framework:', 'packages:' or '- pkg': {line!r}",
                )
            )
    return block


def _set_framework(block: InstallBlock, value: str) -> None:
    if _FRAMEWORK.fullmatch(value.lower()):
        block.framework = value.lower()
    else:
        block.rejected.append(("invalid_framework", f"not a framework name: {value!r}"))


def _add_specs(block: InstallBlock, text: str) -> None:
    for item in (part.strip() for part in re.split(r"[,;]", text)):
        if not item:
            continue
        try:
            spec = validate_package_spec(item)
        except InvalidPackageError as exc:
            block.rejected.append(("invalid_package", str(exc)))
            continue
        if spec not in block.dependencies:
            block.dependencies.append(spec)
