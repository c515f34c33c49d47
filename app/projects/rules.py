"""Which workspace files belong to a project: a .gitignore-style rule set, kept as data.

A project holds the sources of the app: not installed packages, build output, caches or logs.
:data:`IGNORED` is the rule set (one pattern a line, as in a ``.gitignore``: a trailing ``/``
matches a folder at any depth, anything else a file name or a path); :func:`is_source` applies
it, :func:`safe_path` refuses what could leave the workspace.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

from app.projects.errors import ProjectTooLarge

IGNORED: tuple[str, ...] = (
    "node_modules/",
    "dist/",
    "build/",
    ".next/",
    ".cache/",
    ".vite/",
    ".turbo/",
    ".parcel-cache/",
    "coverage/",
    ".git/",
    ".kiln/",  # kiln's own marker (which version the sandbox holds), never the app's
    "*.log",
    ".DS_Store",
    "*.tsbuildinfo",
    # Vite 5 writes its bundled config beside vite.config.js for the moments it loads it (at
    # every dev-server start: the supervisor starts it over after an install that changed a
    # package); a version recorded then must not take it in.
    "*.timestamp-*.mjs",
    "*.timestamp-*.cjs",
)
IGNORED_DIRS: tuple[str, ...] = tuple(rule[:-1] for rule in IGNORED if rule.endswith("/"))
IGNORED_FILES: tuple[str, ...] = tuple(rule for rule in IGNORED if not rule.endswith("/"))


def safe_path(path: str) -> str | None:
    """``path`` as a clean workspace-relative path (``./`` stripped), or ``None`` if it is
    absolute, empty, climbs out (``..``) or holds a NUL. Any other character is a file name's
    own (quotes, backslashes, tabs, newlines: the store keeps them all)."""
    clean = path[2:] if path.startswith("./") else path
    parts = clean.split("/")
    if not clean or clean.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return None
    return None if "\0" in clean else clean


def unkeepable_name(path: str) -> bool:
    """Whether a workspace path cannot be kept in a version: a name that is not UTF-8 (read
    from a tar as lone surrogates) has no place in the JSON the API and the events speak."""
    try:
        path.encode()
    except UnicodeEncodeError:
        return True
    return False


def shown_name(path: str) -> str:
    """``path`` as text any JSON carries: the bytes of a name that is not UTF-8 as ``\\xNN``."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def is_source(path: str) -> bool:
    """Whether a (clean, relative) workspace path is part of the project under :data:`IGNORED`."""
    parts = path.split("/")
    if any(part in IGNORED_DIRS for part in parts[:-1]):
        return False
    return not any(fnmatch.fnmatchcase(parts[-1], rule) for rule in IGNORED_FILES)


def check_size(files: Mapping[str, bytes], cap: int) -> None:
    """Refuse a version whose files add up to more than ``cap`` bytes, naming the largest."""
    sizes = {path: len(content) for path, content in files.items()}
    if sum(sizes.values()) > cap:
        raise too_large(sizes, cap)


def too_large(sizes: Mapping[str, int], cap: int) -> ProjectTooLarge:
    """The refusal of files (``path -> size``) adding up to more than ``cap`` bytes, naming the
    three largest."""
    largest = sorted(sizes, key=lambda path: sizes[path], reverse=True)[:3]
    named = ", ".join(f"{path!r} ({sizes[path]} bytes)" for path in largest)
    return ProjectTooLarge(
        f"the project's files add up to {sum(sizes.values())} bytes, over the cap of {cap}; "
        f"largest: {named}"
    )
