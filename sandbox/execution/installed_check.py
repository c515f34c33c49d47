"""Whether an install would change nothing: every package it names is already installed.

A follow-up answer often names the packages an earlier turn installed (a replayed demo names
the same ones every time); ``npm install`` then spends 15-25 s changing nothing. Before an
install of named packages the install queue runs :data:`LS_ARGV` (``npm ls``: local, no
registry) and skips npm when :func:`installed_versions` finds, in its JSON, that
``node_modules`` satisfies ``package.json`` (npm ls exits non-zero on a missing or invalid
dependency, so a ``package.json`` the answer wrote with new or other versions still installs)
and :func:`already_installed` finds every spec a direct dependency at a version it allows.
A spec with a version is taken as satisfied only by exactly that version (no semver here:
an install too many costs seconds, one too few breaks the app).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from sandbox.execution.exec_stream import ExecResult

LS_ARGV = ("npm", "ls", "--depth=0", "--json", "--offline", "--no-audit", "--no-fund")
LS_TIMEOUT_SECONDS = 60.0


def split_spec(spec: str) -> tuple[str, str]:
    """A validated spec's name and version part: ``zod@^3`` -> ``("zod", "^3")``."""
    name, at, version = spec[1:].partition("@")
    return (spec[0] + name, version) if at else (spec, "")


def installed_versions(result: ExecResult) -> Mapping[str, str] | None:
    """The direct dependencies' installed versions from ``npm ls --json``, or ``None`` when
    the tree does not match ``package.json`` (or npm's answer cannot be read)."""
    if not result.ok or result.truncated:
        return None
    text = result.output  # stdout and stderr together: the JSON is the outermost braces
    try:
        tree = json.loads(text[text.find("{") : text.rfind("}") + 1])
    except ValueError:
        return None
    dependencies = tree.get("dependencies") if isinstance(tree, dict) else None
    if not isinstance(dependencies, dict):
        return {}
    return {
        name: info["version"]
        for name, info in dependencies.items()
        if isinstance(info, dict) and isinstance(info.get("version"), str)
    }


def already_installed(specs: Sequence[str], versions: Mapping[str, str]) -> tuple[str, ...]:
    """``name@version`` of each spec if all are installed at a version they allow, else ``()``."""
    found: list[str] = []
    for spec in specs:
        name, wanted = split_spec(spec)
        version = versions.get(name)
        if version is None or (wanted not in ("", version)):
            return ()
        found.append(f"{name}@{version}")
    return tuple(found)
