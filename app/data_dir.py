"""The data directory is kiln's OS user's alone: folders 0700, files 0600.

It holds the database (users, login tokens' hashes, encrypted provider keys, every chat and
event), the secret key that decrypts those keys, every chat's project and the embedded Redis's
files: nothing another local user may read. Each part creates its files privately (the store
its database, which SQLite's WAL and SHM files copy; the secret key; git and redis-server run
with :data:`PRIVATE_UMASK`). Every command on a data dir makes the folder itself 0700 first
(:meth:`app.config.ServiceSettings.from_env`), which already keeps other users out of all of
it; ``kiln serve`` then runs :func:`make_private` over everything in it, in the background
(a data dir of a few thousand chats has tens of thousands of files: about a second), so what an
older kiln left there, or a copy that kept its modes, is private too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

PRIVATE_UMASK = 0o077  # what kiln's child processes (git, redis-server) create: owner only
FOLDER_MODE = 0o700
OWNER_BITS = 0o700  # a file keeps its owner's permissions (0600, or 0700 for a git hook)


def private_folder(path: Path) -> Path:
    """``path`` (made if missing, with its parents) open to its owner only."""
    path.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    _tighten(path)
    return path


def create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists (then it is left as it is)."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def write_private_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, a file only its owner can read."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    os.chmod(path, 0o600)  # it may have existed with another mode


def make_private(folder: Path) -> list[str]:
    """Take group's and others' permissions from ``folder`` and everything in it: folders
    become 0700, files keep only their owner's bits; symlinks, sockets and the like are left
    alone (a symlink is never followed). Returns what could not be changed, in words (also
    logged); a missing ``folder`` is nothing to do."""
    problems: list[str] = []
    if not folder.is_dir():
        return problems
    for root, folders, files in os.walk(folder, onerror=lambda exc: problems.append(str(exc))):
        for name in (*folders, *files):
            _tighten(Path(root, name), problems)
    _tighten(folder, problems)
    for problem in problems:
        log.warning("cannot make the data directory private: %s", problem)
    return problems


def _tighten(path: Path, problems: list[str] | None = None) -> None:
    """Strip group's and others' bits from one folder or regular file."""
    try:
        status = os.lstat(path)
        if stat.S_ISDIR(status.st_mode):
            wanted = FOLDER_MODE
        elif stat.S_ISREG(status.st_mode):
            wanted = stat.S_IMODE(status.st_mode) & OWNER_BITS
        else:
            return
        if stat.S_IMODE(status.st_mode) != wanted:
            os.chmod(path, wanted)
    except FileNotFoundError:
        return  # removed meanwhile (a deleted chat's project, a rotated WAL)
    except OSError as exc:
        if problems is None:
            raise
        problems.append(f"{str(path)!r}: {exc}")
