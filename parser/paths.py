"""File path safety: every path a stream names becomes a normalized, relative POSIX path."""

from __future__ import annotations

import posixpath
import re

from parser.errors import UnsafePathError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"^[A-Za-z]:")
MAX_PATH_LENGTH = 1024


def normalize_file_path(raw: str) -> str:
    """Return ``raw`` as a safe relative POSIX path, or raise :class:`UnsafePathError`.

    Backslashes count as separators (models trained on Windows paths emit them), ``.`` and ``..``
    segments are resolved, and anything that is empty, absolute, a drive path, escapes the root,
    or holds NUL or control characters is refused.
    """
    path = raw.strip()
    if not path:
        raise UnsafePathError(f"empty file path: {raw!r}")
    if _CONTROL.search(path):
        raise UnsafePathError(f"file path holds control characters: {raw!r}")
    if len(path) > MAX_PATH_LENGTH:
        raise UnsafePathError(f"file path longer than {MAX_PATH_LENGTH} characters: {raw[:80]!r}…")
    path = path.replace("\\", "/")
    if path.startswith("/") or _DRIVE.match(path):
        raise UnsafePathError(f"absolute file path: {raw!r}")
    normalized = posixpath.normpath(path)
    if normalized == ".." or normalized.startswith("../"):
        raise UnsafePathError(f"file path escapes the workspace: {raw!r}")
    if normalized == "." or path.endswith("/"):
        raise UnsafePathError(f"file path names a folder, not a file: {raw!r}")
    return normalized
