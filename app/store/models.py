"""The store's records: plain frozen dataclasses, with the JSON forms the HTTP API shows."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

QUEUED, RUNNING = "queued", "running"
COMPLETED, FAILED, CANCELLED = "completed", "failed", "cancelled"
ACTIVE_STATUSES = (QUEUED, RUNNING)
TERMINAL_STATUSES = (COMPLETED, FAILED, CANCELLED)
TOKEN_KINDS = ("api", "session", "login")
ROLES = ("user", "assistant")
PUBLIC_RUN_FIELDS = (
    *("id", "chat_id", "status", "stop_reason", "turns", "usage", "sandbox_id"),
    *("preview_url", "error", "created", "started", "finished"),
)


def new_id() -> str:
    """A fresh opaque id."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class User:
    """A person (or the ``local`` user of a single-user install)."""

    id: str
    name: str
    created: float

    def to_dict(self) -> dict[str, Any]:
        """The API's form: ``{id, name}``."""
        return {"id": self.id, "name": self.name}


@dataclass(frozen=True)
class Chat:
    """A conversation; its sandbox once a run acquired one."""

    id: str
    user_id: str
    title: str
    created: float
    sandbox_id: str | None

    def to_dict(self) -> dict[str, Any]:
        """The API's form: ``{id, title, created, sandbox_id}``."""
        return {
            "id": self.id,
            "title": self.title,
            "created": self.created,
            "sandbox_id": self.sandbox_id,
        }


@dataclass(frozen=True)
class ImageInfo:
    """An image attached to a message, as listed with it (its bytes are fetched on their own)."""

    id: str
    media_type: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        """The API's form: ``{id, media_type, size}``."""
        return {"id": self.id, "media_type": self.media_type, "size": self.size}


@dataclass(frozen=True)
class Message:
    """A user's request or the assistant's answer (with its files, packages and usage)."""

    id: str
    chat_id: str
    role: str
    content: str
    data: dict[str, Any] | None
    created: float
    images: tuple[ImageInfo, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The API's form: ``{id, role, content, data, created, images}``."""
        return {
            "id": self.id,
            "role": self.role,
            "content": self.content,
            "data": self.data,
            "created": self.created,
            "images": [image.to_dict() for image in self.images],
        }


@dataclass(frozen=True)
class Run:
    """One execution of the agent loop for one user message."""

    id: str
    chat_id: str
    user_id: str
    message_id: str | None
    provider: str | None
    model: str | None
    template: str | None
    status: str
    stop_reason: str | None
    turns: int
    usage: dict[str, Any] = field(default_factory=dict)
    sandbox_id: str | None = None
    preview_url: str | None = None
    error: str | None = None
    created: float = 0.0
    started: float | None = None
    finished: float | None = None
    worker: str | None = None
    attempts: int = 0
    cancel_requested: bool = False
    reply_id: str | None = None

    @property
    def terminal(self) -> bool:
        """Whether the run has ended (completed, failed or cancelled)."""
        return self.status in TERMINAL_STATUSES

    def to_dict(self) -> dict[str, Any]:
        """The API's form (worker bookkeeping left out)."""
        return {key: getattr(self, key) for key in PUBLIC_RUN_FIELDS}


def user_from_row(row: Mapping[str, Any]) -> User:
    """A :class:`User` from its table row."""
    return User(row["id"], row["name"], row["created"])


def chat_from_row(row: Mapping[str, Any]) -> Chat:
    """A :class:`Chat` from its table row."""
    return Chat(row["id"], row["user_id"], row["title"], row["created"], row["sandbox_id"])


def message_from_row(row: Mapping[str, Any], images: tuple[ImageInfo, ...] = ()) -> Message:
    """A :class:`Message` from its table row (and its images' rows)."""
    data = json.loads(row["data"]) if row["data"] is not None else None
    return Message(
        row["id"], row["chat_id"], row["role"], row["content"], data, row["created"], images
    )


def run_from_row(row: Mapping[str, Any]) -> Run:
    """A :class:`Run` from its table row."""
    # By the dataclass's fields: a database may add columns of its own (Postgres' rowid).
    values = {column: row[column] for column in _RUN_COLUMNS}
    values["usage"] = json.loads(values["usage"] or "{}")
    values["cancel_requested"] = bool(values["cancel_requested"])
    return Run(**values)


_RUN_COLUMNS = tuple(column.name for column in fields(Run))
