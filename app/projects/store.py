"""The project store's interface: what kiln needs of a place that keeps versioned projects.

:class:`ProjectStore` is small on purpose, so that a shared backend (a bare repository on a
shared volume, or packs and refs in object storage) can replace the local
:class:`app.projects.git_store.GitProjectStore`. Its methods block (they may run git or talk to
a network): callers run them in a thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

LATEST = "latest"
VersionRef = int | str  # a version number, or LATEST
MAX_VERSION_DIGITS = 9  # a billion versions: far more than any chat makes


def parse_version_ref(given: str) -> VersionRef | None:
    """``given`` (from a URL or a command line) as a version: ``latest``, or a number in ASCII
    digits; ``None`` for anything else (``'²'.isdigit()`` is true and ``int('٣')`` is 3, but
    neither is a version number, and too many digits would make ``int()`` refuse)."""
    if given == LATEST:
        return LATEST
    if given.isascii() and given.isdigit() and len(given) <= MAX_VERSION_DIGITS:
        return int(given)
    return None


@dataclass(frozen=True, slots=True)
class Change:
    """One file a version added (``A``), modified (``M``) or deleted (``D``)."""

    path: str
    status: str

    def to_dict(self) -> dict[str, str]:
        """JSON-ready form."""
        return {"path": self.path, "status": self.status}


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """Who made a version: the run and turn, and what the turn was (``note``)."""

    run: str = ""
    turn: int = 0
    note: str = ""


@dataclass(frozen=True, slots=True)
class Version:
    """One version of a project: numbered from 1, in the order they were made."""

    number: int
    id: str  # the commit
    created: float
    info: VersionInfo
    summary: str
    changes: tuple[Change, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as the versions API shows it."""
        return {
            "version": self.number,
            "id": self.id,
            "created": self.created,
            "run": self.info.run,
            "turn": self.info.turn,
            "note": self.info.note,
            "summary": self.summary,
            "files": [change.to_dict() for change in self.changes],
        }


@dataclass(frozen=True, slots=True)
class FileDiff:
    """The unified diff of one file of a version against its parent."""

    path: str
    status: str
    diff: str

    def to_dict(self) -> dict[str, str]:
        """JSON-ready form."""
        return {"path": self.path, "status": self.status, "diff": self.diff}


class ProjectStore(Protocol):
    """Versioned projects, one per chat; history only grows."""

    def commit(
        self, chat: str, files: Mapping[str, bytes], info: VersionInfo, *, always: bool = False
    ) -> Version | None:
        """Record ``files`` (the whole project) as the chat's next version; ``None`` when
        nothing changed (unless ``always``: a restore is a version even if it changes nothing)."""
        ...

    def versions(self, chat: str) -> list[Version]:
        """Every version, oldest first (empty for a chat without a project)."""
        ...

    def version(self, chat: str, ref: VersionRef) -> Version:
        """One version; :class:`~app.projects.errors.VersionNotFound` if there is none."""
        ...

    def files(self, chat: str, ref: VersionRef) -> dict[str, bytes]:
        """Every file of a version."""
        ...

    def diff(self, chat: str, ref: VersionRef) -> list[FileDiff]:
        """What a version changed, per file, against its parent."""
        ...

    def archive(self, chat: str, ref: VersionRef) -> bytes:
        """A zip of a version's files."""
        ...

    def repository(self, chat: str) -> Path:
        """The chat's project as a local git repository (its main branch one commit per
        version), for git commands that take it whole: a push to a remote."""
        ...

    def delete(self, chat: str) -> None:
        """Remove the chat's project and every version of it (nothing to do if it has none):
        the one exception to "history only grows", for a chat its owner deleted."""
        ...
