"""Published apps: which manifest each chat's public link serves (app/publish builds them).

A chat's row is made on its first publish and kept: its ``slug`` (the link's name) is the
chat's for good, so a link handed out once keeps working after an unpublish and a later
publish. Moving the link to another build, or unpublishing, is one ``UPDATE`` of ``manifest``:
a request sees the old build or the new one, never a mix, and none at all at once after an
unpublish.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.store.db import Database

# A slug is a DNS label: lowercase letters and digits, 16 of them (80 bits: a link nobody
# guesses, so an app is only seen by those its owner gave the link to).
SLUG_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
SLUG_LENGTH = 16


def new_slug() -> str:
    """A fresh, unguessable link name."""
    return "".join(secrets.choice(SLUG_ALPHABET) for _ in range(SLUG_LENGTH))


@dataclass(frozen=True)
class Publication:
    """A chat's public link: its slug and, while published, the manifest and version it serves."""

    chat_id: str
    slug: str
    manifest: str | None
    version: int | None
    updated: float

    @property
    def live(self) -> bool:
        """Whether the link serves a build now."""
        return self.manifest is not None

    def to_dict(self) -> dict[str, Any]:
        """The API's form (the link itself is added by the API, which knows the host)."""
        return {
            "slug": self.slug,
            "published": self.live,
            "version": self.version if self.live else None,
            "manifest": self.manifest,
            "updated": self.updated,
        }


def publication_from_row(row: Mapping[str, Any]) -> Publication:
    """A :class:`Publication` of a ``publications`` row."""
    return Publication(
        row["chat_id"], row["slug"], row["manifest"], row["version"], float(row["updated"])
    )


class PublicationTables:
    """The ``publications`` table."""

    _db: Database

    def publication(self, chat_id: str) -> Publication | None:
        """The chat's publication row (published or not), or None if it never was."""
        row = self._db.query_one("SELECT * FROM publications WHERE chat_id = ?", (chat_id,))
        return publication_from_row(row) if row else None

    def publication_by_slug(self, slug: str) -> Publication | None:
        """The publication a link names, or None."""
        row = self._db.query_one("SELECT * FROM publications WHERE slug = ?", (slug,))
        return publication_from_row(row) if row else None

    def reserve_slug(self, chat_id: str) -> Publication:
        """The chat's publication row, made (unpublished, with a new slug) if it has none."""
        with self._db.transaction() as db:
            row = db.execute("SELECT * FROM publications WHERE chat_id = ?", (chat_id,)).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO publications (chat_id, slug, updated) VALUES (?, ?, ?)",
                    (chat_id, new_slug(), time.time()),
                )
                row = db.execute(
                    "SELECT * FROM publications WHERE chat_id = ?", (chat_id,)
                ).fetchone()
        return publication_from_row(row)

    def set_publication(self, chat_id: str, manifest: str | None, version: int | None) -> None:
        """Point the chat's link at ``manifest`` (built from ``version``), or at nothing
        (``None``: unpublished); one UPDATE, so readers see the old state or the new one."""
        with self._db.transaction() as db:
            db.execute(
                "UPDATE publications SET manifest = ?, version = ?, updated = ? WHERE chat_id = ?",
                (manifest, version, time.time(), chat_id),
            )

    def published_manifests(self) -> set[str]:
        """Every manifest a link serves now (what garbage collection must keep)."""
        rows = self._db.query("SELECT manifest FROM publications WHERE manifest IS NOT NULL")
        return {str(row["manifest"]) for row in rows}
