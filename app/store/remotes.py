"""A chat's git remote: its URL, branch, encrypted token and the last push's result."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from app.store.crypto import SecretBox
from app.store.db import Database


@dataclass(frozen=True, slots=True)
class ChatRemote:
    """Where a chat's project is pushed; ``token`` is decrypted (never show or log it)."""

    url: str
    branch: str
    token: str = field(default="", repr=False)
    last_push: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as the API shows it: whether a token is set, never the token."""
        return {
            "url": self.url,
            "branch": self.branch,
            "has_token": bool(self.token),
            "last_push": self.last_push,
        }


class RemoteTables:
    """The ``chat_remotes`` table."""

    _db: Database
    _box: SecretBox

    def set_chat_remote(self, chat_id: str, url: str, branch: str, token: str | None) -> None:
        """Store the chat's remote; ``token`` ``None`` keeps the stored one if the URL is the
        same (a token never follows a remote to another URL), ``""`` removes it."""
        secret = self._box.encrypt(token) if token else None
        with self._db.transaction() as db:
            if token is None:
                row = db.execute(
                    "SELECT token FROM chat_remotes WHERE chat_id = ? AND url = ?", (chat_id, url)
                ).fetchone()
                secret = row["token"] if row is not None else None
            db.execute(
                "INSERT INTO chat_remotes (chat_id, url, branch, token, updated, last_push)"
                " VALUES (?, ?, ?, ?, ?, NULL) ON CONFLICT (chat_id) DO UPDATE SET"
                " url = excluded.url, branch = excluded.branch, token = excluded.token,"
                " updated = excluded.updated, last_push = NULL",
                (chat_id, url, branch, secret, time.time()),
            )

    def chat_remote(self, chat_id: str) -> ChatRemote | None:
        """The chat's remote (token decrypted), or ``None`` when it has none."""
        row = self._db.query_one("SELECT * FROM chat_remotes WHERE chat_id = ?", (chat_id,))
        if row is None:
            return None
        token = self._box.decrypt(row["token"]) if row["token"] is not None else ""
        last = json.loads(row["last_push"]) if row["last_push"] else None
        return ChatRemote(row["url"], row["branch"], token, last)

    def delete_chat_remote(self, chat_id: str) -> bool:
        """Forget the chat's remote and its token; False if it had none."""
        with self._db.transaction() as db:
            removed = db.execute("DELETE FROM chat_remotes WHERE chat_id = ?", (chat_id,))
        return removed.rowcount > 0

    def record_push(self, chat_id: str, result: dict[str, Any]) -> None:
        """Keep the last push's result (what the UI shows beside the remote)."""
        with self._db.transaction() as db:
            db.execute(
                "UPDATE chat_remotes SET last_push = ? WHERE chat_id = ?",
                (json.dumps(result), chat_id),
            )
