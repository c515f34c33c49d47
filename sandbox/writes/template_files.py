"""What happens when a generated file targets one of the template's own config files.

The template's config (``package.json``, the bundler config, the lock file, ...) is what makes
its dev server run, so a model must not replace it. :func:`decide_write` is the pure decision
the write path calls for every file before it is written:

- an ordinary file is written as is (``WRITE``);
- ``package.json`` is merged (``MERGE``): new ``dependencies`` / ``devDependencies`` whose specs
  validate are added to the template's own file (the template keeps its version of a package it
  already has), everything else the model changed is ignored with a warning. ``added`` lists the
  new specs so the caller can queue their install;
- any other template config file is refused (``REFUSE``) with a warning naming it;
- a package manager's own config file (``.npmrc`` and kin, in any folder) is always refused: it
  could send the sandbox's installs to another registry or turn lifecycle scripts back on.

Warnings are meant to be shown to the user (and fed back to the model), never dropped.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from enum import Enum
from typing import Any

from parser.errors import InvalidPackageError
from parser.packages import validate_package_spec
from sandbox.images.templates import Template

PACKAGE_JSON = "package.json"
# npm reads these from the project and every parent folder; yarn and pnpm have their own.
PACKAGE_MANAGER_CONFIGS = frozenset({".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs"})
DEPENDENCY_SECTIONS = ("dependencies", "devDependencies")


class WriteAction(Enum):
    """What the write path does with a file."""

    WRITE = "write"
    MERGE = "merge"
    REFUSE = "refuse"


@dataclass(frozen=True, slots=True)
class WriteDecision:
    """The decision for one file; ``content`` is what to write, ``None`` for nothing."""

    action: WriteAction
    path: str
    content: str | None
    added: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def is_template_config(template: Template, path: str) -> bool:
    """Whether ``path`` (relative to the workspace) is one of the template's config files, or a
    package manager's config file (held back until decided, like them)."""
    normalized = posixpath.normpath(path)
    return normalized in template.config_files or _configures_installs(normalized)


def _configures_installs(path: str) -> bool:
    return posixpath.basename(path) in PACKAGE_MANAGER_CONFIGS


def decide_write(
    template: Template, path: str, content: str, current_package_json: str | None = None
) -> WriteDecision:
    """Decide how to write ``content`` to ``path`` given the template (see the module doc).

    ``current_package_json`` is the sandbox's package.json now; it is needed for a merge.
    """
    normalized = posixpath.normpath(path)
    if not is_template_config(template, normalized):
        return WriteDecision(WriteAction.WRITE, normalized, content)
    if normalized == PACKAGE_JSON:
        return merge_package_json(template, current_package_json, content)
    if _configures_installs(normalized):
        why = (
            f"{normalized!r} configures the package manager (it could change the registry or"
            " run install scripts); kiln installs through its own settings, so it was not written"
        )
        return WriteDecision(WriteAction.REFUSE, normalized, None, warnings=(why,))
    return WriteDecision(
        WriteAction.REFUSE,
        normalized,
        None,
        warnings=(
            f"{normalized!r} is a config file of the {template.name!r} template; "
            "the template's version was kept and this write was not applied",
        ),
    )


def merge_package_json(template: Template, current: str | None, proposed: str) -> WriteDecision:
    """Merge the dependencies of ``proposed`` into the template's ``current`` package.json."""
    base = _load_object(current)
    if base is None:
        return _refused(f"the sandbox's package.json is missing or unreadable: {current!r:.80}")
    incoming = _load_object(proposed)
    if incoming is None:
        return _refused(f"the written package.json is not a JSON object: {proposed!r:.80}")
    merged = json.loads(json.dumps(base))  # a deep copy of plain JSON
    known = {name for section in DEPENDENCY_SECTIONS for name in base.get(section) or {}}
    added: list[str] = []
    warnings: list[str] = []
    for section in DEPENDENCY_SECTIONS:
        entries = incoming.get(section) or {}
        if not isinstance(entries, dict):
            warnings.append(f"package.json {section!r} is not an object; ignored")
            continue
        for name, version in entries.items():
            spec = _merge_entry(merged, section, name, version, known, warnings)
            if spec is not None:
                added.append(spec)
    ignored = sorted(
        k for k in incoming if k not in DEPENDENCY_SECTIONS and incoming[k] != base.get(k)
    )
    if ignored:
        warnings.append(
            f"package.json fields owned by the {template.name!r} template were not changed: "
            + ", ".join(repr(key) for key in ignored)
        )
    content = json.dumps(merged, indent=2) + "\n" if added else None
    return WriteDecision(WriteAction.MERGE, PACKAGE_JSON, content, tuple(added), tuple(warnings))


def _merge_entry(
    merged: dict[str, Any],
    section: str,
    name: object,
    version: object,
    known: set[str],
    warnings: list[str],
) -> str | None:
    """Add one dependency to ``merged``; the spec when it is new, else ``None``."""
    if not isinstance(name, str) or not isinstance(version, str):
        warnings.append(f"package.json {section} entry {name!r}: {version!r} ignored")
        return None
    spec = f"{name}@{version.strip()}" if version.strip() else name
    try:
        validate_package_spec(spec)
    except InvalidPackageError:
        warnings.append(
            f"package.json {section} entry {spec!r} is not an npm package spec; ignored"
        )
        return None
    if name in known:
        return None  # the template's installed version wins
    target = merged.setdefault(section, {})
    target[name] = version.strip() or "*"
    merged[section] = dict(sorted(target.items()))  # npm keeps dependencies sorted
    known.add(name)
    return spec


def _load_object(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _refused(warning: str) -> WriteDecision:
    return WriteDecision(WriteAction.REFUSE, PACKAGE_JSON, None, warnings=(warning,))
