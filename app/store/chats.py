"""Chats and their messages."""

from __future__ import annotations

import json
import time
from typing import Any

from app.store.db import Connection, Database
from app.store.models import ROLES, Chat, Message, chat_from_row, message_from_row, new_id


class ChatTables:
    """The ``chats`` and ``messages`` tables."""

    _db: Database

    def create_chat(self, user_id: str, title: str, chat_id: str | None = None) -> Chat:
        """A new, empty chat of the user (``chat_id`` when the caller chose it already: a chat
        created with its first message was admitted under that id)."""
        chat = Chat(chat_id or new_id(), user_id, title, time.time(), None)
        with self._db.transaction() as db:
            db.execute(
                "INSERT INTO chats (id, user_id, title, created) VALUES (?, ?, ?, ?)",
                (chat.id, chat.user_id, chat.title, chat.created),
            )
        return chat

    def list_chats(self, user_id: str) -> list[Chat]:
        """The user's chats, newest first."""
        rows = self._db.query(
            "SELECT * FROM chats WHERE user_id = ? ORDER BY created DESC, rowid DESC", (user_id,)
        )
        return [chat_from_row(row) for row in rows]

    def get_chat(self, chat_id: str) -> Chat | None:
        """The chat with this id, or None (whoever owns it: callers check ``user_id``)."""
        row = self._db.query_one("SELECT * FROM chats WHERE id = ?", (chat_id,))
        return chat_from_row(row) if row else None

    def set_chat_sandbox(self, chat_id: str, sandbox_id: str | None) -> None:
        """Remember the chat's sandbox."""
        with self._db.transaction() as db:
            db.execute("UPDATE chats SET sandbox_id = ? WHERE id = ?", (sandbox_id, chat_id))

    def rename_chat(self, chat_id: str, title: str) -> Chat | None:
        """Give the chat a new title; the chat as it now is (None if there is no such chat)."""
        with self._db.transaction() as db:
            db.execute("UPDATE chats SET title = ? WHERE id = ?", (title, chat_id))
        return self.get_chat(chat_id)

    def delete_chat(self, chat_id: str) -> bool:
        """Remove the chat with its messages, runs, run events and checkpoints (the schema's
        ``ON DELETE CASCADE``); False if there was no such chat."""
        with self._db.transaction() as db:
            removed = db.execute("DELETE FROM chats WHERE id = ?", (chat_id,)).rowcount
        return removed > 0

    def add_message(
        self, chat_id: str, role: str, content: str, data: dict[str, Any] | None = None
    ) -> Message:
        """Append a message to the chat; ``data`` is any JSON-ready dict."""
        with self._db.transaction() as db:
            return insert_message(db, chat_id, role, content, data)

    def list_messages(self, chat_id: str) -> list[Message]:
        """The chat's messages, oldest first."""
        rows = self._db.query("SELECT * FROM messages WHERE chat_id = ? ORDER BY rowid", (chat_id,))
        return [message_from_row(row) for row in rows]


def insert_message(
    db: Connection, chat_id: str, role: str, content: str, data: dict[str, Any] | None
) -> Message:
    """Insert a message inside the caller's transaction."""
    if role not in ROLES:
        raise ValueError(f"a message role must be one of {', '.join(ROLES)}, got {role!r}")
    message = Message(new_id(), chat_id, role, content, data, time.time())
    encoded = json.dumps(data) if data is not None else None
    db.execute(
        "INSERT INTO messages (id, chat_id, role, content, data, created)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (message.id, chat_id, role, content, encoded, message.created),
    )
    return message
