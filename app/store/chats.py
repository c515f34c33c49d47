"""Chats, their messages and the images attached to messages.

Images live in ``message_images`` (bytes in a BLOB column), written in the message's own
transaction and removed with it by the schema's cascade (a deleted chat takes its messages, and
they their images): nothing to clean up on disk, nothing left behind by a crash between two
steps. An image is read back only through its chat (:meth:`ChatTables.chat_image`), which the
API has already checked is the caller's.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from typing import Any

from app.chat_images import ChatImage
from app.store.db import Connection, Database
from app.store.models import (
    ROLES,
    Chat,
    ImageInfo,
    Message,
    chat_from_row,
    message_from_row,
    new_id,
)


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
        self,
        chat_id: str,
        role: str,
        content: str,
        data: dict[str, Any] | None = None,
        images: Sequence[ChatImage] = (),
    ) -> Message:
        """Append a message to the chat, with its ``images`` (in order); ``data`` is any
        JSON-ready dict."""
        with self._db.transaction() as db:
            message = insert_message(db, chat_id, role, content, data)
            infos = tuple(_insert_image(db, message, n, image) for n, image in enumerate(images))
        return dataclasses.replace(message, images=infos)

    def list_messages(self, chat_id: str) -> list[Message]:
        """The chat's messages, oldest first, each with its images listed."""
        rows = self._db.query("SELECT * FROM messages WHERE chat_id = ? ORDER BY rowid", (chat_id,))
        images: dict[str, list[ImageInfo]] = {}
        for image in self._db.query(
            "SELECT i.id, i.message_id, i.media_type, i.size FROM message_images i"
            " JOIN messages m ON m.id = i.message_id WHERE m.chat_id = ?"
            " ORDER BY i.message_id, i.ordinal",
            (chat_id,),
        ):
            info = ImageInfo(image["id"], image["media_type"], image["size"])
            images.setdefault(image["message_id"], []).append(info)
        return [message_from_row(row, tuple(images.get(row["id"], ()))) for row in rows]

    def message_images(self, message_id: str) -> tuple[ChatImage, ...]:
        """The images of a message, in the order they were attached, bytes and all."""
        rows = self._db.query(
            "SELECT media_type, data FROM message_images WHERE message_id = ? ORDER BY ordinal",
            (message_id,),
        )
        return tuple(ChatImage(row["media_type"], bytes(row["data"])) for row in rows)

    def chat_image(self, chat_id: str, image_id: str) -> ChatImage | None:
        """Image ``image_id`` if it belongs to a message of chat ``chat_id``, else None."""
        row = self._db.query_one(
            "SELECT i.media_type, i.data FROM message_images i"
            " JOIN messages m ON m.id = i.message_id WHERE i.id = ? AND m.chat_id = ?",
            (image_id, chat_id),
        )
        return ChatImage(row["media_type"], bytes(row["data"])) if row else None


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


def _insert_image(db: Connection, message: Message, ordinal: int, image: ChatImage) -> ImageInfo:
    """Store one image of ``message`` inside the caller's transaction."""
    info = ImageInfo(new_id(), image.media_type, len(image.data))
    db.execute(
        "INSERT INTO message_images (id, message_id, ordinal, media_type, size, data, created)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (info.id, message.id, ordinal, info.media_type, info.size, image.data, message.created),
    )
    return info
