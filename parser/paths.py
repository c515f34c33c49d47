"""File path safety: every path a stream names becomes a normalized, relative POSIX path.

This is kiln's one rule for file paths (the API and ``kiln parse --materialize`` use it too).
Limits follow Linux: a path component (a file or folder name) holds at most
:data:`MAX_COMPONENT_BYTES` bytes of UTF-8 and a whole path at most :data:`MAX_PATH_BYTES`.
A path a model *writes* (a file or an edit, not a read) must also stay out of the folders of
:data:`PROTECTED_FOLDERS` (:func:`check_writable`): installed packages and kiln's own marker.
"""

from __future__ import annotations

import posixpath
import re

from parser.errors import ProtectedPathError, UnsafePathError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_DRIVE = re.compile(r"^[A-Za-z]:")
MAX_COMPONENT_BYTES = 255  # NAME_MAX
MAX_PATH_BYTES = 4096  # PATH_MAX
# Folders (at any depth) a model's file or edit must not touch, and why: they are not the app's
# sources, and what is there is someone else's to write.
PROTECTED_FOLDERS = {
    "node_modules": "npm installs packages there: declare the package as a dependency instead",
    ".kiln": "kiln keeps its own records there",
}


def normalize_file_path(raw: str) -> str:
    """Return ``raw`` as a safe relative POSIX path, or raise :class:`UnsafePathError`.

    Backslashes count as separators (models trained on Windows paths emit them), ``.`` and ``..``
    segments are resolved, and anything that is empty, absolute, a drive path, escapes the root,
    holds NUL, control characters or lone surrogates (no UTF-8 for them), or is longer than the
    component and path limits is refused.
    """
    path = raw.strip()
    if not path:
        raise UnsafePathError(f"empty file path: {raw!r}")
    if _CONTROL.search(path) or _SURROGATE.search(path):
        raise UnsafePathError(f"file path holds control characters or lone surrogates: {raw!r}")
    if len(path) > MAX_PATH_BYTES:  # a character is at least one byte: refuse before any work
        raise UnsafePathError(f"file path longer than {MAX_PATH_BYTES} bytes: {_head(raw)!r}")
    path = path.replace("\\", "/")
    if path.startswith("/") or _DRIVE.match(path):
        raise UnsafePathError(f"absolute file path: {raw!r}")
    normalized = posixpath.normpath(path)
    if normalized == ".." or normalized.startswith("../"):
        raise UnsafePathError(f"file path escapes the workspace: {raw!r}")
    if normalized == "." or path.endswith("/"):
        raise UnsafePathError(f"file path names a folder, not a file: {raw!r}")
    _check_lengths(normalized)
    return normalized


def check_writable(path: str) -> None:
    """Refuse a (normalized) path a model may read but not write: one inside, or named as, a
    folder of :data:`PROTECTED_FOLDERS` (:class:`ProtectedPathError`)."""
    for part in path.split("/"):
        if part in PROTECTED_FOLDERS:
            why = PROTECTED_FOLDERS[part]
            raise ProtectedPathError(f"{path!r} is inside {part}/, which is not written: {why}")


def _check_lengths(path: str) -> None:
    """Refuse a normalized path whose UTF-8 form or one of whose components is too long."""
    if len(path.encode()) > MAX_PATH_BYTES:
        raise UnsafePathError(f"file path longer than {MAX_PATH_BYTES} bytes: {_head(path)!r}")
    for component in path.split("/"):
        if len(component.encode()) > MAX_COMPONENT_BYTES:
            message = f"file path component longer than {MAX_COMPONENT_BYTES} bytes"
            raise UnsafePathError(f"{message}: {_head(component)!r}")


def _head(text: str) -> str:
    """The start of an overlong value, enough to recognise it in a message."""
    return text if len(text) <= 80 else f"{text[:80]}…"
