"""Write the files a parsed stream would create into a local folder, never outside it.

The parser already refuses unsafe paths, but this is the point where a path becomes a real file
on the developer's disk, so every path is checked again here: it is re-normalized with
:func:`parser.paths.normalize_file_path`, its folder must resolve inside the target folder (a
symlink planted inside the folder cannot lead out of it), and the file itself is opened with
``O_NOFOLLOW`` so a symlink in its place is refused rather than followed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.errors import KilnError
from parser.errors import UnsafePathError
from parser.paths import normalize_file_path


class MaterializeError(KilnError, ValueError):
    """The target folder itself cannot be used."""

    code = "materialize_failed"


@dataclass
class MaterializeReport:
    """What was written (path, bytes) and what was refused (path, reason)."""

    written: list[tuple[str, int]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)


def materialize(files: Mapping[str, str], root: Path) -> MaterializeReport:
    """Write ``files`` (path -> content) under ``root``; unsafe or failing paths are refused."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MaterializeError(f"cannot create the folder {str(root)!r}: {exc.strerror}") from exc
    if not root.is_dir():
        raise MaterializeError(f"not a folder: {str(root)!r}")
    real_root = root.resolve()
    report = MaterializeReport()
    for path, content in files.items():
        try:
            relative, size = _write_inside(real_root, path, content)
        except (UnsafePathError, OSError) as exc:
            reason = str(exc) if isinstance(exc, UnsafePathError) else _describe(exc)
            report.refused.append((path, reason))
        else:
            report.written.append((relative, size))
    return report


def _write_inside(real_root: Path, path: str, content: str) -> tuple[str, int]:
    """Write one file below ``real_root``; returns its normalized path and size in bytes."""
    relative = normalize_file_path(path)
    target = real_root / relative
    # resolve() follows every symlink that already exists on the way to the file's folder
    if not target.parent.resolve().is_relative_to(real_root):
        raise UnsafePathError(f"file path leads out of the folder through a symlink: {path!r}")
    target.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    descriptor = os.open(target, flags, 0o644)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    return relative, len(data)


def _describe(exc: OSError) -> str:
    if exc.errno == getattr(os, "ELOOP", None):
        return f"the file is a symlink; not following it: {exc.filename!r}"
    return f"{exc.strerror or exc}: {exc.filename!r}"
